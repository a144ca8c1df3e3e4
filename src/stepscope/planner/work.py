"""The compute work of a training step, before efficiencies: GEMM FLOPs weighted by their shape
class, and the memory-bound bytes (elementwise ops, fp8 casts). Formulas and sources are in the
docstring of planner/cost.py; the byte counts of the recipes and policies in planner/rates.py."""

from __future__ import annotations

import numpy as np

from .job import Job
from .rates import fp8_cast_bytes, fp8_gains, linear_shape


def _projection_shapes(job: Job, m_tok: np.ndarray, tp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(shape efficiency (rates.linear_shape) of the q and output projections, h by q_w/tp; of
    the GEMM k and v run in: fused with q, h by (q_w + 2 kv_w)/tp, or their own h by kv_w/tp),
    m_tok tokens tall."""
    m = job.model
    h, q_w, kv_w = float(m.d_model), m.n_heads * m.head_dim, m.n_kv_heads * m.head_dim
    kv_wide = q_w + 2 * kv_w if job.framework.kernels.fused_projections else kv_w
    return linear_shape(m_tok, h, q_w / tp), linear_shape(m_tok, h, kv_wide / tp)


def fp8_slow_linears(job: Job, tp: np.ndarray, mlp_w: np.ndarray | float) -> dict[str, np.ndarray] | None:
    """Which of a layer's linears run at the bf16 rate under fp8 (``fp8_gain_thresholds``;
    None when every linear gains): q (h in, q_w/tp out), kv (h, kv_w/tp each), the fused qkv
    (h, (q_w + 2 kv_w)/tp), o (q_w/tp, h), the MLP's up (h, ``mlp_w`` per device each; fused gate
    and up 2 mlp_w) and down (mlp_w, h), each failing torchao's thresholds (rates.fp8_gains)."""
    if not (job.precision == "fp8" and job.framework.fp8.gain_thresholds):
        return None
    m = job.model
    h, q_w, kv_w = float(m.d_model), float(m.n_heads * m.head_dim), float(m.n_kv_heads * m.head_dim)

    def slow(in_dim: float | np.ndarray, out_dim: float | np.ndarray) -> np.ndarray:
        return ~fp8_gains(job.framework.fp8.recipe, in_dim, out_dim)

    return {
        "q": slow(h, q_w / tp),
        "kv": slow(h, kv_w / tp),
        "qkv": slow(h, (q_w + 2 * kv_w) / tp),
        "o": slow(q_w / tp, h),
        "up": slow(h, mlp_w * (2 if m.gated_mlp and job.framework.kernels.fused_projections else 1)),
        "down": slow(mlp_w, h),
    }


