"""Exposed communication of each configuration inside the layers (cost.py's TP, EP, CP and
offload terms): what each transfer takes at the links' bandwidth, replayed by recompute, less what
hides under compute from the shared window (window.py), taken in the order TP, EP, CP."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .activations import QKV_OFFLOADED
from .compute import Compute
from .dispatch import exchange_seconds, sm_contention_s
from .footprint import Footprint
from .job import Job
from .layout import Layout
from .links import Links, ring_share
from .recompute import CP_REPLAY, EP_REPLAY, QKV_OFFLOADED_BYTES, TP_REPLAY
from .stages import StageParams
from .tp_overlap import hidden_per_layer, regather_per_layer, share_of_all
from .vocab import CP_HIDDEN, HOST_GBPS, OFFLOAD_HIDDEN
from .window import Window
from .work import tp_gemm_seconds_at_peak


@dataclass(frozen=True, kw_only=True)
class Replay:
    """How much of each group's forward traffic recompute replays, as a factor on its fwd + bwd
    traffic: forward traffic is half of it, and a policy recomputes 3 x (factor - 1) of the forward
    (full: all of it, x 1.5 in total), except where a policy says which collectives it keeps
    (recompute.TP_REPLAY, EP_REPLAY, CP_REPLAY): selective recomputes only the attention core,
    between the TP collectives (none replayed); torchtitan's op policy saves the reduce-scatter
    outputs and regathers: the forward's 2 all-gathers of 8 again."""

    tp: np.ndarray
    ep: np.ndarray
    cp: np.ndarray

    @classmethod
    def of(cls, rf: np.ndarray, rc: np.ndarray) -> Replay:
        replay = 1.0 + 1.5 * (rf - 1.0)
        return cls(
            tp=np.where(np.isnan(TP_REPLAY[rc]), replay, TP_REPLAY[rc]),
            ep=np.where(np.isnan(EP_REPLAY[rc]), replay, EP_REPLAY[rc]),
            cp=np.where(np.isnan(CP_REPLAY[rc]), replay, CP_REPLAY[rc]),
        )


def tp_seconds(
    job: Job, lay: Layout, st: StageParams, comp: Compute, sp: np.ndarray, replay: Replay, net: Links, window: Window
) -> np.ndarray:
    """Exposed TP seconds: per layer and micro-batch, fwd + bwd, 2 all-reduce-equivalents for
    attention and 2 for the MLP (MoE layers move the k routed copies over the expert-TP group
    instead of the MLP's two); tensorwise fp8 moves the 4 all-gathers of 8 in fp8; the framework's
    TP/GEMM overlap hides each collective under the GEMM it is fused with (tp_overlap.py), and
    sequence parallelism's backward re-gathers (sp_regather) add theirs."""
    m, fw, tp, pp = job.model, job.framework, lay.tp, lay.pp
    L, h, seq, moe_layers = float(m.n_layers), float(m.d_model), float(job.seq_len), comp.flops.moe_layers
    ring, mode = net.ring, lay.tp_mode
    msg = seq * lay.mb * h * 2 / lay.cp

    def all_reduce(n: np.ndarray, nbytes: np.ndarray | float) -> np.ndarray:
        """All-gather + reduce-scatter (sequence parallelism) of nbytes over n consecutive ranks."""
        return np.where(n > 1, ring(n, 2 * nbytes, n, 2), 0.0)

    tp_attn = 2 * all_reduce(tp, msg)
    tp_mlp = tp_attn * (L - moe_layers)
    tp_moe = (
        2 * all_reduce(lay.etp, msg * max(m.experts_per_token, 1)) * moe_layers if moe_layers else np.zeros_like(tp)
    )
    tp_mlp = tp_mlp + tp_moe
    per_stage = lay.n_micro / pp * st.uneven
    tp_s = (tp_attn * L + tp_mlp) / pp * lay.n_micro * replay.tp * st.uneven
    fp8_tensorwise = job.precision == "fp8" and fw.fp8.recipe == "tensorwise"
    fp8_tp = 0.75 if fp8_tensorwise else 1.0
    tp_s = tp_s * fp8_tp  # tensorwise: the 4 all-gathers of 8 collectives move fp8 (rates.fp8_cast_bytes)
    if not (np.any(mode > 0) or fw.tp.sp_regather):  # a search without an overlap mechanism skips the GEMM terms
        return tp_s
    qkv_s, o_s, up_s, down_s = (
        g / (comp.gemm_eff * comp.peak)
        for g in tp_gemm_seconds_at_peak(job, seq * lay.mb / lay.cp, tp, comp.prec_factor)
    )
    fused = fw.kernels.fused_projections
    if np.any(mode > 0):  # each collective capped by the GEMM it is fused with; MoE layers' by the mechanism's share
        hid_a, hid_m = hidden_per_layer(mode, tp, tp_attn / 4, qkv_s, o_s, up_s, down_s, fused, sp)
        hidden = hid_a * L + hid_m * (L - moe_layers) + share_of_all(mode, tp, fused, sp) * tp_moe
        tp_s = tp_s - window.take(
            np.minimum(hidden / pp * lay.n_micro * replay.tp * st.uneven * fp8_tp, comp.compute_s), "tp"
        )
    if fw.tp.sp_regather:
        # one all-gather of the saved shards (fp8 where tensorwise fp8 saves its cast inputs)
        half = fp8_tensorwise and fw.fp8.saved_inputs == "fp8"
        c = np.where(sp > 0, ring(tp, msg * (0.5 if half else 1.0), tp), 0.0)
        raw, hid = regather_per_layer(mode, c, qkv_s, up_s, L, L - moe_layers)
        tp_s = tp_s + raw * per_stage - window.take(np.minimum(hid * per_stage, comp.compute_s), "tp")
    return tp_s


