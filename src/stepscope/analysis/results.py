"""Frozen result types of one rank and of the whole analysis. Units are in the names: ``_ns`` integer nanoseconds,
``_ratio`` 0-1. Renderers read these; they never recompute them."""

from __future__ import annotations

from dataclasses import dataclass, field

from .roofline.mfu_diagnosis import MfuDiagnosis
from .roofline.phases import StepPhases
from .roofline.roofline import Roofline
from .roofline.scopes import ScopeStat
from .steps.results import CollectiveTime, LaunchStats, OpStat, StepBreakdown, StepStats, StreamIdle


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
    extras: dict[str, object] = field(default_factory=dict)
    comm_events: object | None = (
        None  # comm_events.CommEvents: this rank's collective instances (input of the cluster view)
    )


@dataclass(frozen=True)
class Analysis:
    ranks: tuple[RankAnalysis, ...]
    warnings: tuple[str, ...]
    inputs: tuple[str, ...]
    cluster: object | None = None  # cluster.ClusterView when there are 2+ ranks
