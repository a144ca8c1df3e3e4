"""Strategy space: every valid (tp, pp, vpp, dp, cp, ep, etp, zero, hsdp, sched, mb, recompute,
offload), built and filtered as numpy arrays (no Python loop per configuration), then evaluated by
:mod:`cost` in one pass."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..catalog.hardware import Hardware, by_name
from ..catalog.model_flops import ModelShape
from ..catalog.models import resolve
from ..errors import ConfigError
from .cost import RECOMPUTE, SCHEDULES, TP_OVERLAP, Job, evaluate
from .job import DUALPIPE, DUALPIPEV, MLA_POLICIES, divisors, dualpipe_micro_batches_ok, tp_overlap_needs_sp

FIELDS = (
    "tp",
    "sp",
    "pp",
    "vpp",
    "dp",
    "cp",
    "ep",
    "etp",
    "zero",
    "hsdp",
    "sched",
    "mb",
    "ga",
    "recompute",
    "offload",
    "offload_layers",
    "tp_overlap",
    "ep_overlap",
    "keep_params",
)


def hardware(name: str, user_file: str | None = None) -> Hardware:
    """A catalog device by name or alias (analysis.hardware.by_name); ``user_file``: a YAML of your
    own devices (the layout of data/hardware.yaml), which win over the catalog on name."""
    return by_name(name, user_file)


def model(name_or_path: str) -> ModelShape:
    """A model by catalog name, config.json or model directory (analysis.models.resolve)."""
    return resolve(name_or_path)


def _pow2_upto(n: int) -> list[int]:
    out, v = [], 1
    while v <= n:
        out.append(v)
        v *= 2
    return out


CP_MIN_TOKENS = 1024  # the search's context parallelism beyond 8 keeps at least this many tokens a rank
SEARCHED_SCHEDULES = (0, 1, 2)  # 1f1b (interleaved with vpp > 1), zb-h1, zb-v; the others when --where names them


def space(
    job: Job,
    tp_overlap: int = 0,
    tp_across_nodes: bool = False,
    ep_overlap: bool = False,
    sequence_parallel: bool = True,
    schedules: tuple[int, ...] = SEARCHED_SCHEDULES,
) -> dict[str, np.ndarray]:
    """All valid strategies as arrays. Constraints: tp | heads and tp <= devices per node; pp <=
    layers (stages may be uneven), layers % (pp*vpp) == 0 when interleaved; cp a power of two up to 8,
    or up to seq / CP_MIN_TOKENS for long sequences; dp = devices /
    (tp*pp*cp) integer; ep | experts and ep | dp; expert-TP etp in {1, tp} (MoE only); global
    batch % (dp*mb) == 0 (with pp > 1 and fewer micro-batches than stages, ga states them: run as
    they are); vpp > 1 only with pp > 1 and micro-batches % pp == 0; zero-bubble
    schedules only with pp > 1, ZB-V only with vpp = 2; seq % cp == 0; ZeRO > 0 only with dp > 1;
    HSDP shard groups (powers of 2 < dp) only with ZeRO-3; activation offload on or off; with
    ZeRO-3, weights resharded after forward or kept. ``tp_overlap`` (a ``cost.TP_OVERLAP`` code)
    / ``ep_overlap``: how the framework overlaps TP communication with GEMMs / the EP
    all-to-all with another micro-batch (properties of the framework, not searched); ``tp_across_nodes`` lifts the default limit of TP to one node;
    ``sequence_parallel`` False: TP without sequence parallelism (the framework has none, or it is
    off), which only costs memory and elementwise time, so the search does not try both.
    ``schedules``: the SCHEDULES codes to try; AFAB only with pp > 1 and no vpp, DualPipe with an
    even pp and no vpp, DualPipeV with vpp = 2, both with an even number of micro-batches, at least
    2 x pp."""
    m = job.model
    tp_max = job.devices if tp_across_nodes else min(job.devices_per_node, job.devices)
    # any divisor, not only powers of two (TP 12, PP 6 or 35 are real configurations); pipeline
    # stages may be uneven (the cost model paces the pipeline by the most loaded stage)
    tps = [t for t in divisors(m.n_heads) if t <= tp_max and job.devices % t == 0]
    pps = [p for p in divisors(job.devices) if p <= m.n_layers]
    # context parallelism up to 8, and beyond while each rank keeps at least CP_MIN_TOKENS of the
    # sequence (Llama 3 405B trained 128K with CP 16: 8K tokens a rank)
    cps = [c for c in _pow2_upto(max(8, job.seq_len // CP_MIN_TOKENS)) if job.seq_len % c == 0 and c <= job.devices]
    eps = [e for e in _pow2_upto(max(m.n_experts, 1)) if (m.n_experts % e == 0 if m.n_experts else e == 1)]
    # the product is built one field at a time and filtered as soon as a constraint can be checked,
    # so the arrays never hold the (much larger) unfiltered grid
    g = _cross({}, "tp", tps)
    g = _cross(g, "pp", pps)
    g = _cross(g, "cp", cps)
    model_par = g["tp"] * g["pp"] * g["cp"]
    g = _keep(g, job.devices % model_par == 0)
    g["dp"] = job.devices // (g["tp"] * g["pp"] * g["cp"])
    # model chunks per stage: every count that splits the stage evenly, down to one layer per chunk
    # (NVIDIA's published recipes run 5, 6, 8, 10, 20 and 24: benchmarks/holdout)
    g = _cross(g, "vpp", divisors(m.n_layers))
    # (dropped here rather than after the later crosses: without a pipeline there is nothing to interleave)
    g = _keep(g, (g["vpp"] == 1) | ((g["pp"] > 1) & (m.n_layers % (g["pp"] * g["vpp"]) == 0)))
    g = _cross(g, "ep", eps)
    g = _keep(g, (g["dp"] % g["ep"] == 0) & (g["ep"] <= g["dp"]))
    g = _cross(g, "etp", [0, 1] if m.n_experts else [0])  # 0 = same as tp
    g = _keep(g, (g["etp"] == 0) | (g["tp"] > 1))
    g = _cross(g, "mb", [1, 2, 4, 8])
    g = _keep(g, job.global_batch % (g["dp"] * g["mb"]) == 0)
    n_micro = job.global_batch // (g["dp"] * g["mb"])
    g = _keep(g, (g["vpp"] == 1) | ((g["pp"] > 1) & (n_micro % g["pp"] == 0)))
    g = _cross(g, "sched", list(schedules))
    n_micro = job.global_batch // (g["dp"] * g["mb"])
    sched, pp, vpp = g["sched"], g["pp"], g["vpp"]
    dual_ok = dualpipe_micro_batches_ok(n_micro, pp)
    g = _keep(
        g,
        (sched == 0)
        | (
            (pp > 1)
            & (
                (sched == 1)
                | ((sched == 2) & (vpp == 2))
                | ((sched == 3) & (vpp == 1))
                | ((sched == DUALPIPE) & (vpp == 1) & (pp % 2 == 0) & dual_ok)
                | ((sched == DUALPIPEV) & (vpp == 2) & dual_ok)
            )
        ),
    )
    g = _cross(g, "zero", [0, 1, 2, 3])
    g = _keep(g, (g["zero"] == 0) | (g["dp"] > 1))  # ZeRO stages are the same thing without data parallelism
    g = _cross(g, "hsdp", [0] + _pow2_upto(max(job.devices // 2, 1))[1:])
    g = _keep(
        g, (g["hsdp"] == 0) | ((g["zero"] == 3) & (g["hsdp"] < g["dp"]) & (g["dp"] % np.maximum(g["hsdp"], 1) == 0))
    )
    g = _cross(g, "recompute", recompute_policies(m))
    g = _cross(g, "offload", [0, 1])
    g = _cross(g, "keep_params", [0, 1])
    g = _keep(g, (g["keep_params"] == 0) | (g["zero"] == 3))
    # gradient accumulation as the batch gives it; a pipeline with fewer micro-batches than stages
    # runs them as they are (stated ga: larger bubble) rather than being re-split into fractions
    n_micro = job.global_batch // (g["dp"] * g["mb"])
    g["ga"] = np.where((g["pp"] > 1) & (n_micro < g["pp"]), n_micro, 0).astype(np.int64)
    g["sp"] = np.full(g["tp"].shape, int(sequence_parallel), dtype=np.int64)
    g["offload_layers"] = np.zeros(
        g["tp"].shape, dtype=np.int64
    )  # offload takes every layer (partial offload: --evaluate)
    g["tp_overlap"] = np.full(g["tp"].shape, int(tp_overlap), dtype=np.int64)
    g["ep_overlap"] = np.full(g["tp"].shape, int(ep_overlap), dtype=np.int64)
    return {k: g[k] for k in FIELDS}


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


def _flag(v: str, part: str) -> int:
    if v in ("1", "true", "yes", "on"):
        return 1
    if v in ("0", "false", "no", "off"):
        return 0
    raise ConfigError(f"strategy value {part!r} is not on/off", fix="use 0/1 or true/false")


STRATEGY_DEFAULTS: dict[str, int] = {
    "tp": 1,
    "sp": 1,
    "pp": 1,
    "vpp": 1,
    "dp": 1,
    "cp": 1,
    "ep": 1,
    "etp": 0,
    "zero": 0,
    "hsdp": 0,
    "sched": 0,
    "mb": 1,
    "ga": 0,
    "recompute": 0,
    "offload": 0,
    "offload_layers": 0,
    "tp_overlap": 0,
    "ep_overlap": 0,
    "keep_params": 0,
}
KEY_ALIASES = {
    "fsdp": "zero",
    "zero_stage": "zero",
    "micro_batch": "mb",
    "grad_accum": "ga",
    "gas": "ga",
    "remat": "recompute",
    "schedule": "sched",
    "expert_tp": "etp",
    "shard_group": "hsdp",
    "async_tp": "tp_overlap",
    "tp_comm_overlap": "tp_overlap",
    "reshard_after_forward": "reshard",
    "sequence_parallel": "sp",
    "cpu_offloading_num_layers": "offload_layers",
}


def parse_value(key: str, value: str, part: str) -> tuple[str, int]:
    """One ``key=value`` item as (strategy field, its code): names for recompute policies,
    schedules and TP overlap mechanisms, true/false for flags, integers otherwise; aliases
    (KEY_ALIASES) resolved, FSDP2's ``reshard_after_forward`` as the opposite of keep_params."""
    k = KEY_ALIASES.get(key, key)
    if k not in STRATEGY_DEFAULTS and k != "reshard":
        raise ConfigError(f"unknown strategy key {k!r}", fix=f"keys: {', '.join(FIELDS)}")
    if k == "recompute":
        value = "_".join(
            value.replace("-", " ").split()
        )  # "save out_proj", "save-dot-except-mlp": the policies' written names
        value = {"layernorm": "layernorm_moe_act"}.get(
            value, value
        )  # --recompute-modules layernorm: the same on a dense model
        if value not in RECOMPUTE:
            raise ConfigError(f"recompute must be one of {RECOMPUTE}", fix="e.g. recompute=selective")
        return k, RECOMPUTE.index(value)
    if k == "sched":
        v = {
            "interleaved": "1f1b",
            "zbh1": "zb-h1",
            "zbv": "zb-v",
            "zero-bubble": "zb-h1",
            "gpipe": "afab",
            "dualpipe-v": "dualpipev",
            "dualpipe_v": "dualpipev",
        }.get(value, value)
        if v not in SCHEDULES:
            raise ConfigError(f"sched must be one of {SCHEDULES}", fix="e.g. sched=zb-h1")
        return k, SCHEDULES.index(v)
    if k == "reshard":  # FSDP2's name, the opposite of keep_params
        return "keep_params", 1 - _flag(value, part)
    if k == "tp_overlap" and value in TP_OVERLAP:
        return k, TP_OVERLAP.index(value)
    if k in ("offload", "tp_overlap", "ep_overlap", "keep_params", "sp"):
        return k, _flag(value, part)
    try:
        return k, int(value)
    except ValueError:
        raise ConfigError(f"strategy value {part!r} is not an integer", fix="e.g. tp=8") from None


