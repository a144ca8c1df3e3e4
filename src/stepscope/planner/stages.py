"""How a model's layers are split over pipeline stages: Megatron's even split (with the embedding
and the loss optionally counted as layers) and nanotron's split by cumulative block cost. The cost
model (cost.py) takes the most loaded stage's layers for its pace and memory, the first stage's
for the micro-batches it holds in flight and the last stage's for the output layer; and which
parameters the most loaded rank holds under each pipeline schedule (:func:`stage_params`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from ..catalog.model_flops import ModelShape
from .job import Job
from .links import Links
from .rates import params
from .vocab import BUBBLE_FACTOR, DUALPIPE, PP_P2P_HIDDEN, ends_on_first_rank
from .window import Window


@dataclass(frozen=True, kw_only=True)
class StageParams:
    """Per configuration: layers of the most loaded stage, the first and the last stage, the larger
    end stage; ``uneven`` = the most loaded stage's layers / (L / pp) (for the per-layer
    transfers); parameters of a layer, a middle stage and an end stage on one rank; ``p_dev`` the
    most any rank holds, ``layers_p`` the transformer layers' share of it (without the embedding
    and the output layer), ``experts_p`` the experts' share of that."""

    stage_L: np.ndarray
    first_L: np.ndarray
    last_L: np.ndarray
    end_L: np.ndarray
    mtp_L: float  # MTP modules, on the last stage
    share_L: np.ndarray  # the even share of a stage's compute in layers, MTP modules counted: (L + mtp) / pp
    uneven: np.ndarray
    layer_p: np.ndarray
    stage_p: np.ndarray
    end_p: np.ndarray
    p_dev: np.ndarray
    layers_p: np.ndarray
    experts_p: np.ndarray


def stage_params(
    job: Job, *, tp: np.ndarray, pp: np.ndarray, ep: np.ndarray, etp: np.ndarray, sched: np.ndarray
) -> StageParams:
    """Parameters per rank: a stage's layers x (dense / tp + experts / (ep x etp)), an end stage's
    plus the embedding or the output layer (vocab x h / tp). DualPipe's rank i holds stages i and
    pp-1-i (two copies of the parameters; the first rank both ends, embedding and output layer);
    V-shaped schedules (ZB-V, DualPipeV) put the first and the last chunk on the first rank, so it
    holds both the embedding and the output layer. Multi-token-prediction modules (DeepSeek-V3's
    MTP: a transformer layer and a 2h x h projection each, sharing the output layer) sit on the
    last stage with the output layer, as Megatron builds them (its MTP block only on the last
    pipeline stage) and DeepSeek-V3 deploys them (report, section 3.2.1: the deepest layers with
    the output head on the rank of the shallowest); a module's layer counted as an average layer."""
    m = job.model
    L, mtp = float(m.n_layers), float(m.mtp_layers)
    dense, experts, emb = params(m)
    stage_L, first_L, last_L = stage_layers(
        L, pp, job.framework.pipeline.split_embedding, split_costs(m) if job.framework.pipeline.split_cost else None
    )
    end_L = np.maximum(first_L, last_L)
    layer_p = dense / tp + experts / (ep * etp)
    mtp_p = mtp * (layer_p + 2.0 * float(m.d_model) ** 2 / tp)
    first_layers, last_layers = first_L * layer_p, last_L * layer_p + mtp_p
    # behind a pipeline the MTP stage builds an embedding of its own (Megatron: "MTP need both
    # embedding layer and output layer"), beside the output layer
    last_emb = np.where((pp > 1) & (mtp > 0), 2.0, 1.0) * emb / tp
    stage_p = stage_L * layer_p
    dual = (sched == DUALPIPE) & (pp > 1)
    v_shape = ends_on_first_rank(sched, pp) & ~dual
    # the layers (transformer layers and MTP modules) of the rank holding the most at an end
    first_end, last_end = first_layers + emb / tp, last_layers + last_emb
    end_layers = np.where(
        dual,
        first_layers + last_layers,
        np.where(v_shape, end_L * layer_p + mtp_p, np.where(first_end >= last_end, first_layers, last_layers)),
    )
    end_p = np.where(dual | v_shape, end_layers + 2 * emb / tp, np.maximum(first_end, last_end))
    p_dev = np.maximum(np.where(dual, 2 * stage_p, stage_p), end_p)
    layers_p = np.where(dual, np.maximum(2 * stage_p, end_layers), np.where(stage_p >= end_p, stage_p, end_layers))
    experts_p = layers_p * (experts / (ep * etp)) / np.maximum(layer_p, 1e-30)
    return StageParams(
        stage_L=stage_L,
        first_L=first_L,
        last_L=last_L,
        end_L=end_L,
        mtp_L=mtp,
        share_L=(L + mtp) / pp,
        uneven=stage_L / (L / pp),
        layer_p=layer_p,
        stage_p=stage_p,
        end_p=end_p,
        p_dev=p_dev,
        layers_p=layers_p,
        experts_p=experts_p,
    )


