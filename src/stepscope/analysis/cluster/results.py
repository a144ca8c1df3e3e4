"""Frozen result types of the cluster view: collective instances matched across ranks, stragglers, the
rank x step matrix, message sizes, findings, critical paths. Times are integer ns on aligned clocks."""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class ClusterView:
    ranks: int
    clock_offsets_ns: dict[int, int]
    collectives: tuple[Instance, ...]
    stragglers: tuple[Straggler, ...]  # worst first; every rank, ``is_straggler`` marks those over the threshold
    matrix: tuple[RankStepRow, ...]
    size_histogram: tuple[SizeBin, ...]
    findings: tuple[str, ...]
    threshold: float
    unmatched_instances: int
    critical_paths: tuple[StepPath, ...] = ()
    comm_matrix: dict[str, dict[str, object]] = field(default_factory=dict)
    notes: tuple[str, ...] = field(default_factory=tuple)
