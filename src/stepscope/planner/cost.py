"""Memory and step-time model of a training strategy, vectorized over many strategies at once.

Every input strategy field is a numpy array of equal length (one entry per configuration); all
arithmetic is elementwise, so a million configurations cost a few numpy passes.

Memory per device (bytes), for the pipeline stage that holds the most:
- parameters ``P_dev = layers/pp * (dense/tp + experts/(ep*tp)) + vocab*h/tp`` (embedding or head);
- weights 2 B/param (bf16), gradients 2 B/param, optimizer 12 B/param (fp32 master + Adam m, v);
  ZeRO-1 shards the optimizer over dp, ZeRO-2 also gradients, ZeRO-3/FSDP also weights;
- activations per layer and micro-batch (Korthikanti et al. 2022, with sequence parallelism and
  flash attention): ``s*b*h*c/(tp*cp)`` bytes with c = 34 (no recompute), 30 (selective), 2 (full:
  only the layer input is kept); MoE layers add the routed copies ``(k-1)*s*b*h*4/(tp*cp)``;
  1F1B keeps ``min(pp, micro-batches)`` micro-batches in flight on the first stage;
- communication buffers 1 GB and a framework reserve (default 3 GB).

Time per step (seconds):
- fp8: the GEMM share of the work (prior 0.75) runs at the fp8 peak, the rest at the bf16 peak;
  MFU is always against the bf16 peak (as fp8 runs report it);
- pipelines split a replica's batch into at least pp micro-batches;
- compute = (dense FLOPs + attention FLOPs / 0.6) * recompute factor (full 4/3, selective 1.05)
  / (devices * peak * eff) (attention kernels run at 0.6 of GEMM efficiency: prior),
  eff = 0.5 * shape factor (small per-device GEMMs, h/tp < 2048, run slower). 0.5 is a prior, not
  fitted: ~0.7 of peak in large GEMMs x ~0.75 of the time in GEMMs (norms, elementwise, attention);
- TP: 4 all-reduce-equivalents of ``s*b*h*2`` bytes per layer per micro-batch (fwd + bwd), ring
  factor 2(tp-1)/tp, on the intra-node link (inter-node when tp > devices per node), not overlapped;
- DP / FSDP: gradient all-reduce 2(dp-1)/dp * grads (ZeRO-0/1/2), or all-gather x2 + reduce-scatter
  3(dp-1)/dp * weights (ZeRO-3), on the inter-node link when the group spans nodes; 70% hidden
  behind the backward pass (never more than the compute time);
- EP: dispatch + combine all-to-all, fwd + bwd, of ``tokens*k*h*2`` bytes * (ep-1)/ep per MoE layer;
- CP: ring exchange of K and V, 2(cp-1)/cp of the layer's KV bytes, 50% hidden;
- PP: bubble ``(pp-1)/(m*vpp)`` of the per-micro-batch work (m micro-batches per replica);
- optimizer: read/write 16 B per local parameter at HBM bandwidth.
Each link has a latency (alpha) of 10 us per collective step on intra-node, 20 us inter-node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analysis.hardware import Hardware
from ..analysis.model_flops import ModelShape

# Recompute policies: activation bytes per layer = c * s*b*h/(tp*cp), compute x factor.
# none/selective/full follow Korthikanti et al.; the named policies are priors from which tensors
# they keep (MaxText/torchtitan names): "minimal" keeps every matmul output (recomputes the cheap
# pointwise work), "save_dot_except_mlp" keeps attention matmul outputs and recomputes the MLP
# (~2/3 of the forward FLOPs), "save_qkv_proj" keeps only the QKV projections, "save_out_proj" only
# the attention output projection (both recompute nearly the whole forward).
RECOMPUTE = ("none", "selective", "full", "minimal", "save_dot_except_mlp", "save_qkv_proj", "save_out_proj")
_ACT_C = np.array([34.0, 30.0, 2.0, 20.0, 12.0, 8.0, 4.0])
_RECOMPUTE_FACTOR = np.array([1.0, 1.05, 4.0 / 3.0, 1.10, 1.0 + (2.0 / 3.0) / 3.0, 1.28, 1.30])
GEMM_SHARE = 0.75  # prior: share of training FLOP time spent in GEMMs
ATTN_EFF = 0.6  # prior: attention kernel efficiency relative to GEMMs
BOTTLENECKS = ("compute", "TP", "FSDP+DP", "EP", "CP", "PP bubble", "optimizer", "memory")


@dataclass(frozen=True)
class Job:
    model: ModelShape
    hw: Hardware
    devices: int
    devices_per_node: int
    global_batch: int  # sequences per step
    seq_len: int
    precision: str = "bf16"
    reserve_gb: float = 3.0
    eff_scale: float | np.ndarray = 1.0  # calibration: multiplies the compute efficiency prior
    comm_scale: float | np.ndarray = 1.0  # calibration: multiplies every communication time


def params(m: ModelShape) -> tuple[float, float, float]:
    """(dense params per layer, expert params per layer, embedding params) — matmul weights."""
    if m.n_experts:
        mult = 3 if m.gated_mlp else 2
        dense = m.attn_params() + mult * m.d_model * m.d_ff_expert * m.n_shared_experts + m.d_model * m.n_experts
        experts = float(mult * m.d_model * m.d_ff_expert * m.n_experts)
    else:
        dense, experts = m.attn_params() + m.dense_mlp_params(), 0.0
    return float(dense), experts, float(m.vocab * m.d_model)


def evaluate(job: Job, s: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Memory parts (GB), time parts (s), step time, MFU, fits and bottleneck per configuration."""
    m, hw = job.model, job.hw
    tp, pp, vpp, dp, cp, ep = (s[k].astype(np.float64) for k in ("tp", "pp", "vpp", "dp", "cp", "ep"))
    zero, mb, rc = s["zero"], s["mb"].astype(np.float64), s["recompute"].astype(np.int64)
    L, h, seq = float(m.n_layers), float(m.d_model), float(job.seq_len)
    dense, experts, emb = params(m)
    p_dev = (L / pp) * (dense / tp + experts / (ep * tp)) + emb / tp
    w_b = 2 * p_dev / np.where(zero >= 3, dp, 1)
    g_b = 2 * p_dev / np.where(zero >= 2, dp, 1)
    o_b = 12 * p_dev / np.where(zero >= 1, dp, 1)
    # pipeline schedules split a replica's batch into at least pp micro-batches
    n_micro = np.where(pp > 1, np.maximum(job.global_batch / (dp * mb), pp), job.global_batch / (dp * mb))
    mb = np.where(pp > 1, job.global_batch / (dp * n_micro), mb)
    act_layer = seq * mb * h * _ACT_C[rc] / (tp * cp)
    if m.n_experts and m.experts_per_token > 1:
        act_layer = act_layer + (m.experts_per_token - 1) * seq * mb * h * 4 / (tp * cp)
    inflight = np.minimum(pp, np.maximum(n_micro, 1))
    act_b = act_layer * (L / pp) * inflight
    buf_b = np.full(tp.shape, 1e9)
    reserve_b = np.full(tp.shape, job.reserve_gb * 1e9)
    total_b = w_b + g_b + o_b + act_b + buf_b + reserve_b
    # ---- time ---------------------------------------------------------------------------------
    peak = hw.peak_flops(job.precision)
    if job.precision == "fp8":
        # only the linear layers run in fp8 (prior: 75% of the FLOP time), the rest at bf16 rate
        peak = 1.0 / (GEMM_SHARE / hw.peak_flops("fp8") + (1 - GEMM_SHARE) / hw.peak_flops("bf16"))
    tokens = job.global_batch * seq
    model_flops = m.flops_per_token(job.seq_len) * tokens  # per step, all devices
    shape = np.clip((h / tp) / 2048.0, 0.25, 1.0) ** 0.3
    eff = 0.5 * shape * job.eff_scale
    attn_flops = (m.flops_per_token(job.seq_len) - 6.0 * m.matmul_params_per_token()) * tokens
    dense_flops = model_flops - attn_flops
    # attention kernels (flash, causal) run at ATTN_EFF of the GEMM efficiency (prior, FlashAttention-2
    # reports ~50-70% of peak forward and less backward, against ~75-80% for large GEMMs)
    compute_s = (dense_flops + attn_flops / ATTN_EFF) * _RECOMPUTE_FACTOR[rc] / (job.devices * peak * eff)
    intra, inter = (hw.intra_node_gbps or 100.0) * 1e9, (hw.inter_node_gbps or 25.0) * 1e9
    node = float(job.devices_per_node)
    tp_bw = np.where(tp <= node, intra, inter)
    msg = seq * mb * h * 2 / cp
    per_layer_tp = np.where(tp > 1, 4 * (2 * (tp - 1) / tp * msg / tp_bw + 2 * (tp - 1) * 10e-6), 0.0)
    tp_s = per_layer_tp * (L / pp) * n_micro
    dp_span = tp * pp * cp * dp > node
    dp_bw = np.where(dp_span, inter, intra)
    grad_bytes = 2 * p_dev
    dp_raw = np.where(
        zero >= 3, 3 * (dp - 1) / dp * grad_bytes / dp_bw, 2 * (dp - 1) / dp * grad_bytes / dp_bw
    ) + np.where(dp > 1, 2 * (dp - 1) * 20e-6, 0.0)
    dp_s = np.maximum(dp_raw - 0.7 * np.minimum(dp_raw, compute_s), 0.0)
    moe_layers = float(m.n_layers - m.first_dense_layers) if m.n_experts else 0.0
    ep_bw = np.where(ep * tp <= node, intra, inter)
    ep_bytes = seq * mb * m.experts_per_token * h * 2 / (tp * cp)
    ep_s = np.where(ep > 1, 4 * ep_bytes * (ep - 1) / ep / ep_bw * (moe_layers / pp) * n_micro, 0.0)
    kv_bytes = seq * mb * 2 * m.n_kv_heads * m.head_dim * 2 / tp
    cp_s = np.where(cp > 1, 0.5 * 2 * (cp - 1) / cp * kv_bytes / np.where(cp * tp <= node, intra, inter) * (L / pp) * n_micro * 2, 0.0)
    tp_s, dp_s, ep_s, cp_s = (x * job.comm_scale for x in (tp_s, dp_s, ep_s, cp_s))
    per_micro = (compute_s + tp_s + ep_s) / np.maximum(n_micro, 1)
    bubble_s = np.where(pp > 1, (pp - 1) / vpp * per_micro, 0.0)
    opt_s = 16 * p_dev / np.where(zero >= 1, dp, 1) / hw.hbm_bytes_per_s
    step_s = compute_s + tp_s + dp_s + ep_s + cp_s + bubble_s + opt_s
    fits = total_b <= (hw.hbm_gb or 80) * 1e9
    parts = np.stack([tp_s, dp_s, ep_s, cp_s, bubble_s, opt_s])
    bott = (np.argmax(parts, axis=0) + 1).astype(np.int8)  # index into BOTTLENECKS
    bott[parts.max(axis=0) < 0.25 * compute_s] = 0
    bott[~fits] = len(BOTTLENECKS) - 1
    return {
        "weights_gb": w_b / 1e9, "grads_gb": g_b / 1e9, "optimizer_gb": o_b / 1e9, "activations_gb": act_b / 1e9,
        "buffers_gb": buf_b / 1e9, "reserve_gb": reserve_b / 1e9, "total_gb": total_b / 1e9, "fits": fits,
        "compute_s": compute_s, "tp_s": tp_s, "dp_s": dp_s, "ep_s": ep_s, "cp_s": cp_s, "bubble_s": bubble_s,
        "optimizer_s": opt_s, "step_s": step_s,
        "mfu": model_flops / (step_s * job.devices * hw.peak_flops("bf16" if job.precision == "fp8" else job.precision)),
        "hfu_tflops_per_device": model_flops * _RECOMPUTE_FACTOR[rc] / step_s / job.devices / 1e12,
        "tokens_per_s_per_device": tokens / step_s / job.devices,
        "tflops_per_device": model_flops / step_s / job.devices / 1e12,
        "bottleneck": bott,  # codes: BOTTLENECKS[code]
        "grad_accum": n_micro,  # micro-batches per replica per step
    }