def parse_strategy(text: str) -> dict[str, np.ndarray]:
    """``"tp=8,pp=8,dp=16,vpp=2,mb=1,recompute=selective"`` -> one-element arrays. Missing keys: 1,
    recompute none, zero 0, etp = tp, hsdp off (0), sched 1f1b, offload 0, tp_overlap 0, ep_overlap 0,
    keep_params 0 (``reshard_after_forward=false`` is the same as keep_params=1), ga 0 (gradient
    accumulation derived from the batch: global batch / (dp x mb), at least pp micro-batches under
    a pipeline; ga=N runs exactly N micro-batches of global batch / (dp x N) sequences, fewer than
    pp too, as a framework does when told so). ``sched`` takes a
    name (1f1b, zb-h1, zb-v; afab = gpipe, dualpipe and dualpipev are searched only when --where names
    them: AFAB only adds memory, and few frameworks run the DualPipes: DeepSeek's own, PyTorch's
    ScheduleDualPipeV); ``tp_overlap`` a mechanism name (none, full, bwd, bwd+shard) or 0/1
    (true = full); ``offload``, ``ep_overlap``, ``keep_params`` 0/1 or true/false; ``sp`` (sequence
    parallelism with TP, default on) 0/1; ``offload_layers=N`` (Megatron's
    ``--cpu-offloading-num-layers``) offloads N layers of each stage instead of all of them (0)."""
    vals: dict[str, Any] = dict(STRATEGY_DEFAULTS)
    given: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise ConfigError(f"bad strategy item {part!r}", fix="use key=value pairs, e.g. tp=8,pp=2,dp=4")
        k, v = (x.strip().lower() for x in part.split("=", 1))
        field, code = parse_value(k, v, part)
        if field in given:  # the last one used to win without a word
            raise ConfigError(f"the strategy sets {field} twice ({given[field]}, {part})", fix="keep one of them")
        if code > 2**31:
            raise ConfigError(f"strategy {part} is beyond any device count", fix=f"e.g. {k}=8")
        given[field] = part
        vals[field] = code
    for k in ("tp", "pp", "vpp", "dp", "cp", "ep", "mb"):
        if vals[k] < 1:
            raise ConfigError(f"strategy {k}={vals[k]} must be at least 1", fix=f"e.g. {k}=1")
    if vals["offload_layers"] < 0:
        raise ConfigError(
            f"strategy offload_layers={vals['offload_layers']} is negative",
            fix="give the layers of each stage to offload, or 0 (with offload=1) for all of them",
        )
    if vals["offload_layers"] > 0:
        vals["offload"] = 1  # offloading some layers is offloading
    for k in ("etp", "hsdp", "ga"):
        if vals[k] < 0:
            raise ConfigError(
                f"strategy {k}={vals[k]} must be 0 (derived) or positive", fix=f"drop {k} or give a positive value"
            )
    if vals["zero"] not in (0, 1, 2, 3):
        raise ConfigError(f"zero={vals['zero']} is not a ZeRO stage", fix="zero=0, 1, 2 or 3 (3 = FSDP)")
    if vals["sched"] == SCHEDULES.index("afab") and vals["vpp"] != 1:
        raise ConfigError("AFAB (GPipe) runs one model chunk per stage", fix="drop vpp or use sched=1f1b (interleaved)")
    if vals["sched"] == SCHEDULES.index("zb-v") and vals["vpp"] != 2:
        raise ConfigError("ZB-V needs two model chunks per stage", fix="add vpp=2 with sched=zb-v")
    if vals["sched"] == SCHEDULES.index("dualpipe") and (vals["vpp"] != 1 or vals["pp"] % 2):
        raise ConfigError(
            "DualPipe runs one stage per rank in each direction over an even number of ranks",
            fix="use an even pp without vpp, or sched=dualpipev with vpp=2",
        )
    if vals["sched"] == SCHEDULES.index("dualpipev") and vals["vpp"] != 2:
        raise ConfigError("DualPipeV needs two model chunks per stage", fix="add vpp=2 with sched=dualpipev")
    if vals["keep_params"] and vals["zero"] != 3:
        raise ConfigError(
            "keeping gathered weights (reshard_after_forward=false) applies to ZeRO-3 / FSDP", fix="add zero=3"
        )
    if tp_overlap_needs_sp(vals["tp_overlap"]) and not vals["sp"]:
        raise ConfigError(
            f"TP/GEMM overlap {TP_OVERLAP[vals['tp_overlap']]} (it splits all-gathers and reduce-scatters) needs sequence parallelism",
            fix="drop sp=0, or use tp_overlap=bwd (the backward all-reduce under the weight-gradient GEMM)",
        )
    if vals["hsdp"] and vals["zero"] != 3:
        raise ConfigError("hsdp (shard group size) applies to ZeRO-3 / FSDP", fix="add zero=3")
    return {k: np.array([v]) for k, v in vals.items()}


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
    tp_overlap: int = 0,
    tp_across_nodes: bool = False,
    ep_overlap: bool = False,
    sequence_parallel: bool = True,
    where: str = "",
    distinct: bool = False,
) -> Plan:
    """The ``top`` fastest configurations that fit (``where``: constraints, planner/where.py;
    ``distinct``: only the fastest of each LAYOUT, so the rows are alternatives, not variants)."""
    conditions = []
    if where:
        from .where import mask, parse_where

        conditions = parse_where(where)
    # schedules the search leaves out (AFAB, the DualPipes) are tried when --where names them
    named = {v for c in conditions if c.field == "sched" and c.op == "in" for v in c.values}
    s = space(
        job, tp_overlap, tp_across_nodes, ep_overlap, sequence_parallel, tuple(sorted(set(SEARCHED_SCHEDULES) | named))
    )
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
                f"no valid configuration meets --where {where!r} (of {s['tp'].size:,} valid{tried})",
                fix="loosen --where (sp=0 is searched with --no-sequence-parallel)",
            )
        s = {k: v[keep] for k, v in s.items()}
    # rank on the three results the ranking needs, then evaluate the chosen rows in full (a
    # configuration's results do not depend on the others evaluated with it)
    r = evaluate(job, s, keys=("fits", "step_s", "total_gb"))
    fitting = int(np.count_nonzero(r["fits"]))
    # the fastest that fit; when none does, the ones closest to fitting (least memory per device)
    key = np.where(r["fits"], r["step_s"], np.inf) if fitting else r["total_gb"]
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
