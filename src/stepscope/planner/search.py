"""Strategy space: every valid (tp, pp, vpp, dp, cp, ep, etp, zero, hsdp, sched, mb, recompute,
offload), built and filtered as numpy arrays (no Python loop per configuration), then evaluated by
:mod:`cost` in one pass."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..catalog.hardware import Hardware, by_name
from ..catalog.model_flops import ModelShape
from ..catalog.models import resolve
from ..errors import ConfigError
from .cost import evaluate
from .job import Job
from .recompute import MLA_POLICIES, RECOMPUTE
from .strategy import FIELDS, STRATEGY_DEFAULTS
from .vocab import DUALPIPE, DUALPIPEV, SCHEDULES, TP_OVERLAP, divisors, dualpipe_micro_batches_ok
from .where import mask, parse_where


def hardware(name: str, user_file: str | None = None) -> Hardware:
    """A catalog device by name or alias (catalog.hardware.by_name); ``user_file``: a YAML of your
    own devices (the layout of data/hardware.yaml), which win over the catalog on name."""
    return by_name(name, user_file)


def model(name_or_path: str) -> ModelShape:
    """A model by catalog name, config.json or model directory (catalog.models.resolve)."""
    return resolve(name_or_path)


def _pow2_upto(n: int) -> list[int]:
    out, v = [], 1
    while v <= n:
        out.append(v)
        v *= 2
    return out


TIGHT_PENALTY_S = 1e9  # added to the ranking key of a row inside the memory margin: after every other row
CP_MIN_TOKENS = 1024  # the search's context parallelism beyond 8 keeps at least this many tokens a rank
UNEVEN_VPP = (2, 3, 4, 6, 8)  # virtual stages tried where pp x vpp does not divide the layers
SEARCHED_SCHEDULES = (0, 1, 2)  # 1f1b (interleaved with vpp > 1), zb-h1, zb-v; the others when --where names them


def space(job: Job, schedules: tuple[int, ...] = SEARCHED_SCHEDULES) -> dict[str, np.ndarray]:
    """All valid strategies as arrays. Constraints: tp | heads and tp <= devices per node; pp <=
    layers (stages may be uneven), layers % (pp*vpp) == 0 when interleaved (with
    ``uneven_virtual_stages`` also vpp in UNEVEN_VPP with pp*vpp <= layers); cp a power of two up to 8,
    or up to seq / CP_MIN_TOKENS for long sequences; dp = devices /
    (tp*pp*cp) integer; ep | experts and ep x etp | dp x cp x tp (Megatron's expert data-parallel
    group; ep | dp without ``ep_across_tp``); expert-TP etp in {1, tp} (MoE only); global
    batch % (dp*mb) == 0 (with pp > 1 and fewer micro-batches than stages, ga states them: run as
    they are); vpp > 1 only with pp > 1 and micro-batches % pp == 0; zero-bubble
    schedules only with pp > 1, ZB-V only with vpp = 2; seq % cp == 0; ZeRO > 0 only with dp > 1;
    HSDP shard groups (powers of 2 < dp) only with ZeRO-3; activation offload on or off; with
    ZeRO-3, weights resharded after forward or kept. From the job's framework configuration, not
    searched: ``tp_overlap`` / ``ep_overlap``, how the framework overlaps TP communication with
    GEMMs / the EP all-to-all with another micro-batch; ``tp_across_nodes`` lifts the default limit
    of TP to one node; ``sequence_parallel`` false: TP without sequence parallelism (the framework
    has none, or it is off), which only costs memory and elementwise time, so the search does not
    try both.
    ``schedules``: the SCHEDULES codes to try; AFAB only with pp > 1 and no vpp, DualPipe with an
    even pp and no vpp, DualPipeV with vpp = 2, both with an even number of micro-batches, at least
    2 x pp."""
    g = _degrees(job)
    g = _micro_batches(job, g, schedules)
    g = _memory_knobs(job, g)
    # gradient accumulation as the batch gives it; a pipeline with fewer micro-batches than stages
    # runs them as they are (stated ga: larger bubble) rather than being re-split into fractions
    n_micro = job.global_batch // (g["dp"] * g["mb"])
    g["ga"] = np.where((g["pp"] > 1) & (n_micro < g["pp"]), n_micro, 0).astype(np.int64)
    # the framework's, not searched; offload takes every layer (partial offload: --evaluate)
    fixed = {
        "sp": int(job.framework.tp.sequence_parallel),
        "offload_layers": 0,
        "tp_overlap": TP_OVERLAP.index(job.framework.tp.overlap),
        "ep_overlap": int(job.framework.moe.ep_overlap),
    }
    for k, v in fixed.items():
        g[k] = np.full(g["tp"].shape, v, dtype=np.int64)
    return {k: g[k] for k in FIELDS}


def _degrees(job: Job) -> dict[str, np.ndarray]:
    """The parallel degrees (tp, pp, cp, dp, vpp, ep, etp) that fit the devices and the model. The
    product is built one field at a time and filtered as soon as a constraint can be checked, so
    the arrays never hold the (much larger) unfiltered grid."""
    m = job.model
    tp_max = job.devices if job.framework.tp.across_nodes else min(job.devices_per_node, job.devices)
    # any divisor, not only powers of two (TP 12, PP 6 or 35 are real configurations); pipeline
    # stages may be uneven (the cost model paces the pipeline by the most loaded stage)
    tps = [t for t in divisors(m.n_heads) if t <= tp_max and job.devices % t == 0]
    pps = [p for p in divisors(job.devices) if p <= m.n_layers]
    # context parallelism up to 8, and beyond while each rank keeps at least CP_MIN_TOKENS of the
    # sequence (Llama 3 405B trained 128K with CP 16: 8K tokens a rank)
    cps = [c for c in _pow2_upto(max(8, job.seq_len // CP_MIN_TOKENS)) if job.seq_len % c == 0 and c <= job.devices]
    eps = [e for e in _pow2_upto(max(m.n_experts, 1)) if (m.n_experts % e == 0 if m.n_experts else e == 1)]
    g = _cross({}, "tp", tps)
    g = _cross(g, "pp", pps)
    g = _cross(g, "cp", cps)
    model_par = g["tp"] * g["pp"] * g["cp"]
    g = _keep(g, job.devices % model_par == 0)
    g["dp"] = job.devices // (g["tp"] * g["pp"] * g["cp"])
    # model chunks per stage: every count that splits the stage evenly, down to one layer per chunk
    # (NVIDIA's published recipes run 5, 6, 8, 10, 20 and 24: benchmarks/holdout); with the
    # embedding and the loss counted as layers (pipeline_split_embedding) the L + 2 slots split,
    # the end stages holding a layer fewer (Llama 3 405B's 126 layers in 16 x 8 slots)
    slots = m.n_layers + (2 if job.framework.pipeline.split_embedding else 0)
    uneven = job.framework.pipeline.uneven_virtual_stages
    g = _cross(g, "vpp", sorted(set(divisors(slots)) | (set(UNEVEN_VPP) if uneven else set())))
    # (dropped here rather than after the later crosses: without a pipeline there is nothing to interleave);
    # with an explicit layout every rank needs a layer in each of its stages (megatron_layout.py)
    even = slots % (g["pp"] * g["vpp"]) == 0
    fills = (g["pp"] * g["vpp"] <= m.n_layers) if uneven else np.zeros_like(even)
    g = _keep(g, (g["vpp"] == 1) | ((g["pp"] > 1) & (even | fills)))
    g = _cross(g, "ep", eps)
    across = job.framework.moe.across_tp
    g = _keep(g, ((g["dp"] * g["cp"] * g["tp"]) if across else g["dp"]) % g["ep"] == 0)
    g = _cross(g, "etp", [0, 1] if m.n_experts else [0])  # 0 = same as tp
    g = _keep(g, (g["etp"] == 0) | (g["tp"] > 1))
    if not across:
        return g
    # the expert data-parallel group, dp x cp x tp / (ep x etp) ranks, is whole (Megatron's
    # parallel_state: expert parallelism spans the data, context and tensor ranks)
    ep_span = g["ep"] * np.where(g["etp"] == 0, g["tp"], g["etp"])
    return _keep(g, (g["dp"] * g["cp"] * g["tp"]) % ep_span == 0)


def _micro_batches(job: Job, g: dict[str, np.ndarray], schedules: tuple[int, ...]) -> dict[str, np.ndarray]:
    """The micro-batch sizes that split the batch evenly, and the schedules each layout can run."""
    g = _cross(g, "mb", [1, 2, 4, 8])
    g = _keep(g, job.global_batch % (g["dp"] * g["mb"]) == 0)
    n_micro = job.global_batch // (g["dp"] * g["mb"])
    g = _keep(g, (g["vpp"] == 1) | ((g["pp"] > 1) & (n_micro % g["pp"] == 0)))
    g = _cross(g, "sched", list(schedules))
    n_micro = job.global_batch // (g["dp"] * g["mb"])
    sched, pp, vpp = g["sched"], g["pp"], g["vpp"]
    dual_ok = dualpipe_micro_batches_ok(n_micro, pp)
    return _keep(
        g,
        (sched == 0)
        | (
            (pp > 1)
            & (
                (sched == 1)
                | ((sched == 2) & (vpp == 2))
                | ((sched == 3) & (vpp == 1))
                | ((sched == DUALPIPE) & (vpp == 1) & (pp % 2 == 0) & dual_ok)
                | ((sched == DUALPIPEV) & (vpp == 2) & (g["cp"] == 1) & dual_ok)
            )
        ),
    )


def _memory_knobs(job: Job, g: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """ZeRO stages, HSDP shard groups, recompute policies, activation offload and FSDP's kept
    weights, where each applies."""
    g = _cross(g, "zero", [0, 1, 2, 3])
    g = _keep(g, (g["zero"] == 0) | (g["dp"] > 1))  # ZeRO stages are the same thing without data parallelism
    g = _cross(g, "hsdp", [0] + _pow2_upto(max(job.devices // 2, 1))[1:])
    g = _keep(
        g, (g["hsdp"] == 0) | ((g["zero"] == 3) & (g["hsdp"] < g["dp"]) & (g["dp"] % np.maximum(g["hsdp"], 1) == 0))
    )
    g = _cross(g, "recompute", recompute_policies(job.model))
    g = _cross(g, "offload", [0, 1])
    g = _cross(g, "keep_params", [0, 1])
    return _keep(g, (g["keep_params"] == 0) | (g["zero"] == 3))


def recompute_policies(m: ModelShape) -> list[int]:
    """The recompute policies a model can run (RECOMPUTE indices): those that recompute MLA's
    up-projections only for multi-latent attention models (elsewhere they are the same as none and
    layernorm_moe_act)."""
    return [k for k in range(len(RECOMPUTE)) if m.mla or k not in MLA_POLICIES]


def _cross(g: dict[str, np.ndarray], key: str, values: list[int]) -> dict[str, np.ndarray]:
    vals = np.asarray(values, dtype=np.int64)
    if not g:
        return {key: vals}
    n = len(next(iter(g.values())))
    out = {k: np.repeat(v, len(vals)) for k, v in g.items()}
    out[key] = np.tile(vals, n)
    return out


def _keep(g: dict[str, np.ndarray], ok: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[ok] for k, v in g.items()}


@dataclass(frozen=True)
class Plan:
    strategies: dict[str, np.ndarray]
    results: dict[str, np.ndarray]
    evaluated: int
    fitting: int = 0  # of the evaluated, how many fit in memory (none: the rows are the smallest)


# a layout: what --distinct keeps one row of (schedule, virtual stages, micro-batch size, HSDP,
# kept weights and offload are tuning within it)
LAYOUT = ("tp", "pp", "dp", "cp", "ep", "etp", "zero", "recompute")


def _layout_key(cols: dict[str, np.ndarray]) -> np.ndarray:
    """One int64 per row that is equal exactly when the LAYOUT fields are (mixed radix over the
    columns' small non-negative values; dense codes when the radix product would overflow)."""
    radices = [int(c.max()) + 1 for c in cols.values()]
    if math.prod(radices) >= 2**62:
        cols = {k: np.unique(c, return_inverse=True)[1].ravel() for k, c in cols.items()}
        radices = [int(c.max()) + 1 for c in cols.values()]
    key = np.zeros(len(next(iter(cols.values()))), dtype=np.int64)
    for c, r in zip(cols.values(), radices, strict=True):
        key = key * r + c.astype(np.int64)
    return key


def search(
    job: Job,
    top: int = 20,
    where: str = "",
    distinct: bool = False,
    pipeline_zero: tuple[int, ...] = (),
    asked: str | None = None,
) -> Plan:
    """The ``top`` fastest configurations that fit, those that leave the job's memory margin free
    ranked before those that do not (``where``: constraints, planner/where.py;
    ``distinct``: only the fastest of each LAYOUT, so the rows are alternatives, not variants;
    ``pipeline_zero``: the only ZeRO stages allowed with pp > 1, empty for no restriction;
    ``asked``: the conditions as the user gave them, before a framework's were added)."""
    conditions = parse_where(where) if where else []
    # schedules the search leaves out (AFAB, the DualPipes) are tried when --where names them
    named = {v for c in conditions if c.field == "sched" and c.op == "in" for v in c.values}
    s = space(job, tuple(sorted(set(SEARCHED_SCHEDULES) | named)))
    if pipeline_zero:
        s = _keep(s, (s["pp"] == 1) | np.isin(s["zero"], pipeline_zero))
    if not s["tp"].size:
        raise ConfigError(
            "no valid strategy for this model, device count and batch", fix="check --devices and --global-batch"
        )
    if where:
        keep = mask(s, conditions)
        if not keep.any():
            alone = [c for c in conditions if not mask(s, [c]).any()]  # a condition nothing meets on its own
            tried = ""
            if alone:
                f = alone[0].field
                names = {"sched": SCHEDULES, "recompute": RECOMPUTE, "tp_overlap": TP_OVERLAP}.get(f)
                values = np.unique(s.get(f, np.array([STRATEGY_DEFAULTS[f]])))
                tried = f"; the search tries {f} = " + ", ".join(
                    names[int(v)] if names else str(int(v)) for v in values
                )
            raise ConfigError(
                f"no valid configuration meets --where {where if asked is None else asked!r} (of {s['tp'].size:,} valid{tried})",
                fix="loosen --where (sp=0 is searched with --set sequence_parallel=false)",
            )
        s = {k: v[keep] for k, v in s.items()}
    # rank on the three results the ranking needs, then evaluate the chosen rows in full (a
    # configuration's results do not depend on the others evaluated with it)
    r = evaluate(job, s, keys=("fits", "step_s", "total_gb"))
    fitting = int(np.count_nonzero(r["fits"]))
    # the fastest that fit, those leaving the memory margin free first; when none fits, the ones
    # closest to fitting (least memory per device)
    tight = r["total_gb"] * 1e9 > job.capacity_bytes * (1.0 - job.memory_margin)
    key = np.where(r["fits"], r["step_s"] + np.where(tight, TIGHT_PENALTY_S, 0.0), np.inf) if fitting else r["total_gb"]
    if distinct:  # the first (fastest) row of each layout, in ranking order
        order = np.argsort(key, kind="stable")
        _, first = np.unique(_layout_key({k: s[k][order] for k in LAYOUT}), return_index=True)
        order = order[np.sort(first)][:top]
    else:
        order = smallest(key, top)
    chosen = {k: v[order] for k, v in s.items()}
    return Plan(chosen, evaluate(job, chosen), int(s["tp"].size), fitting)


def smallest(key: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` smallest keys in ascending order, ties by index: what
    ``np.argsort(key, kind="stable")[:k]`` gives, without sorting all of ``key``."""
    if k <= 0:
        return np.zeros(0, dtype=np.intp)
    if k >= key.size:
        return np.argsort(key, kind="stable")
    kth = np.partition(key, k - 1)[k - 1]
    if np.isnan(kth):  # fewer than k numbers: argsort puts the NaNs last
        return np.argsort(key, kind="stable")[:k]
    idx = np.flatnonzero(key <= kth)  # every tie of the k-th key, in index order
    return idx[np.argsort(key[idx], kind="stable")][:k]
