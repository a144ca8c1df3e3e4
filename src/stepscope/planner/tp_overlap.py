"""How much of a layer's TP communication hides behind the GEMMs it is fused with, per mechanism.

A layer (sequence parallelism) runs 8 TP collectives per micro-batch, each of time ``c``: forward,
an all-gather before the q/k/v projections and one before the MLP's up projections, a
reduce-scatter after the output projection and one after the down projection; backward, the
mirror images (the all-gathers become reduce-scatters of the input gradients, the
reduce-scatters all-gathers of the output gradients). A collective overlapped with a GEMM can hide
no longer than that GEMM runs; chunked into tp pieces (the local one first), the pipeline hides
(tp-1)/tp of the collective when the GEMM is longer and (tp-1)/tp of the GEMM when it is shorter:
hidden = min(share x c, (tp-1)/tp x GEMM). Per mechanism (TP_OVERLAP), with GEMM forward times
qkv, o, up, down (backward: input and weight gradients, each as long as the forward):
- ``full`` (Megatron --tp-comm-overlap, PyTorch async TP): the forward all-gathers with the
  projections they feed (qkv, up), the forward reduce-scatters with the GEMMs producing their
  input (o, down), the backward all-gathers with the row-parallel layer's input-gradient GEMM
  only (o, down: PyTorch's pass fuses an all-gather with the matmuls that take the gathered
  tensor as their left operand, ``_find_consumer_matmuls``, and the weight gradient takes it
  transposed; Transformer Engine overlaps that all-gather with the dgrad GEMM), the backward
  reduce-scatters with the input-gradient GEMM (qkv, up), unless the
  projections are separate GEMMs (a sum of matmuls: PyTorch's micro-pipeline TP,
  torch/_inductor/fx_passes/micro_pipeline_tp.py, fuses a reduce-scatter only with the single
  matmul producing its input, so those 2 stay exposed);
- ``bwd`` (Megatron with sequence parallelism and CUDA_DEVICE_MAX_CONNECTIONS=1): the backward
  reduce-scatters of the column-parallel layers' input gradients under their weight-gradient
  GEMMs (qkv, up), whole; without sequence
  parallelism (4 all-reduces of time 2c per layer instead of 8 collectives) the same layers'
  input-gradient all-reduces, 2c each, under the same GEMMs (Megatron's asynchronous
  tensor-parallel all-reduce, LinearWithGradAccumulationAndAsyncCommunication: launched before
  the weight-gradient GEMM, waited on after it; Korthikanti et al. 2022, section 6.2);
- ``bwd+shard`` (nanotron's async TP): that, plus two all-gathers each hiding 2/tp of their time
  under the GEMM on the rank's own 1/tp shard (qkv/tp, up/tp).
With GEMMs longer than their collectives this is the share rule the model used before: full
(tp-1)/tp of all 8 (6 of 8 with separate projections), bwd 2 of 8 (without sequence parallelism
4 of 8: half of the traffic), bwd+shard 2/8 + 2/8 x 2/tp. ``full`` and ``bwd+shard`` split
all-gathers and reduce-scatters, so they need sequence parallelism (search.parse_strategy).

Frameworks whose sequence parallelism saves the column-parallel layers' input shards, not the
gathered inputs (``sp_regather``: Megatron's LinearWithGradAccumulationAndAsyncCommunication,
nanotron's column linears with tp_recompute_allgather, its default), all-gather them again in
backward for the weight gradient: 2 more collectives of time ``c`` per dense layer (q/k/v's input,
the MLP's), 1 per MoE layer (the attention's; the experts' input is not counted). Both launch it
before the input-gradient GEMM and wait for it before the weight gradient, so under every overlap
mechanism it hides under the input-gradient GEMM (as long as the forward GEMM), ``min(c, GEMM)``;
the reduce-scatter queued after it on the same stream then runs under the weight gradient, which
adds nothing when both GEMMs are as long: the exposed time of the pair is ``2 max(c - GEMM, 0)``
either way. Without a mechanism (nanotron's synchronous column linear) it is exposed.
"""

from __future__ import annotations

import numpy as np


def hidden_per_layer(
    mode: np.ndarray,
    tp: np.ndarray,
    c: np.ndarray,
    qkv: np.ndarray,
    o: np.ndarray,
    up: np.ndarray,
    down: np.ndarray,
    fused: bool,
    sp: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(seconds hidden of the attention's 4 collectives, of the dense MLP's 4) per layer and
    micro-batch; GEMM times in seconds, forward; ``sp`` 0 where sequence parallelism is off
    (default: on)."""
    s = (tp - 1) / np.maximum(tp, 1)
    grad_c = c if sp is None else np.where(sp > 0, 1.0, 2.0) * c  # a reduce-scatter, or an all-reduce

    def fused_with(gemm: np.ndarray) -> np.ndarray:
        return np.minimum(s * c, s * gemm)

    full_a = 2 * fused_with(o) + fused_with(qkv) + (fused_with(qkv) if fused else 0.0)
    full_m = 2 * fused_with(down) + fused_with(up) + (fused_with(up) if fused else 0.0)
    bwd_a, bwd_m = np.minimum(grad_c, qkv), np.minimum(grad_c, up)
    shard_a = bwd_a + np.minimum(2 / tp * c, qkv / tp)
    shard_m = bwd_m + np.minimum(2 / tp * c, up / tp)
    zero = np.zeros_like(c)
    pick = np.clip(mode, 0, 3)
    return np.choose(pick, [zero, full_a, bwd_a, shard_a]), np.choose(pick, [zero, full_m, bwd_m, shard_m])


def share_of_all(mode: np.ndarray, tp: np.ndarray, fused: bool, sp: np.ndarray | None = None) -> np.ndarray:
    """The share of all TP time each mechanism hides when every GEMM outlasts its collective (used
    for MoE layers' expert-TP collectives, whose grouped GEMMs the model does not split): the
    long-GEMM limit of :func:`hidden_per_layer` over a layer's 8 collectives."""
    ones, endless = (
        np.ones_like(tp),
        np.full_like(tp, 1e300),
    )  # GEMMs longer than any collective (finite: 0 x inf is nan)
    attn, mlp = hidden_per_layer(mode, tp, ones, endless, endless, endless, endless, fused, sp)
    return (attn + mlp) / 8


def regather_per_layer(
    mode: np.ndarray, c: np.ndarray, qkv: np.ndarray, up: np.ndarray, layers: float, dense_layers: float
) -> tuple[np.ndarray, np.ndarray]:
    """(seconds, seconds hidden) of the backward re-gathers (module docstring) of ``layers`` layers,
    ``dense_layers`` of them with a dense MLP, per micro-batch: ``c`` per collective, forward GEMM
    times ``qkv`` and ``up``."""
    raw = c * (layers + dense_layers)
    hidden = np.where(mode > 0, np.minimum(c, qkv) * layers + np.minimum(c, up) * dense_layers, 0.0)
    return raw, hidden