def gemm_seconds_at_peak(
    job: Job, dense_flops: float, tokens: float, m_tok: np.ndarray, tp: np.ndarray, ep: np.ndarray, etp: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the step's GEMM FLOPs divided by each linear's shape efficiency, the output layer's part
    of it, the part that runs at the bf16 rate under fp8). Each linear by its inputs and outputs
    per device, ``m_tok`` (the micro-batch's tokens on a device) tall (rates.linear_shape):
    attention projections (q and o h by q_w/tp; k/v fused with q into one h by (q_w + 2 kv_w)/tp
    GEMM, or separate h by kv_w/tp ones), the MLP's gate and up (one 2f/tp wide GEMM when fused,
    else two f/tp) and down (f/tp by h), routed experts h by d_ff_expert/etp as one grouped GEMM
    over the local experts with the tokens each receives, the output layer h by V/tp.

    At the bf16 rate under fp8: the output layer (torchtitan's float8 configs filter "output";
    Megatron's output layer is a plain ColumnParallelLinear, outside Transformer Engine's fp8),
    and, with ``fp8_gain_thresholds``, the projections and MLP linears whose per-device shape
    fails torchao's thresholds (fp8_slow_linears; the up projections are 2/3 of a gated MLP's
    FLOPs)."""
    m = job.model
    h, L = float(m.d_model), float(m.n_layers)
    attn_layers = L - m.linear_layers
    moe_layers = float(m.n_layers - m.first_dense_layers) if m.n_experts else 0.0
    mixer_flops = 6.0 * m.mixer_params_total() * tokens
    logits_flops = 6.0 * m.vocab * h * tokens
    expert_flops = 6.0 * moe_layers * m.experts_per_token * (3 if m.gated_mlp else 2) * h * m.d_ff_expert * tokens
    mlp_flops = dense_flops - mixer_flops - logits_flops - expert_flops
    q_w, kv_w = m.n_heads * m.head_dim, m.n_kv_heads * m.head_dim
    mlp_w = (m.d_ff if not m.n_experts or m.first_dense_layers else max(m.n_shared_experts, 1) * m.d_ff_expert) / tp
    logits_gemm = logits_flops / linear_shape(m_tok, h, m.vocab / tp)
    if m.mla or not attn_layers:
        mixer_time = mixer_flops / linear_shape(m_tok, h, min(h, q_w) / tp)
    else:
        # softmax attention by projection; linear-attention mixers (hybrid models) as q
        qo_flops, kv_flops = 12.0 * q_w * h * attn_layers * tokens, 12.0 * kv_w * h * attn_layers * tokens
        q_shape, kv_shape = _projection_shapes(job, m_tok, tp)
        o_s = qo_flops / 2 / q_shape  # the output projection; a separate q projection takes as long
        if job.framework.kernels.fused_projections:
            qkv_s = (qo_flops / 2 + kv_flops) / kv_shape
            proj_time = qkv_s + o_s
        else:
            proj_time = qo_flops / q_shape + kv_flops / kv_shape
        mixer_time = proj_time + (mixer_flops - qo_flops - kv_flops) / q_shape
    up = 2.0 / 3.0 if m.gated_mlp else 0.5  # the up (gate and up) projections' share of an MLP's FLOPs
    fused_up = 2.0 if m.gated_mlp and job.framework.kernels.fused_projections else 1.0
    up_time = up * mlp_flops / linear_shape(m_tok, h, fused_up * mlp_w)
    down_time = (1.0 - up) * mlp_flops / linear_shape(m_tok, mlp_w, h)
    mlp_time = up_time + down_time
    gemm_time = mixer_time + mlp_time + logits_gemm
    bf16_time = logits_gemm + np.zeros_like(tp)
    slow = fp8_slow_linears(job, tp, mlp_w)
    if slow is not None and attn_layers and not m.mla:
        if job.framework.kernels.fused_projections:
            bf16_time = bf16_time + np.where(slow["qkv"], qkv_s, 0.0) + np.where(slow["o"], o_s, 0.0)
        else:
            bf16_time = (
                bf16_time
                + np.where(slow["q"], o_s, 0.0)
                + np.where(slow["o"], o_s, 0.0)
                + np.where(slow["kv"], kv_flops / kv_shape, 0.0)
            )
        bf16_time = bf16_time + np.where(slow["up"], up_time, 0.0) + np.where(slow["down"], down_time, 0.0)
    if m.n_experts:
        # tokens per local expert: each rank sends its 1/tp share of the micro-batch (sequence
        # parallelism), gathered over the expert-TP group (etp / tp of it; moe_permutation_bytes)
        m_expert = m_tok * (etp / tp) * ep * m.experts_per_token / m.n_experts
        # the most loaded expert rank sets the pace (moe_imbalance)
        local = m.n_experts / ep  # one grouped GEMM runs the local experts (rates.gemm_rate)
        pad = tile_padding(job, m_expert, local)
        rows = m_expert * pad
        e_w = m.d_ff_expert / np.maximum(etp, 1)
        e_up = 2.0 if m.gated_mlp else 1.0  # gate and up fused (Megatron's grouped fc1)
        gemm_time = gemm_time + expert_flops * pad * job.framework.moe.imbalance / job.calibration.expert_scale * (
            up / linear_shape(rows, h, e_up * e_w, local) + (1.0 - up) / linear_shape(rows, e_w, h, local)
        )
    return gemm_time, logits_gemm, bf16_time


def tile_padding(job: Job, m_expert: np.ndarray, local: np.ndarray) -> np.ndarray:
    """Rows a grouped GEMM computes per row of its tokens, with ``moe_tile_rows`` t > 0:
    ``1 + t (G - 1) / G / r`` for G local experts of r tokens each on a kernel's device (a chip's
    tokens / the devices the runtime shows a chip: a TPU v7x TensorCore is a JAX device with its
    own batch; v4 and v5p run their two as one, megacore).

    Megablox (MaxText's gmm and tgmm) walks the rows in tiles of t; an expert whose first row is
    not a tile's first row computes that whole tile again, so the kernel visits up to m/t + G - 1
    tiles (``make_group_metadata``). With the experts' boundaries spread at random over the tile,
    each of the G - 1 experts after the first costs t rows more (1 - 1/t of the time: taken as 1).
    The forward, input-gradient and weight-gradient kernels all walk the same tiles. t = 0: 1."""
    t = float(job.framework.moe.tile_rows)
    if t <= 0:
        return np.ones_like(np.asarray(m_expert, dtype=np.float64))
    r = np.maximum(np.asarray(m_expert, dtype=np.float64) / job.hw.runtime_devices, 1.0)
    return 1.0 + t * (local - 1.0) / np.maximum(local, 1.0) / r


def gemm_kernels_per_layer(job: Job) -> float:
    """Forward GEMM kernels per layer, averaged over the model's layers (the backward runs two per
    forward one): softmax attention q/k/v fused into one and the output projection (2; separate
    projections 4), MLA's q down and up (or one q), kv down and up and output (5 or 4), a
    linear-attention or Mamba mixer's input and output projections (2, at least); a dense MLP's
    fused gate-and-up and down (2; separate gate and up 3; ungated 2), a MoE layer's router and
    its two grouped expert GEMMs, one kernel each over the local experts (rates.gemm_rate), plus
    a shared expert's MLP."""
    m = job.model
    L = float(m.n_layers)
    if m.mla:
        mixer = 5.0 if m.mla[0] else 4.0
    else:
        mixer = 2.0 if job.framework.kernels.fused_projections else 4.0
    mlp = 2.0 if job.framework.kernels.fused_projections or not m.gated_mlp else 3.0
    moe = float(m.n_layers - m.first_dense_layers) if m.n_experts else 0.0
    moe_mlp = 3.0 + (mlp if m.n_shared_experts else 0.0)
    total = (L - m.linear_layers) * mixer + m.linear_layers * 2.0 + (L - moe) * mlp + moe * moe_mlp
    return total / L


