"""Memory and step-time model of a training strategy, vectorized over many strategies at once.

Every input strategy field is a numpy array of equal length (one entry per configuration); all
arithmetic is elementwise, so a million configurations cost a few numpy passes. Optional fields
(``etp``, ``hsdp``, ``sched``, ``offload``, ``tp_overlap``, ``ep_overlap``, ``keep_params``, ``ga``) default to
"off" when absent, ``sp`` (sequence parallelism) to on.

Memory per device (bytes), for the pipeline stage that holds the most:
- parameters on the most loaded rank (planner/stages.py: a stage's layers, the embedding or the
  output layer on the end stages, what each pipeline schedule puts where; expert-TP ``etp`` shards
  each expert's weights, default etp = tp); their weights, gradients and optimizer states by ZeRO
  stage and HSDP shard group (planner/states.py);
- activations by recompute policy, sequence parallelism, the micro-batches a pipeline schedule
  holds in flight and the output layer's logits (formulas in planner/activations.py);
- communication buffers (buffers.py: 1 GB on CUDA/ROCm devices, and under ZeRO-3/FSDP two gathered
  layers' (or, gathered tensor by tensor, the largest tensor's) weights and gradients) and a
  framework reserve (default 3 GB; 0 on statically allocated TPUs).

Time per step (seconds):
- pipelines split a replica's batch into at least pp micro-batches, unless the strategy states
  its gradient accumulation ``ga`` (then exactly ga micro-batches of global batch / (dp x ga)
  sequences: with fewer than pp the pipeline's bubble, (pp - 1) micro-batch times, is a larger
  share of the step);
- compute = (sum over linear layers of FLOPs / linear_shape(tokens, inputs, outputs per device) *
  fp8 factor / gemm_eff + attention FLOPs / attn_eff) * recompute factor (full 4/3; selective: the
  attention core's forward once more, its FLOPs / 3 at attn_eff plus, without flash attention, 13 B
  per score) / (devices * bf16 peak); linear_shape rates a layer's forward, input-gradient and
  weight-gradient GEMMs by their whole shape, fitted to measured H100 GEMM rates (rates.gemm_rate):
  attention projections h x q/tp (q = heads x head_dim; with ``fused_projections`` q, k and v
  form one h x (q + 2 kv)/tp GEMM, else k and v are separate h x kv/tp GEMMs, narrow under GQA),
  MLPs h x f/tp (fused gate and up 2 f/tp), routed experts h x d_ff_expert/etp as one grouped GEMM
  over the local experts with the tokens each receives, the output layer h x V/tp, each the
  micro-batch's tokens tall; plus each GEMM kernel's fixed time (``Hardware.gemm_kernel_us``, 5.3 us
  on H100s from the same table; work.gemm_kernels_per_layer: a layer's forward kernels, x 3 with
  the backward's) per micro-batch.
  Priors: gemm_eff = 0.75 x the device's measured maximum achievable matmul efficiency
  (``matmul_eff`` in the hardware catalog, 0.7 where unmeasured): GEMMs at their ceiling for ~0.75
  of the time, norms and elementwise ops the rest (1.0 on TPUs, whose VLIW bundles issue the
  vector work beside the matrix units: ``elementwise_overlaps_matmul``); attn_eff = 0.6 x gemm_eff, or the named
  kernel's measured speed where the catalog has it (``attention_kernel``, planner/attention.py);
- plus memory-bound elementwise work at HBM bandwidth, per token and layer
  ``3 * 2 B * (10 h + 3 f)`` (2 f for a plain MLP; f = the active MLP width): two norms (read and
  write an h-vector each), two residual adds (two reads, one write), the MLP activation (two reads
  and one write of an f-vector), forward, and about twice that in backward. It is what makes small
  hidden sizes and high FLOP/byte devices less efficient (the ratio to GEMM time is ~(peak/HBM
  bandwidth)/h). MoE layers add their token permutations (work.moe_permutation_bytes: (5k + 4) h-wide
  bf16 rows per token and layer, 8k more when a rank holds several experts and sorts the received
  tokens by expert). Recompute multiplies it like the FLOPs. Left out when gemm_eff is given (measured
  in a trace: that efficiency already includes the elementwise kernels' time). Those are fused
  kernels (torch.compile, Transformer Engine / Apex, XLA); run as separate eager PyTorch ops
  (``fused_elementwise`` False) they move more (work.memory_bound_bytes);
- without flash attention (``flash_attention`` False) the full s x s scores are computed (no
  causal skipping) and each score element moves 32 B through HBM (QK^T write, fused softmax and
  dropout read/write with a 1-byte mask, AV read; about 19 B in backward);
- the loss over the vocabulary: 24 B per token and vocabulary entry (about six fp32 passes over the
  logits; 44 B unfused), memory-bound; with pipelines the output layer (logits GEMM and loss) sits
  on the last stage, which then runs (pp - 1) x its evenly spread share slower than the average stage: the
  pipeline goes at its pace;
- fp8 (and any precision with a faster GEMM peak): only the GEMM share (0.75) of the dense work
  speeds up, by (fp8 peak x fp8 matmul_eff) / (bf16 peak x bf16 matmul_eff); attention and the
  elementwise rest stay at bf16; dynamic scaling's casts move the bytes counted per recipe
  (rates.fp8_cast_bytes), and under TP with tensorwise scaling the all-gathers (half of a layer's
  TP collectives) move fp8; MFU is always against the bf16 peak (as fp8 runs report it);
- TP: 4 all-reduce-equivalents of ``s*b*h*2`` bytes per layer per micro-batch (fwd + bwd: with
  sequence parallelism 4 all-gathers + 4 reduce-scatters), each ``2(tp-1)/tp * bytes / link``, on
  the intra-node link (inter-node when tp > devices per node); in MoE layers the MLP's two are
  replaced by the same over the expert-TP group with k routed copies of the tokens. What hides
  behind the GEMMs depends on the framework's mechanism (``tp_overlap``: none, full, bwd,
  bwd+shard), each collective no longer than the GEMM it is fused with (planner/tp_overlap.py);
  frameworks that keep only the shards (``sp_regather``) all-gather them again in backward,
  2 more per dense layer, under the input-gradient GEMMs (tp_overlap.regather_per_layer);
- DP / FSDP over the dp x cp ranks that share weights, by ZeRO stage, each collective hidden
  where and as much as it can run (planner/data_parallel.py);
- the transfers that hide share one communication stream: together at most the compute (+ host
  wait), taken in the order TP, EP, CP, PP p2p, DP/FSDP, offload (planner/window.py);
- recompute replays the forward's TP, EP and CP collectives: they are multiplied by
  1 + 1.5 x (recompute factor - 1) (forward traffic is half the total; full recompute: x 1.5),
  except under policies that say which collectives they replay (``TP_REPLAY``, ``EP_REPLAY``,
  ``CP_REPLAY``): selective (Korthikanti's: only the attention core) replays no TP collective (they
  sit outside the core) and no EP all-to-all, but all of CP's forward ring exchange (it runs inside
  the core: x 1.5); torchtitan's op policy (it saves reduce-scatter outputs, not all-gather
  outputs) the forward's two all-gathers of the layer's eight TP collectives (x 1.25);
- EP: dispatch + combine all-to-all, fwd + bwd, of ``tokens*k*h*2`` bytes * (ep-1)/ep per MoE layer,
  on the link of the ep*etp group; exposed unless the framework overlaps it (``ep_overlap`` = 1:
  DualPipe-style schedules, Megatron's EP-communication overlap), which hides it behind another
  micro-batch's compute, up to the compute time, with 2+ micro-batches;
- CP: ring exchange of K and V, 2(cp-1)/cp of the layer's KV bytes (n_heads wide with ``kv_repeated``), ``CP_HIDDEN`` (50%) of it hidden
  (from the shared window, after TP's and EP's);
- PP p2p: ``s*b*h*2/(tp*cp)`` bytes per hop, each way; the 2(pp vpp - 1) fill/drain hops are exposed
  and 20% of the 2 m vpp steady-state hops (prior ``PP_P2P_HIDDEN`` = 0.8), on the link of tp*pp
  ranks (interleaving multiplies the hops by vpp: Narayanan et al. 2021, section 2.2.2; ZB-V's turn
  on the last stage needs no hop, counted anyway);
- PP: bubble ``(pp-1)/(m*vpp)`` of the per-micro-batch work (m micro-batches per replica) for 1F1B
  and interleaved; zero-bubble ZB-H1 (Qi et al. 2023) cuts it to 1/3 (with F = B = W),
  ZB-V (vpp = 2) to a prior 1/10 (ideal 0; margin for unequal F, B, W); DualPipe and DualPipeV
  as vocab.SCHEDULES derives them (DualPipe also holds two copies of the parameters and halves the
  output layer's imbalance: its first rank runs the last stage every other micro-batch);
- activation offload: saved activations go to host and back (2x bytes) over ``host_gbps``
  (default 25 GB/s), 80% hidden behind compute (prior);
- optimizer: its states (``optimizer_bytes``, 12) and a 4-byte gradient per local parameter at HBM bandwidth;
- host wait (``host_s``, ``Job.layer_overhead_s`` per layer of the stage and micro-batch, x the
  recompute factor; 0 unless a calibration or a trace's host-bound idle sets it): the device idle
  while the host launches or synchronises; it lengthens each micro-batch (and so the bubble), and
  collectives already launched on their own streams run on under it (DP, EP and offload hide in
  compute + wait; TP, fused with the GEMMs, does not). Plus, once per step after the optimizer,
  ZeRO-1/2 weights gathered tensor by tensor on the host (``zero_gather_copy_us``, nanotron;
  planner/data_parallel.py): nothing runs under it.
Each link has a latency (alpha) of 10 us per collective step on intra-node, 20 us inter-node; a
measured network profile replaces both tiers (planner/links.py, planner/network.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

import numpy as np

from .bottleneck import bottleneck_codes
from .comm import Replay, cp_seconds, ep_seconds, offload_seconds, tp_seconds
from .compute import Compute, compute
from .data_parallel import dp_seconds, zero_gather_host_s
from .footprint import Footprint, footprint
from .job import Job
from .layout import Layout, layout
from .links import Links
from .stages import pipeline_seconds, stage_params
from .window import HIDDEN_PARTS, Window

CHUNK = 32768  # configurations per block: the block's temporaries stay in cache (1.4x faster at 1M)


def evaluate(job: Job, s: dict[str, np.ndarray], keys: Collection[str] | None = None) -> dict[str, np.ndarray]:
    """Memory parts (GB), time parts (s), step time, MFU, fits and bottleneck per configuration,
    evaluated in blocks of CHUNK configurations (calibration values given per configuration are
    sliced). ``keys``: return only these results (a search ranks millions of configurations on three
    of them)."""
    n = len(s["tp"])
    if n <= CHUNK:
        r = _evaluate(job, s)
        return r if keys is None else {k: r[k] for k in keys}
    # each block is written into arrays allocated once: keeping the blocks and concatenating them
    # held every result twice
    out: dict[str, np.ndarray] = {}
    for i in range(0, n, CHUNK):
        part = job.calibration.block(n, i, i + CHUNK)
        block_job = job if part is job.calibration else dataclasses.replace(job, calibration=part)
        block = _evaluate(block_job, {k: v[i : i + CHUNK] for k, v in s.items()})
        if not out:
            out = {k: np.empty(n, v.dtype) for k, v in block.items() if keys is None or k in keys}
        for k, v in out.items():
            v[i : i + CHUNK] = block[k]
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class Exposed:
    """The step's parts that stay exposed, seconds per configuration (what hid is in the window)."""

    tp: np.ndarray
    ep: np.ndarray
    cp: np.ndarray
    pp_p2p: np.ndarray
    bubble: np.ndarray
    dp: np.ndarray
    offload: np.ndarray
    optimizer: np.ndarray
    zero_gather: np.ndarray | float


