"""Activation memory per device: what each recompute policy stores per layer (counted from the
model's widths, rates.py), sequence parallelism, MoE routing imbalance, the micro-batches a
pipeline schedule holds in flight, the layer regenerated in backward, and the output layer's
logits.

Activations per layer and micro-batch (Korthikanti et al. 2022, with sequence parallelism and
flash attention): ``s*b*h*c/(tp*cp)`` bytes, c counted tensor by tensor from the model's widths
without recompute and with selective recompute (rates.stored_per_token: norms, q/k/v with GQA or
MLA widths, attention output, gated or plain MLP, MoE routed copies and experts; GPT-3: 32 and
30, Llama-3-8B 34 and 32, Mixtral 59 and 57), 2 with full recompute (only the layer input is
kept); without sequence parallelism (strategy ``sp=0``) the policy's h-wide tensors outside the
TP region (recompute.REPLICATED_BYTES: the norms' inputs and outputs, 8) are whole on every TP rank,
``s*b*h*(c/tp + r*(1 - 1/tp))/cp``, and every TP rank repeats the norms' and residual adds'
elementwise traffic; with ``moe_imbalance`` f the routed part is f x on the hot rank;
with recompute, one layer's no-recompute activations are live while backward regenerates it;
1F1B (also ZB-H1 and ZB-V, which keep 1F1B's peak) holds ``min(pp, micro-batches)`` micro-batches
(interleaved 1F1B x (1 + (pp-1)/(pp vpp)), at most all of them)
in flight on the first stage, AFAB all of them; activation offload keeps two layers' worth on
the device; the output layer adds ``s*b*V*6/(tp*cp)`` (bf16 logits + their fp32 copy for the
loss; 12 unfused, 10 with nanotron's copy, 4 compiled: vocab.LOSS_BYTES by the ``loss`` setting) on the
last stage, which holds one micro-batch; the peak is the larger stage. Weights, gradients,
optimizer states, buffers and the reserve are in the cost.py docstring.
"""

from __future__ import annotations

import numpy as np

from .job import Job
from .rates import MAXTEXT_NAMES, dots_saveable, maxtext_names, mla_up_proj, norm_moe_act, op_sac, stored_per_token
from .recompute import ACT_BYTES, GATHERED_BYTES, RECOMPUTE, RECOMPUTE_FACTOR, REPLICATED_BYTES
from .vocab import DUALPIPE, DUALPIPEV, SCHEDULES, ends_on_first_rank

OP_SAC, MINIMAL, NORM_ACT = RECOMPUTE.index("op"), RECOMPUTE.index("minimal"), RECOMPUTE.index("layernorm_moe_act")
MLA_UP, NORM_MLA = RECOMPUTE.index("mla_up_proj"), RECOMPUTE.index("layernorm_mla_up_proj_moe_act")
SELECTIVE, FULL = RECOMPUTE.index("selective"), RECOMPUTE.index("full")
QKV_OFFLOADED = RECOMPUTE.index("qkv_proj_offloaded")


