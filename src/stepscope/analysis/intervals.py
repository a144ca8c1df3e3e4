"""Vectorized interval algebra on int64 nanosecond intervals ``[start, end)``.

Everything here is O(n log n) numpy; no per-interval Python loops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

I64 = np.int64


def clip(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Clip to ``[lo, hi)`` and drop empty intervals."""
    s = np.maximum(starts, lo)
    e = np.minimum(ends, hi)
    keep = e > s
    return s[keep], e[keep]


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge overlapping/touching intervals; result sorted and disjoint."""
    if starts.size == 0:
        return starts.astype(I64), ends.astype(I64)
    if starts.size > 1 and bool(np.any(starts[1:] < starts[:-1])):
        return _union_of_sorted_ends(np.sort(starts), np.sort(ends))
    s, e = starts, ends  # already in order (most callers pass time-sorted rows): no sort
    run_max = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_max[:-1]
    idx = np.flatnonzero(new)
    out_s = s[idx]
    # each merged segment ends at the running max just before the next segment starts
    last = np.append(idx[1:] - 1, s.size - 1)
    out_e = run_max[last]
    return out_s, out_e


def _union_of_sorted_ends(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union from the starts and the ends each sorted on its own (two sorts of values, cheaper
    than ordering the pairs). Every interval ending before ``s[k]`` also starts before it, so the
    first ``k`` intervals have all ended before ``s[k]`` exactly when ``e[k - 1] < s[k]``: then
    ``s[k]`` opens a segment, and the segment before it ends at ``e[k - 1]``."""
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = e[:-1] < s[1:]
    idx = np.flatnonzero(new)
    return s[idx], e[np.append(idx[1:] - 1, s.size - 1)]


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    s, e = union(starts, ends)
    return int((e - s).sum())


def mask_lengths(starts: np.ndarray, ends: np.ndarray, set_ids: np.ndarray, n_sets: int) -> np.ndarray:
    """Sweep line: total time spent in each combination of sets.

    Returns an array ``L`` of length ``2**n_sets`` where ``L[m]`` is the time during which exactly
    the sets whose bits are in ``m`` are active (``L[0]`` is not meaningful: gaps between
    intervals are not bounded by a window here). Any union/intersection/difference of the sets is
    a sum over masks, e.g. ``|A \\ B| = sum(L[m] for m if m&A and not m&B)``.
    """
    if n_sets > 16:
        raise ValueError("at most 16 sets")
    out = np.zeros(1 << n_sets, dtype=I64)
    if starts.size == 0:
        return out
    times = np.concatenate([starts, ends])
    sets = np.concatenate([set_ids, set_ids])
    delta = np.concatenate([np.ones(starts.size, I64), -np.ones(ends.size, I64)])
    order = np.argsort(times, kind="stable")
    times = times[order]
    sets = sets[order]
    delta = delta[order]
    counts = np.zeros((times.size, n_sets), dtype=np.int32)
    counts[np.arange(times.size), sets] = delta
    np.cumsum(counts, axis=0, out=counts)
    bits = (counts > 0).astype(np.int64) @ (1 << np.arange(n_sets, dtype=np.int64))
    seg = np.diff(times)
    np.add.at(out, bits[:-1], seg)
    return out


def masked_sum(lengths: np.ndarray, *, all_of: int = 0, none_of: int = 0) -> int:
    """Sum of ``lengths[m]`` over masks containing every bit of ``all_of`` and none of ``none_of``."""
    m = np.arange(lengths.size)
    sel = ((m & all_of) == all_of) & ((m & none_of) == 0) & (m != 0)
    return int(lengths[sel].sum())


def busy_before(seg_starts: np.ndarray, seg_ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For disjoint sorted segments, the busy time in ``(-inf, t)`` for each ``t`` (vectorized)."""
    if seg_starts.size == 0:
        return np.zeros(t.shape, dtype=I64)
    return _busy_before(seg_starts, seg_ends, np.concatenate([[0], np.cumsum(seg_ends - seg_starts)]), t)


@dataclass(frozen=True)
class Covered:
    """A union of intervals with its running total: many busy-time queries on one large union (the
    host's activity, once per step) cost a binary search each, not a pass over the union."""

    starts: np.ndarray
    ends: np.ndarray
    cum: np.ndarray

    @classmethod
    def of(cls, starts: np.ndarray, ends: np.ndarray) -> Covered:
        s, e = union(starts, ends)
        return cls(s, e, np.concatenate([[0], np.cumsum(e - s)]).astype(I64))

    def between(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Busy time inside each ``[a, b)``."""
        if self.starts.size == 0:
            return np.zeros(np.shape(a), dtype=I64)
        return _busy_before(self.starts, self.ends, self.cum, b) - _busy_before(self.starts, self.ends, self.cum, a)


def _busy_before(seg_starts: np.ndarray, seg_ends: np.ndarray, cum: np.ndarray, t: np.ndarray) -> np.ndarray:
    i = np.searchsorted(seg_starts, t, side="right")  # segments starting before or at t
    full = cum[np.maximum(i - 1, 0)]
    partial = np.where(i > 0, np.minimum(t, seg_ends[np.maximum(i - 1, 0)]) - seg_starts[np.maximum(i - 1, 0)], 0)
    return np.where(i > 0, full + np.maximum(partial, 0), 0)


def top_level(tid: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Boolean mask of intervals not contained in an earlier-starting interval of the same thread."""
    n = ts.size
    if n == 0:
        return np.zeros(0, bool)
    o = np.lexsort((-end, ts, tid))
    t, s, e = tid[o], ts[o], end[o]
    lo = s.min()
    span = int(max(e.max(), s.max()) - lo) + 1
    new_thread = np.r_[True, t[1:] != t[:-1]]
    # shift each thread into its own time band so one running max never crosses threads
    shift = (np.cumsum(new_thread) - 1).astype(np.int64) * span - lo
    run = np.maximum.accumulate(e + shift)
    prev = np.empty(n, np.int64)
    prev[0] = np.iinfo(np.int64).min
    prev[1:] = run[:-1]
    top = new_thread | (s + shift >= prev)
    out = np.empty(n, bool)
    out[o] = top
    return out


def outermost(ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For one thread's intervals in start order: the mask of those not contained in an earlier
    one (as ``top_level``). Rows with one start form a run; the run's first longest row is its
    container, kept when it starts at or after every earlier run's end (the others nest in it,
    unless all of them are empty)."""
    if ts.size == 0:
        return np.zeros(0, bool)
    run_new = np.r_[True, ts[1:] != ts[:-1]]
    starts = np.flatnonzero(run_new)
    run_max = np.maximum.reduceat(end, starts)
    before = np.empty(starts.size, np.int64)
    before[0] = np.iinfo(np.int64).min
    before[1:] = np.maximum.accumulate(run_max)[:-1]
    run_top = ts[starts] >= before
    rid = np.cumsum(run_new) - 1
    is_max = end == run_max[rid]
    seen = np.cumsum(is_max)
    first_max = is_max & (seen - (seen - is_max)[starts][rid] == 1)
    return run_top[rid] & (first_max | (run_max[rid] == ts))