def memory_bound_bytes(
    job: Job,
    tokens: float,
    tp: np.ndarray,
    sp: np.ndarray,
    score_bytes: float,
    ep: np.ndarray | None = None,
    etp: np.ndarray | None = None,
) -> float | np.ndarray:
    """HBM bytes of the step's elementwise work, summed over the devices: per token and layer 2
    norms (read + write an h-vector), 2 residual adds (2 reads, 1 write), the MLP activation
    (gated: 2 reads + 1 write of an f-vector; else 1 + 1) in bf16, backward about twice the
    forward; eager ops add their counted bytes; fp8 adds its recipe's casts; MoE layers add the
    token permutations (moe_permutation_bytes, with ``ep`` and ``etp``; ep = 1 and etp = tp when
    not given); plus the attention scores without flash attention (``score_bytes``). Without
    sequence parallelism (``sp`` 0) every TP rank repeats the h-wide part on all of its
    replica's tokens.

    Eager ops (``fused_elementwise`` False; counted from torchtitan's eager Llama block): the
    forward moves ``64 h + 20 (q + kv) + 4 f`` bytes more per token and layer. An RMSNorm upcasts
    to fp32, squares, averages, scales, casts back and multiplies by its weight, 36 B per element
    instead of 4; rotary embeddings go through fp32 complex numbers, ~20 B per element of q and k;
    SwiGLU's SiLU and product are two kernels, 10 B instead of 6.

    K and V repeated to every query head (``kv_repeated``, torchtitan): the copy writes the
    (n_heads - kv_heads) x head_dim extra elements of K and of V in forward, the attention kernel
    writes their gradients in backward and the repeat's backward reads them to sum them:
    3 x 2 x (q - kv) x 2 B = 12 (q - kv) bytes per token and softmax-attention layer (compiled:
    the rotary kernel writes the repeated heads directly, so the kv-wide part is not counted again)."""
    m = job.model
    L = float(m.n_layers)
    q_w, kv_w = m.n_heads * m.head_dim, m.n_kv_heads * m.head_dim
    f_act = (m.experts_per_token + m.n_shared_experts) * m.d_ff_expert if m.n_experts else m.d_ff
    h_wide = h_wide_elementwise_bytes(job, tokens)
    # eager ops (docstring): rotary embeddings, SwiGLU as two kernels (norms: h_wide_elementwise_bytes)
    rotary = 0.0 if job.framework.kernels.fused_elementwise else 20 * (q_w + kv_w) * (L - m.linear_layers)
    swiglu = 4 * f_act * L if m.gated_mlp and job.swiglu_eager else 0.0
    # K and V repeated to n_heads (kv_repeated): the extra heads written in forward, their
    # gradients written by the kernel and read by the repeat's backward (docstring)
    repeat = 12.0 * (q_w - kv_w) * (L - m.linear_layers) if job.framework.kernels.kv_repeated and not m.mla else 0.0
    elem_bytes: float | np.ndarray = (
        3 * 2 * (3 if m.gated_mlp else 2) * f_act * L * tokens
        + score_bytes
        + h_wide
        + 3 * (rotary + swiglu) * tokens
        + repeat * tokens
    )
    if job.precision == "fp8":  # dynamic scaling's casts of GEMM inputs and output gradients
        elem_bytes = elem_bytes + fp8_cast_bytes(m, job.framework.fp8.recipe, tp) * (L - m.linear_layers) * tokens
    if m.n_experts:
        elem_bytes = elem_bytes + moe_permutation_bytes(
            job, tokens, np.ones_like(tp) if ep is None else ep, tp if etp is None else etp
        )
    return elem_bytes + h_wide * (tp - 1) * (1.0 - sp)