def _policy_bytes(job: Job) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Per recompute policy: (activation bytes per token and layer / h, the h-wide bytes outside the
    TP region whole without sequence parallelism, the recompute factor), and the routed-expert part
    of the no-recompute bytes; from the model's widths, flash attention and hidden dropout."""
    m = job.model
    h, seq = float(m.d_model), float(job.seq_len)
    act_c, rfactor = ACT_BYTES.copy(), RECOMPUTE_FACTOR.copy()  # the nan entries follow the model's shape
    fp8_inputs = job.precision == "fp8" and job.framework.fp8.saved_inputs == "fp8"
    act_c[0], act_c[1], routed_c = stored_per_token(
        m, job.swiglu_eager, fp8_inputs, job.framework.kernels.kv_repeated
    )  # none and selective from the model's widths
    act_c[OP_SAC], rfactor[OP_SAC] = op_sac(m, job.seq_len)
    act_c[MINIMAL], rfactor[MINIMAL] = dots_saveable(m, job.seq_len)
    for policy, names in MAXTEXT_NAMES.items():  # MaxText's named policies, from the model's widths
        k = RECOMPUTE.index(policy)
        act_c[k], rfactor[k] = maxtext_names(m, job.seq_len, names)
    act_c[NORM_ACT] = norm_moe_act(m, job.swiglu_eager, fp8_inputs, fp8_inputs and job.framework.fp8.activation_cache)[
        0
    ]
    # MLA's per-head q, k, v freed after the attention kernel and regenerated (rates.mla_up_proj)
    mla_freed, rfactor[MLA_UP] = mla_up_proj(m, job.seq_len)
    rfactor[NORM_MLA] = rfactor[MLA_UP]
    act_c[MLA_UP], act_c[NORM_MLA] = act_c[0] - mla_freed, act_c[NORM_ACT] - mla_freed
    rep_c = REPLICATED_BYTES.copy()
    rep_c[OP_SAC] = 4.0 if m.gated_mlp else 2.0
    # without flash attention the scores' softmax output (2 B), dropout mask (1 B) and dropout
    # output (2 B) are saved for backward, 5 B per score (Korthikanti et al.'s 5as/h; a x s x s/cp
    # per sequence and softmax layer, split over TP's heads; the same kernels the no-flash time
    # model charges, cost.py), by every policy that does not recompute the attention core
    # (selective and full do); FlashAttention stores none of it
    if not job.framework.kernels.flash_attention:
        scores_c = 5.0 * m.n_heads * seq / h * (m.n_layers - m.linear_layers) / max(m.n_layers, 1)
        keeps_core = np.full(len(act_c), scores_c)
        keeps_core[[SELECTIVE, FULL]] = 0.0
        act_c = act_c + keeps_core
    if job.framework.memory.hidden_dropout:
        # the residual branches' dropouts (after attention and after the MLP) keep a 1-byte mask
        # each for backward, h wide outside the TP region (sharded by SP, whole without it):
        # Korthikanti et al.'s 34 sbh counts them; full recompute keeps only the layer's input
        masks = np.full(len(act_c), 2.0)
        masks[FULL] = 0.0
        act_c, rep_c = act_c + masks, rep_c + masks
    return act_c, rep_c, rfactor, routed_c


