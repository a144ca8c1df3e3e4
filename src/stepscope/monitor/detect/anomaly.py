"""What a detector reports, and the helpers every detector shares: the steps that count, episodes
from a per-step flag with a persistence rule, and merging one job-wide event seen on many ranks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Kind = Literal["fluctuation", "regression", "straggler"]


@dataclass(frozen=True, kw_only=True)
class Anomaly:
    """One anomaly. ``rank`` is the rank it is about: for a job-wide event seen on every rank of a
    synchronous job (``ranks``), the one whose own time rose most, i.e. the likely cause.
    ``first_step``..``last_step`` span the episode; ``flagged_at_step`` is the step at which the
    persistence rule was first met (what a live detector would have known). ``excess_ratio`` is the
    median excess over the reference (0.25: 25% slower). ``cause`` names the phase or correlate
    (``gc``, ``data``, ``forward``, ``checkpoint``...) that explains most of the excess, or
    ``unknown``; ``evidence`` holds the figures behind it."""

    kind: Kind
    rank: int
    first_step: int
    last_step: int
    flagged_at_step: int
    steps: int
    excess_ratio: float
    cause: str
    message: str
    ranks: tuple[int, ...] = ()
    probability: float | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kind": self.kind,
            "rank": self.rank,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "flagged_at_step": self.flagged_at_step,
            "steps": self.steps,
            "excess_ratio": round(self.excess_ratio, 4),
            "cause": self.cause,
            "ranks": list(self.ranks or (self.rank,)),
            "message": self.message,
        }
        if self.probability is not None:
            d["probability"] = round(self.probability, 6)
        d["evidence"] = self.evidence
        return d


@dataclass(frozen=True, kw_only=True)
class Episode:
    """Indices into one series: ``first``..``last`` (slow steps), ``flagged`` where persistence held."""

    first: int
    last: int
    flagged: int
    slow: np.ndarray  # indices of the slow steps inside


def episodes(flag: np.ndarray, k: int, m: int) -> list[Episode]:
    """Episodes of a boolean series: a run of flagged entries where some ``m`` consecutive
    entries hold at least ``k`` flags; an episode ends after ``m`` unflagged entries."""
    idx = np.flatnonzero(flag)
    if idx.size < k:
        return []
    counts = np.convolve(flag.astype(np.int64), np.ones(m, dtype=np.int64))[: flag.size]  # flags in (i-m, i]
    breaks = np.flatnonzero(np.diff(idx) > m) + 1  # m unflagged entries between: a new episode
    out = []
    for group in np.split(idx, breaks):
        lo, hi = int(group[0]), int(group[-1])
        hits = np.flatnonzero(counts[lo : hi + 1] >= k)
        if hits.size:
            out.append(Episode(first=lo, last=hi, flagged=lo + int(hits[0]), slow=group))
    return out


def main_cause(shares: dict[str, float]) -> str:
    """The name whose share of an excess is largest, if it holds half of it or more; else unknown."""
    best = max(shares.items(), key=lambda kv: kv[1], default=("unknown", 0.0))
    return best[0] if best[1] >= 0.5 else "unknown"


def overlap(a: tuple[int, int], b: tuple[int, int]) -> float:
    """Overlap of two step ranges over the shorter one's length (0..1)."""
    inter = min(a[1], b[1]) - max(a[0], b[0]) + 1
    return max(0, inter) / max(1, min(a[1] - a[0] + 1, b[1] - b[0] + 1))


def merge_job_wide(found: list[Anomaly], own_excess: dict[tuple[int, int], float]) -> list[Anomaly]:
    """Per-rank anomalies of one kind that overlap by half or more are one job-wide event: one
    anomaly listing every rank, attributed to the rank with the largest ``own_excess`` (keyed by
    (rank, first step): its own time's rise; the others rose because they waited for it)."""
    groups: list[list[Anomaly]] = []
    for a in sorted(found, key=lambda a: (a.first_step, a.rank)):
        for g in groups:
            if overlap((a.first_step, a.last_step), (g[0].first_step, g[0].last_step)) >= 0.5:
                g.append(a)
                break
        else:
            groups.append([a])
    out = []
    for g in groups:
        if len(g) == 1:
            out.append(g[0])
            continue
        lead = max(g, key=lambda a: (own_excess.get((a.rank, a.first_step), 0.0), -a.rank))
        ranks = tuple(sorted({a.rank for a in g}))
        first, last = min(a.first_step for a in g), max(a.last_step for a in g)
        out.append(
            Anomaly(
                kind=lead.kind,
                rank=lead.rank,
                first_step=first,
                last_step=last,
                flagged_at_step=min(a.flagged_at_step for a in g),
                steps=lead.steps,
                excess_ratio=lead.excess_ratio,
                cause=lead.cause,
                message=f"{len(ranks)} ranks, steps {first}-{last}; rank {lead.rank}'s own time rose most: {lead.message}",
                ranks=ranks,
                probability=lead.probability,
                evidence=lead.evidence,
            )
        )
    return out
