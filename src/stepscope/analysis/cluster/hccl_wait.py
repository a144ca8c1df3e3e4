"""Which rank the others wait for, from HCCL's own timing (Ascend ranks with ``communication.json``).

HCCL splits each collective's time on each rank into waiting for the peers to arrive and moving
data (``analysis/steps/hccl.py``). The rank the others wait for is the one that arrives last, so it
waits least itself: a late rank's wait is near zero while its peers' is large. Per rank (per step,
over all its collectives): ``wait_ns``, ``transit_ns``, ``wait_ratio`` = wait / (wait + transit),
and ``waited_for_ns`` = max(0, median wait of the other ranks - its own wait), the time its peers
spend waiting beyond what it waits. A rank is late when ``waited_for_ns`` is at least half the
others' median wait (``LATE_SHARE``) and the others mostly wait (their median ``wait_ratio`` at
least ``PEERS_WAIT_RATIO``): a balanced group, where every rank waits alike, names nobody.
Ranks without HCCL timing are left out; fewer than two with it give no result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..steps.hccl import HcclTiming
from .context import ClusterContext

LATE_SHARE = 0.5
PEERS_WAIT_RATIO = 0.5


@dataclass(frozen=True, kw_only=True)
class HcclRankWait:
    rank: int
    wait_ns: float  # per step
    transit_ns: float  # per step
    wait_ratio: float  # 0-1
    waited_for_ns: float  # per step: the others' median wait beyond this rank's own
    late: bool


@dataclass(frozen=True, kw_only=True)
class HcclWaitView:
    ranks: tuple[HcclRankWait, ...]  # the most waited-for first
    late_ranks: tuple[int, ...]


def compute(c: ClusterContext) -> HcclWaitView | None:
    timed = [(r.rank, h) for r in c.ranks if isinstance(h := r.extras.get("hccl"), HcclTiming)]
    if len(timed) < 2:
        return None
    wait = np.array([h.wait_ns_per_step for _, h in timed])
    ratio = np.array([h.wait_ratio for _, h in timed])
    out = []
    for j, (rank, h) in enumerate(timed):
        others = np.delete(np.arange(len(timed)), j)
        peers_wait = float(np.median(wait[others]))
        waited_for = max(0.0, peers_wait - wait[j])
        late = bool(
            peers_wait > 0 and waited_for >= LATE_SHARE * peers_wait and np.median(ratio[others]) >= PEERS_WAIT_RATIO
        )
        out.append(
            HcclRankWait(
                rank=rank,
                wait_ns=float(wait[j]),
                transit_ns=h.transit_ns_per_step,
                wait_ratio=h.wait_ratio,
                waited_for_ns=waited_for,
                late=late,
            )
        )
    out.sort(key=lambda x: (-x.waited_for_ns, x.rank))
    return HcclWaitView(ranks=tuple(out), late_ranks=tuple(x.rank for x in out if x.late))