def _in_flight(
    s: dict[str, np.ndarray], pp: np.ndarray, n_micro: np.ndarray, sched: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(micro-batches in flight on the first stage, on the second, all of them (at least 1)).
    1F1B (and the zero-bubble schedules) hold at most pp micro-batches on the first stage, AFAB all;
    interleaved 1F1B (vpp chunks per stage) warms up with 2(pp-1) + (vpp-1) pp chunks of
    stage_L/vpp layers before its first backward, (1 + (pp-1)/(pp vpp)) x the non-interleaved
    pp x stage_L layers (Korthikanti et al. 2022, section 4.2.3; Megatron's interleaved
    schedule), never more than all the micro-batches; DualPipe holds pp + 1 micro-batches of a
    stage (its README's table), spread over the rank's two stages; DualPipeV pp + 1 of its 2 pp
    half-stage chunks: (pp + 1/2) x the rank's layers."""
    n = np.maximum(n_micro, 1)
    afab = (sched == SCHEDULES.index("afab")) & (pp > 1)
    full = np.where(afab, n, pp.astype(np.float64))  # before the cap at all the micro-batches
    second = np.where(afab, n, pp - 1.0)  # the second stage holds one micro-batch fewer (1F1B)
    if "vpp" in s:
        vpp = s["vpp"]
        interleaved = (vpp > 1) & (pp > 1) & (sched == SCHEDULES.index("1f1b"))
        if interleaved.any():
            full = np.where(interleaved, full * (1 + (pp - 1) / (pp * vpp)), full)
            second = np.where(interleaved, full - 2.0 / np.maximum(vpp, 1), second)  # 2 chunks fewer in the warm-up
    dual = (sched == DUALPIPE) & (pp > 1)
    full = np.where(dual, pp + 1.0, np.where((sched == DUALPIPEV) & (pp > 1), pp + 0.5, full))
    return np.minimum(full, n), second, n


def activations(
    job: Job,
    s: dict[str, np.ndarray],
    *,
    tp: np.ndarray,
    pp: np.ndarray,
    cp: np.ndarray,
    mb: np.ndarray,
    n_micro: np.ndarray,
    rc: np.ndarray,
    sched: np.ndarray,
    offloaded: np.ndarray,
    stage_L: np.ndarray,
    first_L: np.ndarray,
    last_L: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(peak activation bytes per device, bytes one stored layer takes, recompute factor by policy,
    sequence parallelism 0/1) per configuration. ``stage_L``: the layers of the most loaded stage,
    ``first_L``: of the first, ``last_L``: of the last, the one with the output layer (stages.stage_layers)."""
    m = job.model
    h, seq = float(m.d_model), float(job.seq_len)
    act_c, rep_c, rfactor, routed_c = _policy_bytes(job)
    # without sequence parallelism (sp=0) the h-wide tensors outside the TP region (REPLICATED_BYTES)
    # are whole on every TP rank: (1 - 1/tp) of them more per rank
    sp = s["sp"].astype(np.float64) if "sp" in s else np.ones(tp.shape)
    no_sp = (1.0 - sp) * (1.0 - 1.0 / tp)
    # sequence parallelism that saves its all-gathered inputs (sp_saves_gathered): the policy's
    # gathered bytes (GATHERED_BYTES) whole, (1 - 1/tp) of them more than Korthikanti's sharded count
    sp_saved = sp * (1.0 - 1.0 / tp) if job.framework.tp.sp_saves_gathered else np.zeros(tp.shape)
    act_layer = seq * mb * h * (act_c[rc] / tp + rep_c[rc] * no_sp + GATHERED_BYTES[rc] * sp_saved) / cp
    # the most loaded expert rank holds moe_imbalance x the routed copies the policy keeps (those
    # that store the expert MLP's tensors: no recompute and selective)
    act_layer = act_layer + np.where(rc <= 1, (job.framework.moe.imbalance - 1) * routed_c, 0.0) * seq * mb * h / (
        tp * cp
    )
    inflight, second, n = _in_flight(s, pp, n_micro, sched)
    # with recompute, backward regenerates one layer at a time: that layer's full activations
    # (the no-recompute size) are live on top of what the policy stores
    work_layer = (
        seq
        * mb
        * h
        * (
            (act_c[0] - act_c[rc]) / tp
            + (rep_c[0] - rep_c[rc]) * no_sp
            + (GATHERED_BYTES[0] - GATHERED_BYTES[rc]) * sp_saved
        )
        / cp
    )
    # the first stage holds the most micro-batches; with fewer layers there (first_L < stage_L) the
    # second stage, one micro-batch (interleaved: two chunks) fewer of more layers, can hold more
    held = np.maximum(first_L * inflight, np.where(pp > 2, stage_L * np.minimum(second, n), 0.0))
    # DualPipe's first rank also runs the last stage (the reverse direction's): its micro-batches
    # hold that stage's layers half the time
    held = np.where((sched == DUALPIPE) & (pp > 1), inflight * np.maximum(stage_L, (first_L + last_L) / 2), held)
    # offload: ``offloaded`` layers of each micro-batch in flight go to the host (all of the stage's,
    # or Megatron's --cpu-offloading-num-layers); at least two layers' worth stay for the transfers
    act_stage = (
        act_layer * np.where(offloaded > 0, np.maximum(held - inflight * offloaded, np.minimum(2.0, stage_L)), held)
        + work_layer
    )
    # the output layer: the loss's live bytes per logit (LOSS_BYTES; fused: bf16 logits + their
    # fp32 copy, s*b*V*(2+4)/(tp*cp)) on the last stage (vocab-parallel under TP), which holds one
    # micro-batch in flight under 1F1B; the peak is the larger of the first and the last stage
    logits = seq * mb * m.vocab * job.loss_bytes[0] / (tp * cp)
    kept_last = np.where(
        offloaded > 0, np.maximum(last_L - np.minimum(offloaded, last_L), np.minimum(2.0, last_L)), last_L
    )
    # multi-token-prediction modules on the last stage (stages.stage_params): each a layer of one
    # micro-batch and its own logits beside the main ones
    mtp_b = (act_layer + logits) * float(m.mtp_layers)
    act_last = act_layer * kept_last + work_layer + logits + mtp_b
    # V-shaped schedules (ZB-V, DualPipeV) and DualPipe put the output layer on the first rank, beside
    # the most micro-batches in flight
    act_b = np.where(
        pp > 1,
        np.where(ends_on_first_rank(sched, pp), act_stage + logits + mtp_b, np.maximum(act_stage, act_last)),
        act_stage + logits + mtp_b,
    )
    return act_b, act_layer, rfactor, sp
