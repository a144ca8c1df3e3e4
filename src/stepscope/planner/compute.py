"""Compute time of each configuration (cost.py's compute terms): the model's FLOPs at the GEMM and
attention efficiencies, the memory-bound elementwise work, the loss and fp8 casts, recompute, the
pipeline's slowest stage, and the device's wait on the host."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .activations import NORM_ACT, NORM_MLA, SELECTIVE
from .job import Job
from .layout import Layout
from .rates import FP8_WEIGHT_BYTES, base_dtype, efficiencies, norm_moe_act, params
from .stages import StageParams
from .vocab import LINEAR_ATTN_EFF
from .work import gemm_kernels_per_layer, gemm_seconds_at_peak, memory_bound_bytes


@dataclass(frozen=True, kw_only=True)
class Flops:
    """A step's work, all devices: ``tokens``, model FLOPs (for MFU), the attention's FLOPs (all
    s x s scores without flash attention: no causal skipping), the rest's, and the bytes the
    scores move without flash attention; the softmax-attention and MoE layer counts."""

    tokens: float
    model: float
    attention: float
    dense: float
    score_bytes: float
    attn_layers: float
    moe_layers: float
    linear_attention: float = 0.0  # of ``attention``: the linear-attention kernels' FLOPs


def flops(job: Job) -> Flops:
    m, seq = job.model, float(job.seq_len)
    tokens = job.global_batch * seq
    model_flops = m.flops_per_token(job.seq_len) * tokens  # per step, all devices
    attn_flops = (m.flops_per_token(job.seq_len) - 6.0 * m.matmul_params_per_token()) * tokens
    dense_flops = model_flops - attn_flops
    attn_layers = m.n_layers - m.linear_layers  # softmax-attention layers (linear attention has no scores)
    score_bytes = 0.0
    if not job.framework.kernels.flash_attention:
        attn_flops = (m.flops_per_token(job.seq_len, causal=False) - 6.0 * m.matmul_params_per_token()) * tokens
        # per score element: QK^T writes it, fused softmax and dropout read and write it (+ a 1-byte
        # mask), AV reads it (13 B forward); backward about 19 B: 32 B at fp16
        score_bytes = 32.0 * m.n_heads * seq * tokens * attn_layers
    return Flops(
        tokens=tokens,
        model=model_flops,
        attention=attn_flops,
        dense=dense_flops,
        score_bytes=score_bytes,
        attn_layers=float(attn_layers),
        moe_layers=float(m.n_layers - m.first_dense_layers) if m.n_experts else 0.0,
        linear_attention=m.linear_attention_flops_per_token() * tokens,
    )


@dataclass(frozen=True, kw_only=True)
class Compute:
    """``peak`` the bf16 (or fp16) peak FLOP/s; efficiencies as calibrated and the faster
    precision's GEMM factor; per configuration: the layers' seconds on an evenly loaded stage
    (``layers_s``), the pipeline's pace (``compute_s``), the recompute factor (``rf``; for time)
    and the hardware-FLOPs factor (for HFU), the host wait (``host_s``) and compute + wait
    (``busy_s``: the window transfers hide in)."""

    flops: Flops
    peak: float
    gemm_eff: float | np.ndarray
    attn_eff: float | np.ndarray
    prec_factor: float
    layers_s: np.ndarray
    compute_s: np.ndarray
    rf: np.ndarray
    hw_flops_factor: np.ndarray
    host_s: np.ndarray
    busy_s: np.ndarray


def _fp8_weight_s(job: Job, lay: Layout) -> np.ndarray | float:
    """fp8: the linear weights on the device are cast too (rates.FP8_WEIGHT_BYTES), once per step
    when the framework caches them across micro-batches (fp8_weight_cache), else every micro-batch."""
    if job.precision != "fp8":
        return 0.0
    m, fp8 = job.model, job.framework.fp8
    dense, experts, _ = params(m)
    return (
        FP8_WEIGHT_BYTES[fp8.recipe]
        * float(m.n_layers)
        / lay.pp
        * (dense / lay.tp + experts / (lay.ep * lay.etp))
        * (1 if fp8.weight_cache else lay.n_micro)
        / job.hw.hbm_bytes_per_s
    )


def _stage_seconds(
    job: Job,
    lay: Layout,
    sp: np.ndarray,
    fl: Flops,
    gemm_eff: float | np.ndarray,
    attn_eff: float | np.ndarray,
    prec_factor: float,
    peak: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | float]:
    """(the layers' seconds per stage at an even split, the output layer's GEMM seconds, the loss's
    seconds), per configuration, before recompute and the pipeline's imbalance."""
    m, hw, seq = job.model, job.hw, float(job.seq_len)
    L, measured = float(m.n_layers), job.calibration.gemm_eff is not None
    gemm_time, logits_gemm, bf16_gemm = gemm_seconds_at_peak(
        job, fl.dense, fl.tokens, seq * lay.mb / lay.cp, lay.tp, lay.ep, lay.etp
    )  # work.py
    # a faster precision speeds up all GEMMs but those that run at the bf16 rate (work.py)
    # linear-attention kernels at their own rate (vocab.LINEAR_ATTN_EFF) x a calibration's scale
    lin_eff = LINEAR_ATTN_EFF * job.calibration.linear_attn_scale
    attn_s = (fl.attention - fl.linear_attention) / attn_eff + fl.linear_attention / lin_eff
    work = ((gemm_time - bf16_gemm) * prec_factor + bf16_gemm) / gemm_eff + attn_s
    elem_bytes = memory_bound_bytes(job, fl.tokens, lay.tp, sp, fl.score_bytes, lay.ep, lay.etp)
    # layernorm_moe_act recomputes memory-bound ops only: their forward bytes once more (also with
    # MLA's up-projections, whose GEMMs are in that policy's recompute factor)
    elem_bytes = elem_bytes + np.where(
        (lay.rc == NORM_ACT) | (lay.rc == NORM_MLA), norm_moe_act(m, job.swiglu_eager)[1] * L * fl.tokens, 0.0
    )
    # the loss over the vocabulary: ~6 fp32 passes over the logits per token (upcast, softmax,
    # gradient, downcast), memory-bound
    loss_bytes = job.loss_bytes[1] * m.vocab * fl.tokens
    if measured:
        elem_bytes = loss_bytes = 0.0  # a measured efficiency (from a trace) includes elementwise time
    # the output layer (logits GEMM, part of `work`, and the loss) is not recomputed and runs on the
    # last pipeline stage only: that stage does pp x its evenly spread share, and the pipeline
    # runs at the pace of its slowest stage
    logits_s = logits_gemm / gemm_eff / peak / job.devices
    loss_s = loss_bytes / hw.hbm_bytes_per_s / job.devices
    layers_s = (work / peak + elem_bytes / hw.hbm_bytes_per_s) / job.devices - logits_s + _fp8_weight_s(job, lay)
    # each GEMM kernel's fixed time, forward and backward's two (a measured efficiency includes it)
    kernel_s = 3e-6 * (hw.gemm_kernel_us or 0.0) * (not measured) * lay.n_micro
    layers_s = layers_s + kernel_s * gemm_kernels_per_layer(job) * L / lay.pp
    logits_s = logits_s + kernel_s / lay.pp  # one output-layer GEMM, on the last stage (x pp below)
    return layers_s, logits_s, loss_s


