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
  attention projections h x q/tp (q = heads x head_dim; with ``Job.fused_projections`` q, k and v
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
  kernel's measured speed where the catalog has it (``Job.attention_kernel``, planner/attention.py);
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
  (``Job.fused_elementwise`` False) they move more (work.memory_bound_bytes);
- without flash attention (``Job.flash_attention`` False) the full s x s scores are computed (no
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
  frameworks that keep only the shards (``Job.sp_regather``) all-gather them again in backward,
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
- CP: ring exchange of K and V, 2(cp-1)/cp of the layer's KV bytes (n_heads wide with ``Job.kv_repeated``), ``CP_HIDDEN`` (50%) of it hidden
  (from the shared window, after TP's and EP's);
- PP p2p: ``s*b*h*2/(tp*cp)`` bytes per hop, each way; the 2(pp vpp - 1) fill/drain hops are exposed
  and 20% of the 2 m vpp steady-state hops (prior ``PP_P2P_HIDDEN`` = 0.8), on the link of tp*pp
  ranks (interleaving multiplies the hops by vpp: Narayanan et al. 2021, section 2.2.2; ZB-V's turn
  on the last stage needs no hop, counted anyway);
- PP: bubble ``(pp-1)/(m*vpp)`` of the per-micro-batch work (m micro-batches per replica) for 1F1B
  and interleaved; zero-bubble ZB-H1 (Qi et al. 2023) cuts it to 1/3 (with F = B = W),
  ZB-V (vpp = 2) to a prior 1/10 (ideal 0; margin for unequal F, B, W); DualPipe and DualPipeV
  as job.SCHEDULES derives them (DualPipe also holds two copies of the parameters and halves the
  output layer's imbalance: its first rank runs the last stage every other micro-batch);
- activation offload: saved activations go to host and back (2x bytes) over ``host_gbps``
  (default 25 GB/s), 80% hidden behind compute (prior);
- optimizer: its states (``Job.optimizer_bytes``, 12) and a 4-byte gradient per local parameter at HBM bandwidth;
- host wait (``host_s``, ``Job.layer_overhead_s`` per layer of the stage and micro-batch, x the
  recompute factor; 0 unless a calibration or a trace's host-bound idle sets it): the device idle
  while the host launches or synchronises; it lengthens each micro-batch (and so the bubble), and
  collectives already launched on their own streams run on under it (DP, EP and offload hide in
  compute + wait; TP, fused with the GEMMs, does not). Plus, once per step after the optimizer,
  ZeRO-1/2 weights gathered tensor by tensor on the host (``Job.zero_gather_copy_s``, nanotron;
  planner/data_parallel.py): nothing runs under it.
Each link has a latency (alpha) of 10 us per collective step on intra-node, 20 us inter-node; a
measured network profile replaces both tiers (planner/links.py, planner/network.py).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import fields, replace
from typing import Any

import numpy as np

from .activations import NORM_ACT, NORM_MLA, QKV_OFFLOADED, SELECTIVE, activations
from .buffers import comm_buffer_bytes, gather_bytes, largest_tensor_params
from .data_parallel import dp_seconds, zero_gather_host_s
from .dispatch import exchange_seconds, sm_contention_s

# the job and the strategy vocabularies live in job.py; cost.py re-exports them for its callers
from .job import (
    BOTTLENECKS,
    CP_HIDDEN,
    CP_REPLAY,
    DP_OVERLAP,
    DUALPIPE,
    DUALPIPEV,
    EP_REPLAY,
    HOST_GBPS,
    OFFLOAD_HIDDEN,
    QKV_OFFLOADED_BYTES,
    RECOMPUTE,
    SCHEDULES,
    TP_OVERLAP,
    TP_REPLAY,
    Job,
    bottleneck_codes,
)
from .links import Links, ring_share
from .rates import (
    FP8_WEIGHT_BYTES,
    base_dtype,
    efficiencies,
    linear_shape,
    norm_moe_act,
    params,
)
from .stages import pipeline_seconds, stage_params
from .states import state_bytes
from .tp_overlap import hidden_per_layer, regather_per_layer, share_of_all
from .window import HIDDEN_PARTS, Window
from .work import gemm_kernels_per_layer, gemm_seconds_at_peak, memory_bound_bytes, tp_gemm_seconds_at_peak

__all__ = [
    "BOTTLENECKS",
    "DP_OVERLAP",
    "RECOMPUTE",
    "SCHEDULES",
    "TP_OVERLAP",
    "Job",
    "efficiencies",
    "evaluate",
    "linear_shape",
    "params",
]


def _opt(s: dict[str, np.ndarray], key: str, like: np.ndarray) -> np.ndarray:
    v = s.get(key)
    return np.zeros(like.shape) if v is None else v.astype(np.float64)


CHUNK = 32768  # configurations per block: the block's temporaries stay in cache (1.4x faster at 1M)


def evaluate(job: Job, s: dict[str, np.ndarray], keys: Collection[str] | None = None) -> dict[str, np.ndarray]:
    """Memory parts (GB), time parts (s), step time, MFU, fits and bottleneck per configuration,
    evaluated in blocks of CHUNK configurations (job fields given per configuration are sliced).
    ``keys``: return only these results (a search ranks millions of configurations on three of them)."""
    n = len(s["tp"])
    if n <= CHUNK:
        r = _evaluate(job, s)
        return r if keys is None else {k: r[k] for k in keys}
    # each block is written into arrays allocated once: keeping the blocks and concatenating them
    # held every result twice
    out: dict[str, np.ndarray] = {}
    for i in range(0, n, CHUNK):
        part: dict[str, Any] = {
            f.name: v[i : i + CHUNK]
            for f in fields(job)
            if isinstance(v := getattr(job, f.name), np.ndarray) and v.shape == (n,)
        }
        block = _evaluate(replace(job, **part) if part else job, {k: v[i : i + CHUNK] for k, v in s.items()})
        if not out:
            out = {k: np.empty(n, v.dtype) for k, v in block.items() if keys is None or k in keys}
        for k, v in out.items():
            v[i : i + CHUNK] = block[k]
    return out


def _evaluate(job: Job, s: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    m, hw = job.model, job.hw
    tp, pp, vpp, dp, cp, ep = (s[k].astype(np.float64) for k in ("tp", "pp", "vpp", "dp", "cp", "ep"))
    zero, mb, rc = s["zero"], s["mb"].astype(np.float64), s["recompute"].astype(np.int64)
    etp = _opt(s, "etp", tp)
    etp = np.where(etp > 0, etp, tp)
    hsdp = _opt(s, "hsdp", tp)
    # context-parallel ranks hold the same weights and compute gradients on other tokens: gradient
    # reduction and ZeRO sharding run over dp x cp ranks (Megatron's data-parallel group "with
    # context parallel", torchtitan's dp_shard x cp FSDP mesh)
    dpc = dp * cp
    shard = np.where((zero >= 3) & (hsdp > 0) & (hsdp < dp), hsdp * cp, dpc)  # the group ZeRO shards over
    sched = _opt(s, "sched", tp).astype(np.int64)
    offload = _opt(s, "offload", tp) > 0
    L, h, seq = float(m.n_layers), float(m.d_model), float(job.seq_len)
    dense, experts, emb = params(m)
    # uneven stages and where each schedule puts the parameters (planner/stages.py): the most
    # loaded stage sets the memory peak and the pipeline's pace (its layers' compute and
    # communication are x `uneven` the even share); the first stage holds the most micro-batches,
    # the last the output layer; end_L: the larger end stage, which also holds the embedding or
    # the output layer's weights
    stage_L, first_L, last_L, end_L, uneven, layer_p, stage_p, end_p, p_dev, layers_p, e_dev = stage_params(
        job, tp=tp, pp=pp, ep=ep, etp=etp, sched=sched
    )
    dual = (sched == DUALPIPE) & (pp > 1)
    # activation offload: the layers of each micro-batch that go to the host (offload_layers, or all of the stage's)
    part = _opt(s, "offload_layers", tp)
    offloaded = np.where(offload, np.where(part > 0, np.minimum(part, stage_L), stage_L), 0.0)
    # ZeRO-3's all-gather of the stage and the bytes per gathered parameter (Job.fp8_all_gather)
    gather_b, unit_bytes = gather_bytes(job, p_dev=p_dev, layers_p=layers_p, unit_is_layer=layer_p >= emb / tp)
    keep = (_opt(s, "keep_params", tp) > 0) & (zero >= 3)  # FSDP's gathered weights kept forward to backward
    ep_fold = (
        ep * etp / tp
    )  # e_dev, the experts' parameters, are shared by this many times fewer ranks (planner/states.py)
    w_b, g_b, o_b = state_bytes(
        job, p_dev=p_dev, zero=zero, shard=shard, keep=keep, pp=pp, e_dev=e_dev, ep_fold=ep_fold
    )
    # pipeline schedules split a replica's batch into at least pp micro-batches, unless the
    # strategy states its gradient accumulation (ga > 0): then exactly that many
    ga = _opt(s, "ga", tp)
    n_micro = np.where(
        ga > 0, ga, np.where(pp > 1, np.maximum(job.global_batch / (dp * mb), pp), job.global_batch / (dp * mb))
    )
    mb = np.where((pp > 1) | (ga > 0), job.global_batch / (dp * n_micro), mb)
    act_b, act_layer, rfactor, sp = activations(
        job,
        s,
        tp=tp,
        pp=pp,
        cp=cp,
        mb=mb,
        n_micro=n_micro,
        rc=rc,
        sched=sched,
        offloaded=offloaded,
        stage_L=stage_L,
        first_L=first_L,
        last_L=last_L,
    )
    # what ZeRO-3 holds gathered at once: a layer, or the embedding / output layer where it is
    # larger (FSDP wraps them as units of their own; Llama 3 8B's 128K x 4096 is 2.4 layers), or
    # gathered tensor by tensor, the largest tensor
    unit_p = (
        largest_tensor_params(m, job.fused_projections, tp, ep, etp)
        if job.zero3_gather == "tensor"
        else np.maximum(layer_p, emb / tp)
    )
    buf_b = comm_buffer_bytes(
        zero, keep, unit_p, job.grad_bytes, static_memory=hw.static_memory, param_bytes=unit_bytes
    )
    reserve_b = np.full(tp.shape, job.reserve_bytes)
    total_b = w_b + g_b + o_b + act_b + buf_b + reserve_b
    # ---- time ---------------------------------------------------------------------------------
    peak = hw.peak_flops(base_dtype(job.precision))
    gemm_eff, attn_eff, prec_factor = efficiencies(job, cp)
    gemm_eff, attn_eff = gemm_eff * job.gemm_scale, attn_eff * job.attn_scale
    tokens = job.global_batch * seq
    model_flops = m.flops_per_token(job.seq_len) * tokens  # per step, all devices
    attn_flops = (m.flops_per_token(job.seq_len) - 6.0 * m.matmul_params_per_token()) * tokens
    dense_flops = model_flops - attn_flops
    attn_layers = L - m.linear_layers  # softmax-attention layers (linear attention has no scores)
    score_bytes = 0.0
    if not job.flash_attention:
        attn_flops = (m.flops_per_token(job.seq_len, causal=False) - 6.0 * m.matmul_params_per_token()) * tokens
        # per score element: QK^T writes it, fused softmax and dropout read and write it (+ a 1-byte
        # mask), AV reads it (13 B forward); backward about 19 B: 32 B at fp16
        score_bytes = 32.0 * m.n_heads * seq * tokens * attn_layers
    moe_layers = float(m.n_layers - m.first_dense_layers) if m.n_experts else 0.0
    gemm_time, logits_gemm, bf16_gemm = gemm_seconds_at_peak(
        job, dense_flops, tokens, seq * mb / cp, tp, ep, etp
    )  # work.py
    # a faster precision speeds up all GEMMs but those that run at the bf16 rate (work.py)
    work = ((gemm_time - bf16_gemm) * prec_factor + bf16_gemm) / gemm_eff + attn_flops / attn_eff
    elem_bytes = memory_bound_bytes(job, tokens, tp, sp, score_bytes, ep, etp)
    # layernorm_moe_act recomputes memory-bound ops only: their forward bytes once more (also with
    # MLA's up-projections, whose GEMMs are in that policy's recompute factor)
    elem_bytes = elem_bytes + np.where(
        (rc == NORM_ACT) | (rc == NORM_MLA), norm_moe_act(m, job.swiglu_eager)[1] * L * tokens, 0.0
    )
    # fp8: the linear weights on the device are cast too (rates.FP8_WEIGHT_BYTES), once per step when
    # the framework caches them across micro-batches (Job.fp8_weight_cache), else every micro-batch
    fp8_weight_s = (
        0.0
        if job.precision != "fp8"
        else (
            FP8_WEIGHT_BYTES[job.fp8_recipe]
            * L
            / pp
            * (dense / tp + experts / (ep * etp))
            * (1 if job.fp8_weight_cache else n_micro)
            / hw.hbm_bytes_per_s
        )
    )
    # the loss over the vocabulary: ~6 fp32 passes over the logits per token (upcast, softmax,
    # gradient, downcast), memory-bound
    loss_bytes = job.loss_bytes[1] * m.vocab * tokens
    if job.gemm_eff is not None:
        elem_bytes = loss_bytes = 0.0  # a measured efficiency (from a trace) includes elementwise time
    # the output layer (logits GEMM, part of `work`, and the loss) is not recomputed and runs on the
    # last pipeline stage only: that stage does pp x its evenly spread share, and the pipeline
    # runs at the pace of its slowest stage
    logits_s = logits_gemm / gemm_eff / peak / job.devices
    loss_s = loss_bytes / hw.hbm_bytes_per_s / job.devices
    layers_s = (work / peak + elem_bytes / hw.hbm_bytes_per_s) / job.devices - logits_s + fp8_weight_s
    # each GEMM kernel's fixed time, forward and backward's two (a measured efficiency includes it)
    kernel_s = 3e-6 * (hw.gemm_kernel_us or 0.0) * (job.gemm_eff is None) * n_micro
    layers_s = layers_s + kernel_s * gemm_kernels_per_layer(job) * L / pp
    logits_s = logits_s + kernel_s / pp  # one output-layer GEMM, on the last stage (x pp below)
    # selective recompute (Megatron's core attention: QK^T, softmax, dropout, attention over V)
    # re-runs the attention core's forward in backward: its FLOPs at the attention rate and, without
    # flash attention, the 13 of the 32 B per score its forward moves; as a per-configuration factor
    # on the layers' time (the other policies' factors are fixed shares, RECOMPUTE_FACTOR)
    score_fwd_b = 0.0 if job.gemm_eff is not None else 13.0 / 32.0 * score_bytes  # measured efficiencies include it
    sel_extra_s = (attn_flops / 3.0 / attn_eff / peak + score_fwd_b / hw.hbm_bytes_per_s) / job.devices
    rf = np.where(rc == SELECTIVE, 1.0 + sel_extra_s / np.maximum(layers_s, 1e-30), rfactor[rc])
    hw_flops_factor = np.where(rc == SELECTIVE, 1.0 + attn_flops / 3.0 / model_flops, rfactor[rc])  # for HFU
    # the pace: the most loaded stage, a middle one or the last with the output layer
    compute_s = np.maximum(
        layers_s * rf * uneven,
        np.where(
            dual,
            layers_s * rf * (first_L + last_L) / 2 / (L / pp)
            + (logits_s + loss_s) * pp / 2,  # the last stage every other micro-batch
            layers_s * rf * last_L / (L / pp) + (logits_s + loss_s) * pp,
        ),
    )
    # a separate gradient-accumulation kernel (Job.grad_accum_bytes) over the stage's parameters
    # after every micro-batch's backward: memory-bound device work in the stage's pace
    compute_s = compute_s + job.grad_accum_bytes * p_dev * n_micro / hw.hbm_bytes_per_s
    # the device waiting on the host (Job.layer_overhead_s): per layer of the stage and micro-batch,
    # replayed by recompute. The compute stream is idle then, but collectives already launched on
    # their own streams run on: the windows DP, EP and offload transfers hide in are compute + wait
    host_s = job.layer_overhead_s * stage_L * n_micro * rf
    busy_s = compute_s + host_s
    window = Window(busy_s)  # TP, EP, CP, PP p2p, DP/FSDP and offload transfers hide under it, in that order
    net = Links.of(job)  # planner/links.py: bandwidth and latency by where a group sits
    link, ring = net.bandwidth, net.ring
    msg = seq * mb * h * 2 / cp

    def all_reduce(n: np.ndarray, nbytes: np.ndarray | float) -> np.ndarray:
        """All-gather + reduce-scatter (sequence parallelism) of nbytes over n consecutive ranks."""
        return np.where(n > 1, ring(n, 2 * nbytes, n, 2), 0.0)

    # per layer and micro-batch, fwd + bwd: 2 all-reduce-equivalents for attention, 2 for the MLP;
    # MoE layers move the k routed copies over the expert-TP group instead of the MLP's two
    tp_attn = 2 * all_reduce(tp, msg)
    tp_mlp = tp_attn * (L - moe_layers)
    tp_moe = 2 * all_reduce(etp, msg * max(m.experts_per_token, 1)) * moe_layers if moe_layers else np.zeros_like(tp)
    tp_mlp = tp_mlp + tp_moe
    # recomputing the forward replays its collectives: forward traffic is half of fwd + bwd, and a
    # policy recomputes 3 x (factor - 1) of the forward (full: all of it, x 1.5 in total)
    replay = 1.0 + 1.5 * (rf - 1.0)
    # TP's own replay where a policy says which collectives it keeps (job.TP_REPLAY): selective
    # recomputes only the attention core, between the collectives (none replayed); torchtitan's op
    # policy saves the reduce-scatter outputs and regathers: the forward's 2 all-gathers of 8 again
    tp_replay = np.where(np.isnan(TP_REPLAY[rc]), replay, TP_REPLAY[rc])
    ep_replay = np.where(np.isnan(EP_REPLAY[rc]), replay, EP_REPLAY[rc])  # job.EP_REPLAY, CP_REPLAY
    cp_replay = np.where(np.isnan(CP_REPLAY[rc]), replay, CP_REPLAY[rc])
    tp_s = (tp_attn * L + tp_mlp) / pp * n_micro * tp_replay * uneven
    fp8_tensorwise = job.precision == "fp8" and job.fp8_recipe == "tensorwise"
    fp8_tp = 0.75 if fp8_tensorwise else 1.0
    tp_s = tp_s * fp8_tp  # tensorwise: the 4 all-gathers of 8 collectives move fp8 (rates.fp8_cast_bytes)
    # TP/GEMM overlap per mechanism, each collective capped by the GEMM it is fused with
    # (planner/tp_overlap.py); MoE layers' expert-TP collectives by the mechanism's share
    mode = _opt(s, "tp_overlap", tp).astype(np.int64)
    if np.any(mode > 0) or job.sp_regather:  # (a search without an overlap mechanism skips the GEMM-by-GEMM terms)
        qkv_s, o_s, up_s, down_s = (
            g / (gemm_eff * peak) for g in tp_gemm_seconds_at_peak(job, seq * mb / cp, tp, prec_factor)
        )
    if np.any(mode > 0):
        hid_a, hid_m = hidden_per_layer(mode, tp, tp_attn / 4, qkv_s, o_s, up_s, down_s, job.fused_projections, sp)
        hidden = hid_a * L + hid_m * (L - moe_layers) + share_of_all(mode, tp, job.fused_projections, sp) * tp_moe
        tp_s = tp_s - window.take(np.minimum(hidden / pp * n_micro * tp_replay * uneven * fp8_tp, compute_s), "tp")
    if job.sp_regather:  # sequence parallelism's backward re-gathers (planner/tp_overlap.py)
        # one all-gather of the saved shards (fp8 where tensorwise fp8 saves its cast inputs)
        c = np.where(
            sp > 0, ring(tp, msg * (0.5 if fp8_tensorwise and job.fp8_saved_inputs == "fp8" else 1.0), tp), 0.0
        )
        raw, hid = regather_per_layer(mode, c, qkv_s, up_s, L, L - moe_layers)
        per_stage = n_micro / pp * uneven
        tp_s = tp_s + raw * per_stage - window.take(np.minimum(hid * per_stage, compute_s), "tp")
    # the token exchange of each MoE layer (planner/dispatch.py), the most loaded rank's tokens
    exchange = exchange_seconds(
        m,
        dispatch=job.ep_dispatch,
        tokens=seq * mb / (tp * cp),
        h=h,
        imbalance=job.moe_imbalance,
        ep=ep,
        span=ep * etp,
        node=net.node,
        link=link,
    )
    ep_s = np.where(ep > 1, exchange, 0.0) * (moe_layers / pp) * n_micro * ep_replay * uneven
    # (before DP's: the exchange sits inside every layer; gradients can wait) EP overlap (DualPipe, Megatron's
    # EP-communication overlap): one micro-batch's exchange runs under another's compute (2+ micro-batches)
    ep_on = (
        (_opt(s, "ep_overlap", tp) > 0) | dual | (sched == DUALPIPEV)
    )  # the DualPipes pair forward and backward chunks
    ep_raw = ep_s
    ep_s = window.hide(ep_s, (ep_on & (n_micro >= 2)).astype(np.float64), busy_s, "ep")
    ep_s = ep_s + sm_contention_s(job.ep_dispatch, ep_raw - ep_s, job.deepep_sms, hw.sms)  # planner/dispatch.py
    # CP (before DP's, like EP's: the ring exchange sits inside every attention layer): K and V
    # blocks, CP_HIDDEN of them behind the attention of the block before (a prior share of the
    # exchange, bounded by what is left of the window, not by the attention alone: a cap that
    # shrinks with faster attention made it slower when the window also held offload or DP)
    # (Job.kv_repeated: the kernel's K and V, and so the exchanged ones, are n_heads wide)
    kv_heads = m.n_heads if job.kv_repeated and not m.mla else m.n_kv_heads
    kv_bytes = seq * mb * 2 * kv_heads * m.head_dim * 2 / tp
    cp_raw = (
        np.where(cp > 1, ring_share(cp, 2) * kv_bytes / link(cp * tp, cp) * (attn_layers / pp) * n_micro * 2, 0.0)
        * cp_replay
        * uneven
    )
    cp_s = window.overlap(cp_raw, CP_HIDDEN, "cp")
    # the pipeline's point-to-point transfers and bubble (planner/stages.py)
    pp_p2p_s, bubble_s = pipeline_seconds(
        net,
        window,
        p2p_bytes=seq * mb * h * 2 / (tp * cp),
        tp=tp,
        pp=pp,
        vpp=vpp,
        n_micro=n_micro,
        sched=sched,
        dual=dual,
        stage_s=busy_s + tp_s + ep_s + cp_s,
    )
    dp_s = dp_seconds(
        job,
        ring=ring,
        window=window,
        p_dev=p_dev,
        gather_b=gather_b,
        tp=tp,
        pp=pp,
        dpc=dpc,
        shard=shard,
        zero=zero,
        keep=keep,
        stage_L=stage_L,
        n_micro=n_micro,
        busy_s=busy_s,
        rf=rf,
        e_dev=e_dev,
        ep_fold=ep_fold,
    )
    host = (hw.host_gbps or HOST_GBPS) * 1e9
    offload_raw = 2 * act_layer * offloaded * n_micro / host
    # qkv_proj_offloaded: the q, k, v projections (job.QKV_OFFLOADED_BYTES) to the host and back
    qkv_raw = 2 * seq * mb * h * QKV_OFFLOADED_BYTES / (tp * cp) * stage_L * n_micro / host
    offload_raw = offload_raw + np.where(rc == QKV_OFFLOADED, qkv_raw, 0.0)
    offload_s = window.overlap(offload_raw, OFFLOAD_HIDDEN, "offload")
    opt_s = (
        (job.optimizer_bytes + 4.0) * o_b / job.optimizer_bytes / hw.hbm_bytes_per_s
    )  # states + fp32 gradient, as sharded
    # after the optimizer step, outside every window: ZeRO weights gathered tensor by tensor on the host
    gather_s = zero_gather_host_s(job, zero=zero, dpc=dpc, stage_L=stage_L)
    host_s = host_s + gather_s
    step_s = busy_s + tp_s + dp_s + ep_s + cp_s + bubble_s + pp_p2p_s + opt_s + offload_s + gather_s
    capacity_b = job.capacity_bytes
    fits = total_b <= capacity_b
    bott = bottleneck_codes(compute_s, (tp_s, dp_s, ep_s, cp_s, bubble_s + pp_p2p_s, opt_s, offload_s, host_s), fits)
    return {
        "weights_gb": w_b / 1e9,
        "grads_gb": g_b / 1e9,
        "optimizer_gb": o_b / 1e9,
        "activations_gb": act_b / 1e9,
        "buffers_gb": buf_b / 1e9,
        "reserve_gb": reserve_b / 1e9,
        "total_gb": total_b / 1e9,
        "fits": fits,
        "compute_s": compute_s,
        "tp_s": tp_s,
        "dp_s": dp_s,
        "ep_s": ep_s,
        "cp_s": cp_s,
        "bubble_s": bubble_s,
        "pp_p2p_s": pp_p2p_s,
        "optimizer_s": opt_s,
        "offload_s": offload_s,
        "host_s": host_s + np.zeros_like(tp),
        "step_s": step_s,
        # what the transfers hid under compute (the parts above are what stays exposed)
        **{f"hidden_{part}_s": window.hidden_s.get(part, 0.0) + np.zeros_like(tp) for part in HIDDEN_PARTS},
        "mfu": model_flops / (step_s * job.devices * peak),
        "hfu": model_flops * hw_flops_factor / (step_s * job.devices * peak),
        "headroom_gb": (capacity_b - total_b) / 1e9,
        "hfu_tflops_per_device": model_flops * hw_flops_factor / step_s / job.devices / 1e12,
        "tokens_per_s_per_device": tokens / step_s / job.devices,
        "tflops_per_device": model_flops / step_s / job.devices / 1e12,
        "bottleneck": bott,  # codes: BOTTLENECKS[code]
        "grad_accum": n_micro,  # micro-batches per replica per step
        "micro_batch": mb,  # sequences per micro-batch as run (a pipeline may split the given mb)
    }