def ep_seconds(
    job: Job, lay: Layout, st: StageParams, comp: Compute, replay: Replay, net: Links, window: Window
) -> np.ndarray:
    """Exposed EP seconds: the token exchange of each MoE layer (dispatch.py), the most loaded
    rank's tokens; with the EP overlap (ep_overlap, the DualPipes) one micro-batch's exchange runs
    under another's compute (2+ micro-batches), and DeepEP's SMs slow what it hides under."""
    m, moe = job.model, job.framework.moe
    exchange = exchange_seconds(
        m,
        dispatch=moe.ep_dispatch,
        tokens=float(job.seq_len) * lay.mb / (lay.tp * lay.cp),
        h=float(m.d_model),
        imbalance=moe.imbalance,
        ep=lay.ep,
        span=lay.ep * lay.etp,
        node=net.node,
        link=net.bandwidth,
    )
    ep_raw = (
        np.where(lay.ep > 1, exchange, 0.0)
        * (comp.flops.moe_layers / lay.pp)
        * lay.n_micro
        * replay.ep
        * st.uneven
        * job.calibration.ep_scale  # a calibration's (calibrate_ops.py)
    )
    ep_s = window.hide(ep_raw, (lay.ep_on & (lay.n_micro >= 2)).astype(np.float64), comp.busy_s, "ep")
    return ep_s + sm_contention_s(moe.ep_dispatch, ep_raw - ep_s, moe.deepep_sms, job.hw.sms)


def cp_seconds(
    job: Job, lay: Layout, st: StageParams, comp: Compute, replay: Replay, net: Links, window: Window
) -> np.ndarray:
    """Exposed CP seconds: the ring exchange of K and V blocks (n_heads wide with kv_repeated),
    CP_HIDDEN of it behind the attention of the block before: a prior share of the exchange,
    bounded by what is left of the window (not by the attention alone: a cap that shrank with
    faster attention would make a step slower when the window also holds offload or DP)."""
    m, cp = job.model, lay.cp
    kv_heads = m.n_heads if job.framework.kernels.kv_repeated and not m.mla else m.n_kv_heads
    kv_bytes = float(job.seq_len) * lay.mb * 2 * kv_heads * m.head_dim * 2 / lay.tp
    cp_raw = (
        np.where(
            cp > 1,
            ring_share(cp, 2)
            * kv_bytes
            / net.bandwidth(cp * lay.tp, cp)
            * (comp.flops.attn_layers / lay.pp)
            * lay.n_micro
            * 2,
            0.0,
        )
        * replay.cp
        * st.uneven
    )
    return window.overlap(cp_raw, CP_HIDDEN, "cp")


def offload_seconds(job: Job, lay: Layout, st: StageParams, mem: Footprint, window: Window) -> np.ndarray:
    """Exposed offload seconds: saved activations to the host and back (2x) at the host link,
    plus qkv_proj_offloaded's q, k, v projections (recompute.QKV_OFFLOADED_BYTES), OFFLOAD_HIDDEN of
    it under the window."""
    host = (job.hw.host_gbps or HOST_GBPS) * 1e9
    offload_raw = 2 * mem.act_layer * mem.offloaded * lay.n_micro / host
    h, seq = float(job.model.d_model), float(job.seq_len)
    qkv_raw = 2 * seq * lay.mb * h * QKV_OFFLOADED_BYTES / (lay.tp * lay.cp) * st.stage_L * lay.n_micro / host
    offload_raw = offload_raw + np.where(lay.rc == QKV_OFFLOADED, qkv_raw, 0.0)
    return window.overlap(offload_raw, OFFLOAD_HIDDEN, "offload")
