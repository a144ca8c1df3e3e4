"""Device-idle gaps of a step window and their causes.

A gap is a stretch of the window in which no device work runs (window minus the union of all
device work in it). Each gap's time is split, exactly, into:

- ``input_wait``: the part during which a data-loader range ran on the host (the device waited
  for input; e.g. ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``);
- the rest of the gap, by the device work that ended it (the earliest work starting at the gap's
  end, on the whole device timeline, so the gap before the next step's first work counts too):
  ``host_bound`` when that work was launched after the gap began (the host was late);
  ``wait`` when it was launched in time and a synchronizing call overlapped the gap; ``other``
  otherwise (launch latency, driver, or no later work at all).

So ``input_wait + host_bound + wait + other == idle`` of the window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import intervals as iv
from .results import IdleCauses

Intervals = tuple[np.ndarray, np.ndarray]  # (starts, ends), int64 ns, sorted and disjoint

# gap causes, the codes of the gap log
HOST, SYNC, OTHER, LAUNCH = 0, 1, 2, 3
GapLog = tuple[np.ndarray, np.ndarray, np.ndarray]  # (starts, ends, cause code)


@dataclass(frozen=True, kw_only=True)
class IdleGaps:
    """A rank's device-idle gaps inside its steps, merged over the steps, by what ended them: the
    host had not yet called the launch of the next work (``host_bound``), the host sat in a
    synchronizing call (``sync_wait``), neither (``other``); a host-bound gap is cut at the launch
    call, and the part after it, the launch in flight, is ``launch_overhead``. Whole gaps, before
    the data-loader split of :class:`IdleCauses`."""

    host_bound: Intervals
    sync_wait: Intervals
    other: Intervals
    launch_overhead: Intervals

    def any_cause(self) -> iv.Covered:
        """All the gaps, whatever ended them: the time the device was idle inside the steps."""
        parts = (self.host_bound, self.sync_wait, self.other, self.launch_overhead)
        return iv.Covered.of(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


@dataclass(frozen=True)
class NextWork:
    """All device work of a rank by start (ties: latest launch first), to find what ends a gap."""

    start: np.ndarray
    launch: np.ndarray

    @classmethod
    def of(cls, s: np.ndarray, launch: np.ndarray) -> NextWork:
        o = np.lexsort((-launch, s))
        return cls(s[o], launch[o])

    def launch_at(self, t: np.ndarray) -> np.ndarray:
        """Launch time of the earliest work starting at or after each ``t`` (-1: none)."""
        if self.start.size == 0:
            return np.full(t.shape, -1, np.int64)
        pos = np.searchsorted(self.start, t, side="left")
        return np.where(pos < self.start.size, self.launch[np.minimum(pos, self.start.size - 1)], -1)


def _overlap(u: iv.Covered, gs: np.ndarray, ge: np.ndarray) -> np.ndarray:
    return u.between(gs, ge)


#: a silent gap: at least this long, with host activity over at most this share of it
SILENT_MIN_GAP_NS = 1_000_000
SILENT_MAX_HOST_RATIO = 0.1


def silent_ns(us: np.ndarray, ue: np.ndarray, w0: int, w1: int, host_u: iv.Covered) -> int:
    """Idle time of the window ``[w0, w1)`` (busy union ``(us, ue)``) in gaps of at least
    ``SILENT_MIN_GAP_NS`` during which host activity ``host_u`` (CPU ops, runtime calls, data-loader
    and compile ranges, all threads) covers at most ``SILENT_MAX_HOST_RATIO`` of the gap: the host ran nothing
    the profiler records, as in a garbage-collection pause, a GIL or OS stall (msprof-analyze's
    "conjectured GC" rule, there with 200 ms device gaps)."""
    gs = np.concatenate([[w0], ue]).astype(np.int64)
    ge = np.concatenate([us, [w1]]).astype(np.int64)
    length = ge - gs
    ok = length >= SILENT_MIN_GAP_NS
    if not ok.any():
        return 0
    gs, ge, length = gs[ok], ge[ok], length[ok]
    quiet = _overlap(host_u, gs, ge) <= SILENT_MAX_HOST_RATIO * length
    return int(length[quiet].sum())


def idle_causes(
    us: np.ndarray, ue: np.ndarray, w0: int, w1: int, nxt: NextWork, sync_u: iv.Covered, loader_u: iv.Covered
) -> tuple[IdleCauses, GapLog | None]:
    """Causes of the gaps of window ``[w0, w1)`` whose busy union is ``(us, ue)`` (module
    docstring), and the gaps (starts, ends, cause code) for the gap log."""
    gs = np.concatenate([[w0], ue]).astype(np.int64)
    ge = np.concatenate([us, [w1]]).astype(np.int64)
    ok = ge > gs
    gs, ge = gs[ok], ge[ok]
    if gs.size == 0:
        return IdleCauses(), None
    length = ge - gs
    loader = _overlap(loader_u, gs, ge)
    nxt_launch = nxt.launch_at(ge)
    host = nxt_launch > gs
    wait = ~host & (_overlap(sync_u, gs, ge) > 0)
    other = ~host & ~wait
    rest = length - loader
    # host-bound gaps split at the launch call: before it the host was busy (CPU), after it
    # the launch itself was in flight (launch overhead)
    cut = np.where(host, np.clip(nxt_launch, gs, ge), ge)
    code = np.where(host, HOST, np.where(wait, SYNC, OTHER)).astype(np.int8)
    launch_part = host & (cut < ge)
    gaps = (
        np.concatenate([gs, cut[launch_part]]),
        np.concatenate([np.where(host, cut, ge), ge[launch_part]]),
        np.concatenate([code, np.full(int(launch_part.sum()), LAUNCH, np.int8)]),
    )
    causes = IdleCauses(
        input_wait_ns=int(loader.sum()),
        host_bound_ns=int(rest[host].sum()),
        wait_ns=int(rest[wait].sum()),
        other_ns=int(rest[other].sum()),
        gaps=int(gs.size),
    )
    return causes, gaps


def merged(log: list[GapLog], cause: int) -> Intervals:
    """Merged idle gaps of one cause over the logged steps."""
    if not log:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    s = np.concatenate([g[0][g[2] == cause] for g in log])
    e = np.concatenate([g[1][g[2] == cause] for g in log])
    return iv.union(s.astype(np.int64), e.astype(np.int64))
