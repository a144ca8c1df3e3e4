"""Frozen result types of the cluster view: collective instances matched across ranks, stragglers, the
rank x step matrix, message sizes, findings, critical paths. Times are integer ns on aligned clocks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..extra import ExtraResult
from .critical_path import StepPath


@dataclass(frozen=True)
class RankTiming:
    start_ns: int  # aligned
    dur_ns: int
    wait_ns: int
    transfer_ns: int
    index: int = -1  # the instance's position in this rank's CommEvents


@dataclass(frozen=True)
class Instance:
    group: str
    seq: int
    type: str
    bytes: int  # -1 unknown
    step: int
    skew_ns: int
    transfer_ns: int
    last_rank: int
    ranks: dict[int, RankTiming]
    algbw_gbps: float | None
    busbw_gbps: float | None
    peak_gbps: float | None
    link: str  # intra | inter | unknown
    members: tuple[int, ...] | None = None  # the group's global ranks, when recorded


@dataclass(frozen=True)
class Straggler:
    rank: int
    score: float
    cause: str
    z_compute: float
    z_dataloader: float
    z_arrival: float
    excess_ns: int  # of the cause's metric over the median, per step
    what_if_saving_ns: int  # mean per step, if this rank ran like the median
    is_straggler: bool


@dataclass(frozen=True)
class RankStepRow:
    rank: int
    step: int
    step_ns: int
    compute_ns: int
    exposed_comm_ns: int
    sync_wait_ns: int
    dataloader_ns: int
    idle_ns: int


@dataclass(frozen=True)
class SizeBin:
    label: str
    count: int
    time_ns: int  # summed transfer time


@dataclass(frozen=True, kw_only=True)
class StragglerFinding:
    """A rank over the straggler threshold, and what the step would save if it ran like the median rank."""

    rank: int
    cause: str  # Straggler.cause
    score: float
    excess_ns: int  # per step, of the cause's figure over the median
    saving_ns: int  # per step, the what-if saving


@dataclass(frozen=True, kw_only=True)
class SmallMessagesFinding:
    """Most collectives move small messages: latency-bound."""

    small: int  # instances under threshold_bytes
    total: int  # instances matched
    threshold_bytes: int


@dataclass(frozen=True, kw_only=True)
class LowBandwidthFinding:
    """Collectives of at least ``min_bytes`` reaching under ``ratio`` of their link's bus bandwidth."""

    count: int
    min_bytes: int
    ratio: float
    median_busbw_gbps: float  # of those collectives


@dataclass(frozen=True, kw_only=True)
class SyncWaitFinding:
    """Time the ranks waited in collectives for the last to arrive, and the transfer time, summed over ranks."""

    wait_ns: int
    transfer_ns: int


@dataclass(frozen=True, kw_only=True)
class AllToAllImbalanceFinding:
    """All-to-all instances whose busiest member receives at least ``ratio_threshold`` x the mean
    (from the recorded ``In split size`` of every member)."""

    instances: int  # imbalanced instances
    total: int  # all-to-all instances with splits recorded on every member
    median_ratio: float  # over the imbalanced instances: busiest member's bytes / the mean
    busiest_rank: int  # the member (global rank) most often the busiest
    transfer_ns: float  # the imbalanced instances' transfer time per steady step, median rank
    ratio_threshold: float


Finding = StragglerFinding | SmallMessagesFinding | LowBandwidthFinding | SyncWaitFinding | AllToAllImbalanceFinding


@dataclass(frozen=True, kw_only=True)
class CommMatrix:
    """Bytes each rank sent to each other rank, for one collective type (``tables.comm_matrix``)."""

    ranks: tuple[int, ...]  # row and column order
    bytes: tuple[tuple[int, ...], ...]  # [sender][receiver]
    instances: int
    assumption: str  # where peers and splits came from


@dataclass(frozen=True)
class ClusterView:
    ranks: int
    clock_offsets_ns: dict[int, int]
    collectives: tuple[Instance, ...]
    stragglers: tuple[Straggler, ...]  # worst first; every rank, ``is_straggler`` marks those over the threshold
    matrix: tuple[RankStepRow, ...]
    size_histogram: tuple[SizeBin, ...]
    findings: tuple[Finding, ...]
    threshold: float
    unmatched_instances: int
    critical_paths: tuple[StepPath, ...] = ()
    comm_matrix: dict[str, CommMatrix] = field(default_factory=dict)  # by collective type
    extras: Mapping[str, ExtraResult | None] = field(default_factory=dict)  # other registered cluster analyses