def _evaluate(job: Job, s: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The model's steps: the layout, the stages, memory, compute, then the transfers in the order
    they take the shared window (TP, EP, CP, PP p2p, DP/FSDP, offload)."""
    lay = layout(job, s)
    st = stage_params(job, tp=lay.tp, pp=lay.pp, ep=lay.ep, etp=lay.etp, sched=lay.sched)
    mem = footprint(job, lay, st)
    comp = compute(job, lay, st, mem.rfactor, mem.sp)
    window = Window(comp.busy_s)  # TP, EP, CP, PP p2p, DP/FSDP and offload transfers hide under it, in that order
    net = Links.of(job)  # planner/links.py: bandwidth and latency by where a group sits
    replay = Replay.of(comp.rf, lay.rc)
    tp_s = tp_seconds(job, lay, st, comp, mem.sp, replay, net, window)
    # EP and CP before DP: their exchanges sit inside every layer; gradients can wait
    ep_s = ep_seconds(job, lay, st, comp, replay, net, window)
    cp_s = cp_seconds(job, lay, st, comp, replay, net, window)
    h, seq = float(job.model.d_model), float(job.seq_len)
    pp_p2p_s, bubble_s = pipeline_seconds(
        net,
        window,
        p2p_bytes=seq * lay.mb * h * 2 / (lay.tp * lay.cp),
        tp=lay.tp,
        pp=lay.pp,
        vpp=lay.vpp,
        n_micro=lay.n_micro,
        sched=lay.sched,
        dual=lay.dual,
        stage_s=comp.busy_s + tp_s + ep_s + cp_s,
    )
    dp_s = dp_seconds(
        job,
        ring=net.ring,
        window=window,
        p_dev=st.p_dev,
        gather_b=mem.gather_b,
        tp=lay.tp,
        pp=lay.pp,
        dpc=lay.dpc,
        shard=lay.shard,
        zero=lay.zero,
        keep=lay.keep,
        stage_L=st.stage_L,
        n_micro=lay.n_micro,
        busy_s=comp.busy_s,
        rf=comp.rf,
        e_dev=st.experts_p,
        ep_fold=lay.ep_fold,
    )
    offload_s = offload_seconds(job, lay, st, mem, window)
    opt_b = job.framework.memory.optimizer_bytes
    exposed = Exposed(
        tp=tp_s,
        ep=ep_s,
        cp=cp_s,
        pp_p2p=pp_p2p_s,
        bubble=bubble_s,
        dp=dp_s,
        offload=offload_s,
        optimizer=(opt_b + 4.0)
        * mem.optimizer_b
        / opt_b
        / job.hw.hbm_bytes_per_s,  # states + fp32 gradient, as sharded
        # after the optimizer step, outside every window: ZeRO weights gathered tensor by tensor on the host
        zero_gather=zero_gather_host_s(job, zero=lay.zero, dpc=lay.dpc, stage_L=st.stage_L),
    )
    return _results(job, lay, mem, comp, exposed, window)


def _results(job: Job, lay: Layout, mem: Footprint, comp: Compute, x: Exposed, window: Window) -> dict[str, np.ndarray]:
    """The result columns of evaluate (GB, seconds, ratios, codes)."""
    tp, fl = lay.tp, comp.flops
    host_s = comp.host_s + x.zero_gather
    step_s = comp.busy_s + x.tp + x.dp + x.ep + x.cp + x.bubble + x.pp_p2p + x.optimizer + x.offload + x.zero_gather
    capacity_b, per_device = job.capacity_bytes, step_s * job.devices
    fits = mem.total_b <= capacity_b
    parts = (x.tp, x.dp, x.ep, x.cp, x.bubble + x.pp_p2p, x.optimizer, x.offload, host_s)
    out: dict[str, Any] = {
        "weights_gb": mem.weights_b / 1e9,
        "grads_gb": mem.grads_b / 1e9,
        "optimizer_gb": mem.optimizer_b / 1e9,
        "activations_gb": mem.activations_b / 1e9,
        "buffers_gb": mem.buffers_b / 1e9,
        "reserve_gb": mem.reserve_b / 1e9,
        "total_gb": mem.total_b / 1e9,
        "fits": fits,
        "compute_s": comp.compute_s,
        "tp_s": x.tp,
        "dp_s": x.dp,
        "ep_s": x.ep,
        "cp_s": x.cp,
        "bubble_s": x.bubble,
        "pp_p2p_s": x.pp_p2p,
        "optimizer_s": x.optimizer,
        "offload_s": x.offload,
        "host_s": host_s + np.zeros_like(tp),
        "step_s": step_s,
        # what the transfers hid under compute (the parts above are what stays exposed)
        **{f"hidden_{part}_s": window.hidden_s.get(part, 0.0) + np.zeros_like(tp) for part in HIDDEN_PARTS},
        "mfu": fl.model / (step_s * job.devices * comp.peak),
        "hfu": fl.model * comp.hw_flops_factor / (per_device * comp.peak),
        "headroom_gb": (capacity_b - mem.total_b) / 1e9,
        "hfu_tflops_per_device": fl.model * comp.hw_flops_factor / step_s / job.devices / 1e12,
        "tokens_per_s_per_device": fl.tokens / step_s / job.devices,
        "tflops_per_device": fl.model / step_s / job.devices / 1e12,
        "bottleneck": bottleneck_codes(comp.compute_s, parts, fits),  # codes: BOTTLENECKS[code]
        "grad_accum": lay.n_micro,  # micro-batches per replica per step
        "micro_batch": lay.mb,  # sequences per micro-batch as run (a pipeline may split the given mb)
    }
    return out
