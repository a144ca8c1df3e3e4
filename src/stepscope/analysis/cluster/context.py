"""What every cluster analysis reads: a :class:`ClusterContext`, built once over the ranks' results."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from ..extra import earlier_result
from ..results import RankAnalysis
from .comm_events import CommEvents, finalize
from .matching import Links, Matching, match

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class ClusterContext:
    ranks: tuple[RankAnalysis, ...]
    threshold: float  # robust z-score over which a rank is a straggler
    links: Links
    events: dict[int, CommEvents]  # per rank, finalized (intervals reduced to per-instance breakdowns)
    matching: Matching
    earlier: Mapping[str, object] = field(default_factory=dict)  # results of the analyses run before, by name

    def result(self, name: str, kind: type[T]) -> T:
        """The result of the cluster analysis ``name``, listed before the caller in the registry."""
        return earlier_result(self.earlier, name, kind)


def build_context(ranks: tuple[RankAnalysis, ...], threshold: float, links: Links) -> ClusterContext:
    evs = {
        r.rank: (r.comm_events if r.comm_events.before is not None else finalize(r.comm_events))
        for r in ranks
        if r.comm_events is not None
    }
    return ClusterContext(ranks=ranks, threshold=threshold, links=links, events=evs, matching=match(evs, links))
