"""One rank's analysis: its context, then every registered analysis in order (``registry.py``)."""

from __future__ import annotations

import dataclasses

from ..notices import Notice
from . import registry
from .classify import Rules
from .config import AnalyzeConfig
from .context import RankContext, RankInput, build_context
from .results import RankAnalysis

_IDENTITY = ("rank", "device", "path", "step_source", "extras")
_BUILT_IN = frozenset(f.name for f in dataclasses.fields(RankAnalysis)) - set(_IDENTITY)


def analyze_rank(unit: RankInput, cfg: AnalyzeConfig, rules: Rules) -> tuple[RankAnalysis, list[Notice]]:
    ctx, notices = build_context(unit, cfg, rules)
    return run_analyses(ctx), notices


def run_analyses(ctx: RankContext) -> RankAnalysis:
    """Each entry of ``registry.RANK_ANALYSES`` that applies, in order, each seeing the results before it."""
    steps = ((e.name, e.compute) for e in registry.RANK_ANALYSES if e.applies(ctx))
    built, extras = registry.run_registered(steps, ctx, _BUILT_IN)
    return RankAnalysis(
        rank=ctx.info.rank,
        device=ctx.info.device_name,
        path=ctx.info.path,
        step_source=ctx.spans.source,
        extras=extras,
        **built,
    )