def stage_layers(
    L: float, pp: np.ndarray, split_embedding: bool, split_cost: tuple[int, int] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(layers of the most loaded stage, of the first stage, of the last stage: the one with the
    output layer). L / pp per stage when pp divides L; otherwise the end stages take what is left
    (:func:`end_split`, Megatron's decoder_first/last_pipeline_num_layers); with
    account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split the embedding
    and the loss count as one layer each: the first and the last stage hold ceil((L + 2) / pp) - 1
    transformer layers, the middle ones the rest as evenly as it goes (ceil((L + 2) / pp) each when
    pp divides L + 2); with 2 stages ceil(L / 2) and floor(L / 2).
    ``split_cost``: (a layer's cost, the output layer's cost), the split balances these
    (nanotron, :func:`cost_split`)."""
    if split_cost is not None:
        sizes, k = np.unique(pp, return_inverse=True)
        out = np.array([cost_split(int(L), int(p), *split_cost) for p in sizes]).reshape(-1, 3)
        return out[k, 0], out[k, 1], out[k, 2]
    if not split_embedding:
        return end_split(L, pp)
    p = np.maximum(np.asarray(pp, dtype=np.float64), 1.0)
    end = np.ceil((L + 2) / p) - 1.0  # an end stage's layers beside the embedding or the loss
    # the middle stages share the rest as evenly as it goes (megatron_layout.rank_layers, the
    # explicit layout Megatron needs when pp does not divide L + 2)
    mid = np.ceil((L - 2.0 * end) / np.maximum(p - 2.0, 1.0))
    first = np.where(p > 2, end, np.where(p == 2, np.ceil(L / 2), L))
    last = np.where(p > 2, end, np.where(p == 2, np.floor(L / 2), L))
    return np.where(p > 2, np.maximum(mid, end), first), first, last


def end_split(L: float, pp: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(most layers on a stage, first stage's, last stage's) when pp need not divide L: Megatron-LM
    splits the layers evenly unless ``--decoder-first-pipeline-num-layers`` and
    ``--decoder-last-pipeline-num-layers`` give the end stages their own counts, the rest spread
    evenly over the pp - 2 middle ones (``get_transformer_layer_offset``). The middle stages hold
    m = ceil(L / pp) each, the ends the remainder L - (pp - 2) m, the first ceil of its half and
    the last (which also runs the output layer and the loss) the floor; where that would leave an
    end stage no layer (pp close to L; Megatron refuses an empty last stage given this way),
    m = floor(L / pp) and the ends hold more. With 2 stages both are ends: ceil(L / 2) and
    floor(L / 2). DeepSeek-V3's 61 layers on 16 stages: 4 a middle stage, 3 the first, 2 the
    last. torchtitan's generated split points (``generate_split_points``: the first stage
    floor(L / pp), the middle ones one more while the remainder lasts, the last what is left)
    agree on Llama 3.1 405B's 126 layers on 8 stages: 15, 16, 15."""
    pp = np.asarray(pp, dtype=np.float64)
    p = np.maximum(pp, 1.0)
    mid = np.where(L - (p - 2.0) * np.ceil(L / p) >= 2.0, np.ceil(L / p), np.floor(L / p))
    # what each end stage holds before rounding (one stage: all of it; pp dividing L: L / pp)
    half = np.where(p > 2.0, (L - (p - 2.0) * mid) / 2.0, L / p)
    first, last = np.ceil(half), np.floor(half)
    return np.where(p > 2.0, np.maximum(mid, first), first), first, last


def split_costs(m: ModelShape) -> tuple[int, int]:
    """nanotron's block costs (get_block_compute_costs): a decoder layer 4 n_heads d_head h +
    3 d_ff h (its formula, GQA or not), the output layer V h."""
    h = m.d_model
    return 4 * m.n_heads * m.head_dim * h + 3 * m.d_ff * h, m.vocab * h


@cache
def cost_split(L: int, pp: int, layer_cost: int, head_cost: int) -> tuple[float, float, float]:
    """(most layers on a stage, layers of the first stage, of the stage holding the output layer)
    when pipeline blocks are placed by their cumulative cost, as nanotron's build_model does: the
    blocks in forward order (the embedding, cost 0; L layers of ``layer_cost``; the output layer of
    ``head_cost``) go to the current stage, which moves on to the next once the cumulative cost
    exceeds k/pp of the total (the block that crosses stays). Integer costs compared exactly
    (cum x pp > total x k). nanotron's costs: a layer 4 n_heads d_head h + 3 d_ff h, the output
    layer V h; with a heavy output layer the last stage gets fewer layers and the first more."""
    if pp <= 1:
        return float(L), float(L), float(L)
    total = L * layer_cost + head_cost
    layers = [0] * pp
    k, cum = 0, 0
    for _ in range(L):  # at most a few hundred layers, once per (L, pp, costs)
        layers[k] += 1
        cum += layer_cost
        if cum * pp > total * (k + 1) and k < pp - 1:
            k += 1
    return float(max(layers)), float(layers[0]), float(layers[k])


def pipeline_seconds(
    net: Links,
    window: Window,
    *,
    p2p_bytes: np.ndarray,
    tp: np.ndarray,
    pp: np.ndarray,
    vpp: np.ndarray,
    n_micro: np.ndarray,
    sched: np.ndarray,
    dual: np.ndarray,
    stage_s: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(exposed point-to-point seconds, bubble seconds) of the pipeline, per configuration.

    Activations (and their gradients), ``p2p_bytes`` per micro-batch, cross every model-chunk
    boundary once per micro-batch each way: with vpp chunks per stage a stage sends vpp times per
    micro-batch and direction, and a micro-batch's path crosses pp x vpp - 1 boundaries
    (Narayanan et al. 2021, section 2.2.2: interleaving multiplies the communication by v). The
    fill and drain hops are on the critical path; the steady-state ones are PP_P2P_HIDDEN hidden
    behind compute (prior), from the same window as the other transfers. Consecutive stages sit tp
    ranks apart. The bubble: idle stages for (pp - 1)/vpp micro-batches' worth of a stage's work
    (``stage_s``: its compute and exposed in-layer transfers, TP, EP, CP) x the schedule's factor
    (vocab.SCHEDULES; DualPipe's (pp - 2) / (3 (pp - 1)))."""
    pp_span = tp * pp
    hop = p2p_bytes / net.bandwidth(pp_span) + net.step_s(pp_span)
    steady_s = np.where(pp > 1, 2 * n_micro * vpp * hop, 0.0)
    p2p_s = np.where(pp > 1, 2 * (pp * vpp - 1) * hop, 0.0) + window.overlap(steady_s, PP_P2P_HIDDEN, "pp_p2p")
    per_micro = stage_s / np.maximum(n_micro, 1)
    bubble_f = np.where(dual, (pp - 2) / (3 * np.maximum(pp - 1, 1)), BUBBLE_FACTOR[sched])
    return p2p_s, np.where(pp > 1, (pp - 1) / vpp * per_micro * bubble_f, 0.0)
