"""One rank's analysis: its context, then every registered analysis in order (``registry.py``)."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

from ..notices import Notice
from . import registry
from .classify import Rules
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
