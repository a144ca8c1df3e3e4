"""The detectors over a run's records, in one list: each takes the per-rank series and returns
anomalies. A job-wide event (every rank of a synchronous job slows together) is merged into one
anomaly attributed to the rank whose own time rose most."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..config import DetectConfig
from ..store import RunData
from . import fluctuation, regression, straggler
from .anomaly import Anomaly, merge_job_wide
from .series import RankSeries, rank_series

PER_RANK: tuple[Callable[[RankSeries, DetectConfig], list[Anomaly]], ...] = (fluctuation.detect, regression.detect)


@dataclass(frozen=True, kw_only=True)
class Detection:
    anomalies: tuple[Anomaly, ...]
    worst_ranks: tuple[dict[str, object], ...]
    series: tuple[RankSeries, ...]
    notes: tuple[str, ...]


def _own_rise(series: list[RankSeries], a: Anomaly) -> float:
    """How much a rank's own time rose over an anomaly's steps against its median before them."""
    for s in series:
        if s.rank == a.rank:
            inside = (s.step >= a.first_step) & (s.step <= a.last_step)
            before = s.step < a.first_step
            if inside.any() and before.any():
                return float(np.median(s.own_ns[inside]) - np.median(s.own_ns[before]))
    return 0.0


def detect(run: RunData, cfg: DetectConfig) -> Detection:
    series = rank_series(run, cfg.warmup_ratio)
    notes = []
    found: list[Anomaly] = []
    for det in PER_RANK:
        per_kind = [a for s in series for a in det(s, cfg)]
        rise = {(a.rank, a.first_step): _own_rise(series, a) for a in per_kind}
        found += merge_job_wide(per_kind, rise)
    strag, worst = straggler.detect(series, cfg)
    found += [straggler.with_collectives(a, run.collectives) for a in strag]
    levels = {int(m.get("level", 0)) for m in run.meta.values()}
    if len(series) > 1 and max(levels, default=0) < 2:
        notes.append(
            "collective wait not measured (level < 2): a rank's own time is its step time, which ranks that "
            "synchronize every step share, so stragglers are visible only at level 2"
        )
    found.sort(key=lambda a: (a.first_step, a.kind, a.rank))
    return Detection(anomalies=tuple(found), worst_ranks=tuple(worst), series=tuple(series), notes=tuple(notes))