def moe_permutation_bytes(job: Job, tokens: float, ep: np.ndarray, etp: np.ndarray) -> np.ndarray:
    """HBM bytes of the MoE layers' token permutations in a step, summed over the devices.

    Dropless token-choice routing gathers each token's k routed copies into expert order and, after
    the experts, sums them back weighted by the router's probabilities. Counted per token and MoE
    layer, in h-wide bf16 rows, from Transformer Engine's fused kernels as Megatron-core's
    all-to-all dispatcher calls them (``token_dispatcher.py``: permutation 1, all-to-all,
    permutation 2 when a rank holds several experts, the experts, and the inverses;
    ``transformer_engine/pytorch/permutation.py``):
    - permute: reads the row once, writes k copies (k + 1); backward, the unpermute of the
      gradients: k reads, one write (k + 1);
    - unpermute with probabilities: k reads, one write (k + 1); backward reads the output gradient
      and the saved forward input (for the probabilities' gradient) and writes k rows (2k + 1);
    - permutation 2 and its inverse (``sort_chunks_by_idxs``, run whenever a rank holds more than
      one expert, n_experts / ep > 1): a read and a write of the k copies each, forward and
      backward (8k); they run on the tokens gathered over the expert-TP group (x etp summed over
      the devices) and on the most loaded rank's share (x ``moe_imbalance``).
    Total (5k + 4 + 8k [n_experts / ep > 1]) x 2h bytes; torchtitan's EP path (gather,
    all-to-all, a second gather by local expert, and back) moves the same. Not counted: the
    router's softmax / top-k over n_experts fp32 scores (~1% of this at n_experts <= 256),
    dispatchers that fuse the permutation into the all-to-all (DeepEP), where permutation 2 is not
    a separate pass. Unlike the expert GEMMs these bytes do not shrink with expert-TP."""
    m = job.model
    k, h = float(m.experts_per_token), float(m.d_model)
    moe_layers = float(m.n_layers - m.first_dense_layers)
    sort = np.where(m.n_experts / ep > 1, 8.0 * k, 0.0) * etp * job.framework.moe.imbalance
    return np.asarray((5.0 * k + 4.0 + sort) * 2.0 * h * moe_layers * tokens)