def compute(job: Job, lay: Layout, st: StageParams, rfactor: np.ndarray, sp: np.ndarray) -> Compute:
    """The compute terms of the layout (``rfactor``: the recompute factor by policy, ``sp``:
    sequence parallelism, both from the activations' count)."""
    hw, rc, pp = job.hw, lay.rc, lay.pp
    fl = flops(job)
    peak = hw.peak_flops(base_dtype(job.precision))
    gemm_eff, attn_eff, prec_factor = efficiencies(job, lay.cp)
    gemm_eff, attn_eff = gemm_eff * job.calibration.gemm_scale, attn_eff * job.calibration.attn_scale
    layers_s, logits_s, loss_s = _stage_seconds(job, lay, sp, fl, gemm_eff, attn_eff, prec_factor, peak)
    # selective recompute (Megatron's core attention: QK^T, softmax, dropout, attention over V)
    # re-runs the attention core's forward in backward: its FLOPs at the attention rate and, without
    # flash attention, the 13 of the 32 B per score its forward moves; as a per-configuration factor
    # on the layers' time (the other policies' factors are fixed shares, RECOMPUTE_FACTOR)
    measured = job.calibration.gemm_eff is not None
    score_fwd_b = 0.0 if measured else 13.0 / 32.0 * fl.score_bytes  # measured efficiencies include it
    sel_extra_s = (fl.attention / 3.0 / attn_eff / peak + score_fwd_b / hw.hbm_bytes_per_s) / job.devices
    rf = np.where(rc == SELECTIVE, 1.0 + sel_extra_s / np.maximum(layers_s, 1e-30), rfactor[rc])
    hw_flops_factor = np.where(rc == SELECTIVE, 1.0 + fl.attention / 3.0 / fl.model, rfactor[rc])  # for HFU
    # the pace: the most loaded stage, a middle one or the last with the output layer and the MTP
    # modules (stages.stage_params), each module a layer and one more pass of the output layer and
    # the loss for its own prediction; ``layers_s`` spreads the MTP modules' work over the stages
    # with the layers', so a layer takes layers_s / share_L
    head_s = (logits_s + loss_s) * pp * (1.0 + st.mtp_L)
    compute_s = np.maximum(
        layers_s * rf * st.stage_L / st.share_L,
        np.where(
            lay.dual,
            layers_s * rf * (st.first_L + st.last_L + st.mtp_L) / 2 / st.share_L
            + head_s / 2,  # the last stage every other micro-batch
            layers_s * rf * (st.last_L + st.mtp_L) / st.share_L + head_s,
        ),
    )
    # a separate gradient-accumulation kernel (grad_accum_bytes) over the stage's parameters
    # after every micro-batch's backward: memory-bound device work in the stage's pace
    compute_s = compute_s + job.framework.zero.grad_accum_bytes * st.p_dev * lay.n_micro / hw.hbm_bytes_per_s
    # the device waiting on the host (Job.layer_overhead_s): per layer of the stage and micro-batch,
    # replayed by recompute. The compute stream is idle then, but collectives already launched on
    # their own streams run on: the windows DP, EP and offload transfers hide in are compute + wait
    host_s = job.layer_overhead_s * st.stage_L * lay.n_micro * rf
    return Compute(
        flops=fl,
        peak=peak,
        gemm_eff=gemm_eff,
        attn_eff=attn_eff,
        prec_factor=prec_factor,
        layers_s=layers_s,
        compute_s=compute_s,
        rf=rf,
        hw_flops_factor=hw_flops_factor,
        host_s=host_s,
        busy_s=compute_s + host_s,
    )
