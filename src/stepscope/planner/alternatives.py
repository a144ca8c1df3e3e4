"""When a configuration does not fit: the fastest ones that do and differ from it in the memory
knobs only (recompute policy, ZeRO stage, micro-batch size, activation offload, FSDP weights kept
between forward and backward), one knob changed, else two. What a performance engineer tries first
after an out-of-memory, with the step time each costs. The layout (TP, PP, DP, CP, EP) stays."""

from __future__ import annotations

from itertools import combinations, product
from typing import Any

import numpy as np

from .cost import evaluate
from .job import Job
from .recompute import RECOMPUTE
from .records import records
from .search import recompute_policies

KNOBS = ("recompute", "zero", "mb", "offload", "keep_params")


def _options(base: dict[str, int], policies: tuple[int, ...], zero_stages: tuple[int, ...]) -> dict[str, list[int]]:
    """Each knob's values other than the base's that keep the strategy valid."""
    opts: dict[str, list[int]] = {"recompute": [p for p in policies if p != base["recompute"]]}
    # ZeRO shards over the dp x cp replicas: higher stages only where there are several
    opts["zero"] = (
        [z for z in zero_stages if z > base["zero"]] if base["dp"] * base["cp"] > 1 and not base["hsdp"] else []
    )
    # smaller micro-batches that divide the given one (the batch still splits evenly); a stated ga fixes them
    opts["mb"] = [m for m in range(1, base["mb"]) if base["mb"] % m == 0] if not base["ga"] else []
    opts["offload"] = [1] if not base["offload"] else []
    opts["keep_params"] = [0] if base["keep_params"] else []
    return opts


def fitting_alternatives(
    job: Job,
    s: dict[str, np.ndarray],
    *,
    policies: tuple[str, ...] | None = None,
    zero_stages: tuple[int, ...] = (),
    top: int = 3,
) -> list[dict[str, Any]]:
    """Up to ``top`` configurations that fit, fastest first, each ``{"change", "strategy",
    "step_time_s", "step_change", "memory_gb"}`` (step_change: relative to the given one); one knob
    changed if any such fits, else two; empty when neither does. ``policies``: the recompute
    policies the framework has (RECOMPUTE names), default all; ``zero_stages``: its ZeRO stages
    (frameworks.Framework.zero), default all."""
    base = {k: int(v[0]) for k, v in s.items()}
    runnable = recompute_policies(job.model)
    allowed = tuple(k for k in (RECOMPUTE.index(p) for p in policies) if k in runnable) if policies else tuple(runnable)
    opts = _options(base, allowed, zero_stages or (1, 2, 3))
    dense = not job.model.n_experts
    given = records(s, evaluate(job, s), dense=dense)[0]
    base_step = given["step_time_s"]
    for n_knobs in (1, 2):
        variants = [
            {**base, **dict(zip(knobs, values, strict=True))}
            for knobs in combinations(KNOBS, n_knobs)
            for values in product(*(opts[k] for k in knobs))
        ]
        if not variants:
            continue
        arrays = {k: np.array([v[k] for v in variants], dtype=np.int64) for k in base}
        res = evaluate(job, arrays)
        fit = np.flatnonzero(res["fits"])
        if not fit.size:
            continue
        order = fit[np.argsort(res["step_s"][fit], kind="stable")][:top]
        recs = records({k: v[order] for k, v in arrays.items()}, {k: v[order] for k, v in res.items()}, dense=dense)
        return [
            {
                "change": ",".join(
                    f"{k}={r['strategy'][k]}" for k in KNOBS if r["strategy"][k] != given["strategy"][k]
                ),
                "strategy": r["strategy"],
                "step_time_s": r["step_time_s"],
                "step_change": r["step_time_s"] / base_step - 1,
                "memory_gb": r["memory_gb"]["total"],
            }
            for r in recs
        ]
    return []


def alternatives_line(alts: list[dict[str, Any]]) -> str:
    """The line under a configuration that does not fit."""
    if not alts:
        return (
            "fits with: no change of recompute, ZeRO stage, micro-batch, offload or kept weights (one or two of them); "
            "the layout needs more model parallelism (TP, PP, CP, EP) or more devices"
        )
    return "fits with: " + "; ".join(
        f"{a['change']} (step {a['step_change']:+.1%}, {a['memory_gb']:,.1f} GB)" for a in alts
    )