def h_wide_elementwise_bytes(job: Job, tokens: float) -> float:
    """The part of memory_bound_bytes on h-wide tensors (2 norms, 2 residual adds: 10 h per token
    and layer, x2 B, x3 forward + backward; eager norms 64 h more): the work outside the TP
    region, which sequence parallelism splits across the TP ranks and which without it every TP
    rank repeats."""
    h, L = float(job.model.d_model), float(job.model.n_layers)
    return 3 * (2 * 10 * h + (0.0 if job.framework.kernels.fused_elementwise else 64 * h)) * L * tokens


def tp_gemm_seconds_at_peak(
    job: Job, m_tok: np.ndarray, tp: np.ndarray, prec_factor: float = 1.0
) -> tuple[np.ndarray, ...]:
    """Forward FLOPs / shape efficiency (seconds at peak) of the four GEMM groups next to a
    layer's TP collectives, on one rank for one micro-batch of ``m_tok`` tokens: the q/k/v
    projections (one fused GEMM or separate ones, as in gemm_seconds_at_peak; MLA and linear
    attention mixers: the mixer's weights other than the output projection), the output
    projection, the dense MLP's up (and gate) projections and its down projection; each x the
    precision's time factor ``prec_factor``, except linears that fail fp8's shape thresholds
    (``fp8_gain_thresholds``, as in gemm_seconds_at_peak), which stay at the bf16 rate."""
    m = job.model
    h = float(m.d_model)
    q_w, kv_w = float(m.n_heads * m.head_dim), float(m.n_kv_heads * m.head_dim)
    q_shape, kv_shape = _projection_shapes(job, m_tok, tp)
    f = float(m.d_ff)
    slow = fp8_slow_linears(job, tp, f / tp) if prec_factor != 1.0 else None

    def rate(linear: str) -> np.ndarray | float:
        return prec_factor if slow is None else np.where(slow[linear], 1.0, prec_factor)

    o = 2.0 * m_tok * q_w * h / tp / q_shape
    if m.mla or m.linear_layers:
        qkv = (
            np.maximum(2.0 * m_tok * m.mixer_params_total() / m.n_layers / tp - o * q_shape, 0.0)
            / q_shape
            * prec_factor
        )
    elif job.framework.kernels.fused_projections:
        qkv = 2.0 * m_tok * h * (q_w + 2 * kv_w) / tp / kv_shape * rate("qkv")
    else:
        qkv = 2.0 * m_tok * h * q_w / tp / q_shape * rate("q") + 4.0 * m_tok * h * kv_w / tp / kv_shape * rate("kv")
    o = o * (prec_factor if m.mla or m.linear_layers else rate("o"))
    up_w = (2 if m.gated_mlp else 1) * f / tp
    up = (
        2.0
        * m_tok
        * h
        * up_w
        / linear_shape(m_tok, h, up_w if job.framework.kernels.fused_projections else f / tp)
        * rate("up")
    )
    down = 2.0 * m_tok * f * h / tp / linear_shape(m_tok, f / tp, h) * rate("down")
    return qkv, o, up, down
