"""Frozen result types of one rank and of the whole analysis. Units are in the names: ``_ns`` integer
nanoseconds, ``_ratio`` 0-1. Renderers read these; they never recompute them.

The named fields of :class:`RankAnalysis` are the built-in analyses of ``registry.RANK_ANALYSES``, filled
by name; an analysis registered under any other name lands in ``extras`` under that name, and the JSON
report serializes it as it is (``dataclasses.asdict``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from ..advisor.finding import Finding
from ..notices import Notice, collapse
from .cluster.comm_events import CommEvents
from .cluster.results import ClusterView
from .extra import ExtraResult
from .roofline.mfu_diagnosis import MfuDiagnosis
from .roofline.phases import StepPhases
from .roofline.results import Roofline
from .roofline.scopes import ScopeStat
from .steps.results import CollectiveTime, LaunchStats, OpStat, StepBreakdown, StepStats, StreamIdle
from .summary import RunSummary, summarize

__all__ = ["Analysis", "ExtraResult", "RankAnalysis"]


@dataclass(frozen=True)
class RankAnalysis:
    rank: int
    device: str | None
    path: str
    step_source: str  # "ProfilerStep" | "marker:<name>" | "whole-trace"
    steps: tuple[StepBreakdown, ...]
    step_stats: StepStats
    top_kernels: tuple[OpStat, ...]
    top_cpu_ops: tuple[OpStat, ...]
    stream_idle: tuple[StreamIdle, ...]
    launch: LaunchStats
    collectives: tuple[CollectiveTime, ...] = ()  # per collective type, summed over the steps
    roofline: Roofline | None = None
    phases: tuple[StepPhases, ...] = ()  # per step, same order as ``steps``
    mfu_diagnosis: MfuDiagnosis | None = None
    scopes: tuple[ScopeStat, ...] = ()  # by module / annotation, most kernel time first
    extras: Mapping[str, ExtraResult | None] = field(default_factory=dict)  # by analysis name, registry order
    comm_events: CommEvents | None = None  # this rank's collective instances (input of the cluster view)


@dataclass(frozen=True)
class Analysis:
    ranks: tuple[RankAnalysis, ...]
    notices: tuple[Notice, ...]  # of the inputs and the ranks, in order, each once
    inputs: tuple[str, ...]
    cluster: ClusterView | None = None  # 2+ ranks
    findings: tuple[Finding, ...] = ()  # the advisor's (``advisor/engine.py``), largest saving first

    @property
    def warnings(self) -> tuple[str, ...]:
        """The notices as text, one line per distinct per-rank notice (``notices.collapse``)."""
        return collapse(self.notices)

    @cached_property
    def summary(self) -> RunSummary:
        """Per-rank totals, means and median MFU (``summary.summarize``), computed on first use and kept."""
        return summarize(self)
