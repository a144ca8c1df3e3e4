"""Run summary: the per-rank aggregates the renderers show, computed once here so that no renderer
computes. Every figure is over the rank's steady steps (``RankAnalysis.steps`` without the
warm-up steps, ``steps/warmup.py``; ``warmup_steps`` says how many were left out):

- ``total_X_ns = sum over steps of X`` (integer ns), for X in step time, compute, comm,
  overlapped comm, exposed comm, exposed memcpy, idle, data loader (``cpu.dataloader_ns``), CPU
  step time, and the idle causes input wait, host-bound, sync wait and other (``idle_causes``);
- ``mean_X_ns = total_X_ns / max(steps, 1)`` (a float; 0 for a rank without steps);
- ``device_time_by_category_ns``: ``by_category_ns`` summed over steps per category, most time
  first (ties in the order the categories first appear);
- ``median_mfu_ratio`` / ``median_hfu_ratio``: the upper median of the per-step MFU / HFU of the
  roofline (element ``n // 2`` of the n sorted values, as the MFU diagnosis uses), over the steady
  steps that have one; ``None`` when no step has one.

It reads only ``rank``, ``steps`` and ``roofline`` of each rank (the ``RankData`` protocol), so a
result type can hold its ``RunSummary`` without importing this module's callers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .roofline.results import Roofline
from .steps.results import StepBreakdown


class RankData(Protocol):
    @property
    def rank(self) -> int: ...

    @property
    def steps(self) -> tuple[StepBreakdown, ...]: ...

    @property
    def roofline(self) -> Roofline | None: ...


class RunData(Protocol):
    @property
    def ranks(self) -> Sequence[RankData]: ...


@dataclass(frozen=True, kw_only=True)
class RankSummary:
    rank: int
    steps: int  # steady steps
    warmup_steps: int
    total_step_time_ns: int
    total_compute_ns: int
    total_comm_ns: int
    total_overlapped_comm_ns: int
    total_exposed_comm_ns: int
    total_exposed_memcpy_ns: int
    total_idle_ns: int
    total_dataloader_ns: int
    total_cpu_step_ns: int
    total_input_wait_idle_ns: int
    total_host_bound_idle_ns: int
    total_sync_wait_idle_ns: int
    total_other_idle_ns: int
    mean_step_time_ns: float
    mean_compute_ns: float
    mean_exposed_comm_ns: float
    mean_exposed_memcpy_ns: float
    mean_idle_ns: float
    mean_dataloader_ns: float
    device_time_by_category_ns: tuple[tuple[str, int], ...]
    median_mfu_ratio: float | None
    median_hfu_ratio: float | None


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    ranks: tuple[RankSummary, ...]  # in the order of the analysis' ranks

    def of(self, rank: int) -> RankSummary:
        """The summary of rank number ``rank``."""
        return next(s for s in self.ranks if s.rank == rank)


def _upper_median(xs: list[float]) -> float | None:
    return sorted(xs)[len(xs) // 2] if xs else None


def summarize_rank(rank: int, all_steps: Sequence[StepBreakdown], roof: Roofline | None) -> RankSummary:
    steps = [s for s in all_steps if not s.warmup]
    n = max(len(steps), 1)
    cats: dict[str, int] = {}
    for s in steps:
        for k, v in s.by_category_ns.items():
            cats[k] = cats.get(k, 0) + v
    step = sum(s.step_time_ns for s in steps)
    compute = sum(s.compute_ns for s in steps)
    exposed_comm = sum(s.exposed_comm_ns for s in steps)
    memcpy = sum(s.exposed_memcpy_ns for s in steps)
    idle = sum(s.idle_ns for s in steps)
    loader = sum(s.cpu.dataloader_ns for s in steps)
    warm = {i for i, s in enumerate(all_steps) if s.warmup}
    flops = [f for i, f in enumerate(roof.steps) if i not in warm] if roof is not None else []
    return RankSummary(
        rank=rank,
        steps=len(steps),
        warmup_steps=len(all_steps) - len(steps),
        total_step_time_ns=step,
        total_compute_ns=compute,
        total_comm_ns=sum(s.comm_ns for s in steps),
        total_overlapped_comm_ns=sum(s.overlapped_comm_ns for s in steps),
        total_exposed_comm_ns=exposed_comm,
        total_exposed_memcpy_ns=memcpy,
        total_idle_ns=idle,
        total_dataloader_ns=loader,
        total_cpu_step_ns=sum(s.cpu_step_ns for s in steps),
        total_input_wait_idle_ns=sum(s.idle_causes.input_wait_ns for s in steps),
        total_host_bound_idle_ns=sum(s.idle_causes.host_bound_ns for s in steps),
        total_sync_wait_idle_ns=sum(s.idle_causes.wait_ns for s in steps),
        total_other_idle_ns=sum(s.idle_causes.other_ns for s in steps),
        mean_step_time_ns=step / n,
        mean_compute_ns=compute / n,
        mean_exposed_comm_ns=exposed_comm / n,
        mean_exposed_memcpy_ns=memcpy / n,
        mean_idle_ns=idle / n,
        mean_dataloader_ns=loader / n,
        device_time_by_category_ns=tuple(sorted(cats.items(), key=lambda kv: -kv[1])),
        median_mfu_ratio=_upper_median([f.mfu for f in flops if f.mfu is not None]),
        median_hfu_ratio=_upper_median([f.hfu for f in flops if f.hfu is not None]),
    )


def summarize(analysis: RunData) -> RunSummary:
    return RunSummary(ranks=tuple(summarize_rank(r.rank, r.steps, r.roofline) for r in analysis.ranks))
