"""Communication buffers per device: what the collectives hold beyond the sharded states.

- ``COMM_BUFFER_BYTES`` for the communicators' own buffers (NCCL channels, bucket copies): a prior,
  left out on devices whose runtime assigns memory statically (``Hardware.static_memory``, XLA on
  TPU: its collectives' buffers are the compiled program's own, counted below).
- ZeRO-3 / FSDP with ``zero3_gather`` "layer" (PyTorch FSDP wrapped per transformer block)
  gathers a layer's weights whole before the layer runs and frees them after it.
  The next layer's all-gather is issued while the current layer computes (FSDP2's implicit
  prefetch; FSDP1's ``limit_all_gathers`` allows at most two in flight), so two layers' bf16
  weights are whole at the peak: 2 x 2 B per parameter of a layer on this device. In backward the
  layer's gradients come out whole in bf16 (2 B), and with fp32 reduction (FSDP2's
  ``reduce_dtype``, torchtitan's default) they are copied to fp32 for the reduce-scatter
  (``grad_bytes`` more; with bf16 reduction the bf16 gradients are reduced as they are). The peak
  is in backward: ``(4 + 2 + (grad_bytes if grad_bytes != 2 else 0)) x layer parameters``, 10 B
  with fp32 reduction. The embedding and the output layer are FSDP units of their own: where one
  is larger than a layer (large vocabularies), it sets the peak instead.
- Weights kept gathered from forward to backward (``keep_params``) are counted whole under
  weights already; only the gradient part remains.
- With ``zero3_gather`` "tensor" each parameter tensor is gathered by itself just before the op
  that reads it and freed after (XLA's SPMD partitioner emits one all-gather per sharded array,
  the latency-hiding scheduler starts the next while the current op runs; DeepSpeed ZeRO-3 fetches
  module by module): the same bytes per parameter, but of the largest tensor on the device
  (:func:`largest_tensor_params`) instead of a whole layer. MaxText's v5e runs (16B-128B on 16 GiB
  chips, benchmarks/data/published_runs.csv) fit only this way: two 32B layers alone would hold 10 GB.
"""

from __future__ import annotations

import numpy as np

from ..catalog.model_flops import ModelShape
from .job import Job

COMM_BUFFER_BYTES = 1e9  # prior: NCCL channel buffers and bucket copies
GATHERED_LAYERS = 2  # the running layer and the prefetched next one


def comm_buffer_bytes(
    zero: np.ndarray,
    keep: np.ndarray,
    unit_params_dev: np.ndarray,
    grad_bytes: float,
    *,
    static_memory: bool = False,
    param_bytes: float | np.ndarray = 2.0,
) -> np.ndarray:
    """Bytes per device; ``unit_params_dev``: the parameters ZeRO-3 gathers at once on this device
    (after TP and EP, before ZeRO sharding): one layer's, or the largest tensor's (module docstring);
    ``param_bytes`` per gathered parameter: 2 (bf16), 1 when the weights are gathered in fp8
    (fp8_all_gather)."""
    grads = 2.0 + (grad_bytes if grad_bytes != 2 else 0.0)
    params = np.where(keep, 0.0, GATHERED_LAYERS * param_bytes)
    gathered = np.where(zero >= 3, (params + grads) * unit_params_dev, 0.0)
    return (0.0 if static_memory else COMM_BUFFER_BYTES) + gathered


def largest_tensor_params(
    m: ModelShape, fused_projections: bool, tp: np.ndarray, ep: np.ndarray, etp: np.ndarray
) -> np.ndarray:
    """Parameters of the largest weight tensor on a device, as the framework registers them: the
    attention's q (or fused qkv) and output projections, MLA's up-projections, a linear-attention
    projection and a dense MLP matrix (gate and up one tensor when fused), split over ``tp``; the
    routed experts' matrices stacked in one array per projection (XLA's MoE layers) over ``ep``
    and ``etp``; the embedding (vocab x h) over ``tp``."""
    h, hd = float(m.d_model), float(m.head_dim)
    gate_up = 2.0 if (fused_projections and m.gated_mlp) else 1.0
    if m.mla:
        q_lora, kv_lora, nope, rope, v = m.mla
        attn = max(
            float(q_lora or h) * m.n_heads * (nope + rope),
            float(kv_lora) * m.n_heads * (nope + v),
            float(m.n_heads) * v * h,
        )
    else:
        attn = h * hd * (m.n_heads + (2 * m.n_kv_heads if fused_projections else 0))  # q (or qkv); o is as wide as q
    if m.linear_attn:
        hk, dk, hv, dv = m.linear_attn
        attn = max(attn, h * max(hk * dk, hv * dv))
    dense_mlp = gate_up * h * m.d_ff if (not m.n_experts or m.first_dense_layers) else 0.0
    shared = gate_up * h * m.d_ff_expert * m.n_shared_experts
    per_tp = max(attn, dense_mlp, shared, float(m.vocab) * h) / tp
    experts = gate_up * h * m.d_ff_expert * m.n_experts / (ep * etp) if m.n_experts else 0.0
    return np.asarray(np.maximum(per_tp, experts))


def layer_gather_bytes(job: Job) -> float:
    """Bytes per transformer-layer parameter a ZeRO-3 all-gather moves: 1 with
    ``fp8_all_gather`` under fp8, else 2 (bf16)."""
    return 1.0 if job.precision == "fp8" and job.framework.fp8.all_gather else 2.0


def gather_bytes(
    job: Job, *, p_dev: np.ndarray, layers_p: np.ndarray, unit_is_layer: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(bytes of one ZeRO-3 all-gather of the stage's weights, bytes per parameter ZeRO-3 holds
    gathered). bf16, 2 B; with ``fp8_all_gather`` (and fp8) the layers' weights (``layers_p`` of
    the stage's ``p_dev``) are gathered in fp8, 1 B, and so is the gathered unit when it is a layer
    gathered whole (``unit_is_layer``); the embedding and the output layer stay bf16."""
    per_layer_param = layer_gather_bytes(job)
    per_param = np.where(
        np.logical_and(per_layer_param == 1.0 and job.framework.zero.gather == "layer", unit_is_layer), 1.0, 2.0
    )
    return 2 * p_dev - (2.0 - per_layer_param) * layers_p, per_param
