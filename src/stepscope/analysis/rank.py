"""One rank's analysis: its context, then every registered analysis in order (``registry.py``)."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

import numpy as np

from ..notices import Notice
from . import registry
from .classify import Rules
from .cluster.comm_events import CommEvents
from .config import AnalyzeConfig
from .context import RankContext, RankInput, build_context
from .extra import is_extra
from .results import RankAnalysis

_IDENTITY = ("rank", "device", "path", "step_source", "extras")
_BUILT_IN = frozenset(f.name for f in dataclasses.fields(RankAnalysis)) - set(_IDENTITY)


def analyze_rank(unit: RankInput, cfg: AnalyzeConfig, rules: Rules) -> tuple[RankAnalysis, list[Notice]]:
    ctx, notices = build_context(unit, cfg, rules)
    return run_analyses(ctx), notices


def run_analyses(ctx: RankContext) -> RankAnalysis:
    """Each entry of ``registry.RANK_ANALYSES`` that applies, in order, each seeing the results before it."""
    done: dict[str, Any] = {}  # each registered analysis's own result type
    for entry in registry.RANK_ANALYSES:
        if entry.applies(ctx):
            done[entry.name] = entry.compute(dataclasses.replace(ctx, earlier=MappingProxyType(dict(done))))
    missing = _BUILT_IN - done.keys()
    if missing:
        raise LookupError(f"no analysis registered for RankAnalysis field(s) {sorted(missing)}")
    extras = {}
    for name, value in done.items():
        if name in _BUILT_IN:
            continue
        if not is_extra(value):
            raise TypeError(f"analysis {name!r} returned {type(value).__name__}, not a dataclass instance or None")
        extras[name] = value
    return RankAnalysis(
        rank=ctx.info.rank,
        device=ctx.info.device_name,
        path=ctx.info.path,
        step_source=ctx.spans.source,
        extras=extras,
        **{k: v for k, v in done.items() if k in _BUILT_IN},
    )


# CommEvents fields with one entry per collective instance
_PER_INSTANCE = (
    "group",
    "ctype",
    "seq",
    "start_ns",
    "dur_ns",
    "bytes",
    "group_size",
    "before",
    "members",
    "in_split",
    "dev_index",
)


def _steady_events(ev: CommEvents, k: int) -> CommEvents:
    """The instances from the first steady step's window on (step indices shifted down by ``k``)."""
    ws, we = ev.step_windows
    t0 = int(ws[k]) if k < ws.size else np.iinfo(np.int64).max
    keep = (ev.step >= k) | ((ev.step < 0) & (ev.start_ns >= t0))
    changes: dict[str, Any] = {f: v[keep] for f in _PER_INSTANCE if (v := getattr(ev, f)) is not None}
    changes["step"] = np.where(ev.step[keep] >= 0, ev.step[keep] - k, -1)
    changes["step_windows"] = (ws[k:], we[k:])
    if ev.tail is not None:
        changes["tail"] = ev.tail[k:]
    return dataclasses.replace(ev, **changes)


def steady_view(r: RankAnalysis) -> RankAnalysis:
    """The rank as the cluster view sees it: without its leading warm-up steps (``steps/warmup.py``),
    their collective instances and those before them; later steps renumbered from 0."""
    k = sum(1 for s in r.steps if s.warmup)  # warm-up steps are a prefix
    if k == 0:
        return r
    ev = r.comm_events
    return dataclasses.replace(r, steps=r.steps[k:], comm_events=_steady_events(ev, k) if ev is not None else None)
