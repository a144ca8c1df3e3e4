"""A rank's local critical path before each collective: a backward walk over its dependency graph.

Nodes and edges (device ranks):
- device ops on one stream run in order: an op can start only after the previous op on its stream;
- an op can start only after the runtime call that launched it (joined by correlation id);
- on a host thread, a synchronizing call (stream/device/event synchronize, blocking memcpy,
  ``aten::item``) returns only after the device work it waited for; between such calls the thread
  runs ahead on its own (its time is CPU, or data loading where a data-loader range covers it).

Walk from a device op back to ``lo``: the op's binding predecessor is the later of (end of the
previous op on its stream, start of its launch call). Stream-bound: the gap is ``other idle``
(the stream waited for something the trace does not link, e.g. another stream's event) and the
previous op is on the path. Launch-bound: ``[launch call, op start]`` is ``launch overhead`` and
the path moves to the host thread at the launch call, then back to the last synchronizing call on
that thread: ``[sync end, launch]`` is CPU (data loading where covered), ``[device op end, sync
end]`` is ``sync wait``, and the path continues at the device op the sync waited for (the last one
to end before it). Ops on the path count as compute, communication or memcpy by their group.

Runs of stream-bound ops are jumped in one step with prefix sums (per stream), and host stretches
in one step to the previous sync, so a walk costs O(launch-bound runs + syncs) on the path, not
O(ops).
"""

from __future__ import annotations

import numpy as np

from .. import intervals as iv
from ..rankdata import RankData

# order of the breakdown columns (comm_events.BOUND_KINDS must match)
KINDS = ("compute", "data loading", "CPU", "launch overhead", "sync wait", "other idle", "communication", "memcpy")
_COMP, _LOAD, _CPU, _LAUNCH, _SYNC, _OTHER, _COMM, _MEM = range(8)


class Walker:
    def __init__(self, rd: RankData, loader_iv: tuple[np.ndarray, np.ndarray]) -> None:
        d = rd.dev
        self.order = np.lexsort((d.ts, d.stream, d.device))
        o = self.order
        self.pos = np.empty(o.size, np.int64)
        self.pos[o] = np.arange(o.size)
        self.ts, self.end = d.ts[o].astype(np.int64), d.end[o].astype(np.int64)
        self.launch, self.launch_tid = d.launch_ts[o].astype(np.int64), d.launch_tid[o].astype(np.int64)
        grp = d.group[o]
        self.kind_of = np.array([_COMP, _COMM, _MEM], np.int64)[np.clip(grp, 0, 2)]  # breakdown column per op
        n = o.size
        same = np.zeros(n, bool)
        if n > 1:
            same[1:] = (d.device[o][1:] == d.device[o][:-1]) & (d.stream[o][1:] == d.stream[o][:-1])
        prev_end = np.where(same, np.r_[np.int64(0), self.end[:-1]] if n else self.end, np.iinfo(np.int64).min)
        self.prev_end = prev_end
        self.same = same
        self.launch_bound = ~same | ((self.launch >= 0) & (self.launch >= prev_end))
        self.run_start = (
            np.maximum.accumulate(np.where(self.launch_bound, np.arange(n), 0)) if n else np.empty(0, np.int64)
        )
        dur = self.end - self.ts
        self.cum = [np.concatenate([[0], np.cumsum(np.where(grp == g, dur, 0))]) for g in (0, 1, 2)]
        gap = np.where(same & ~self.launch_bound, np.maximum(self.ts - prev_end, 0), 0)
        self.cum_gap = np.concatenate([[0], np.cumsum(gap)])
        # device ops by end time (positions in the stream-sorted arrays), for "the op a sync waited for"
        self.by_end = np.argsort(self.end, kind="stable")
        self.end_sorted = self.end[self.by_end]
        # synchronizing host calls per thread, by end time
        h = rd.host
        sel = np.flatnonzero(rd.sync_mask)
        self.syncs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for tid in np.unique(h.tid[sel]):
            m = sel[h.tid[sel] == tid]
            o2 = np.argsort(h.end[m], kind="stable")
            self.syncs[int(tid)] = (h.ts[m][o2].astype(np.int64), h.end[m][o2].astype(np.int64))
        self.loader = loader_iv

    def _host(self, out: np.ndarray, lo: int, hi: int) -> None:
        """[lo, hi) on the host: data loading where a loader range covers it, else CPU."""
        if hi <= lo:
            return
        s, e = self.loader
        if s.size:
            a = int(np.searchsorted(e, lo, side="right"))
            b = int(np.searchsorted(s, hi, side="left"))
            ls, le = iv.clip(s[a:b], e[a:b], lo, hi)
            load = int((le - ls).sum())
        else:
            load = 0
        out[_LOAD] += load
        out[_CPU] += (hi - lo) - load

    def _ops(self, out: np.ndarray, a: int, b: int, lo: int) -> None:
        """Ops a..b (sorted positions, one stream, stream-bound after a) on the path, clipped at lo."""
        if self.end[b] <= lo:
            return
        first = a
        if self.ts[a] < lo:  # the path starts inside this run: from the op covering lo
            first = a + int(np.searchsorted(self.end[a : b + 1], lo, side="right"))
        for g, k in ((0, _COMP), (1, _COMM), (2, _MEM)):
            out[k] += int(self.cum[g][b + 1] - self.cum[g][first])
        out[_OTHER] += int(self.cum_gap[b + 1] - self.cum_gap[first + 1]) if b > first else 0
        if self.ts[first] < lo:  # the first op only counts from lo
            out[self.kind_of[first]] -= lo - int(self.ts[first])

    def walk(self, dev_index: int, lo: int, until: int | None = None) -> np.ndarray:
        """Breakdown (KINDS) of [lo, start of device op ``dev_index``) — or of [lo, ``until``)
        ending at the end of that op when ``until`` is given (a step's tail)."""
        out = np.zeros(len(KINDS), np.int64)
        p = int(self.pos[dev_index])
        if until is not None:  # include the op itself: walk from its end
            self._ops(out, p, p, lo)
            t = int(self.ts[p])
        else:
            t = int(self.ts[p])
        for _ in range(100_000):  # bounded: each step moves strictly back in time
            if t <= lo:
                break
            if not self.launch_bound[p]:
                # stream-bound: the gap, then the run of stream-bound ops before it
                out[_OTHER] += max(t - max(int(self.prev_end[p]), lo), 0)
                q = p - 1
                r = int(self.run_start[q])
                self._ops(out, r, q, lo)
                t, p = int(self.ts[r]), r
                if self.end[q] <= lo or t <= lo:
                    break
                # now at a launch-bound op r, handled below on the next turn
                continue
            lt = int(self.launch[p])
            if lt < 0:  # launch unknown (first op of its stream without a launch): nothing links further back
                out[_OTHER] += t - lo
                break
            lt = min(lt, t)  # a launch stamped after its kernel started (host/device clock skew): no overhead
            out[_LAUNCH] += t - max(lt, lo)
            t = lt
            if t <= lo:
                break
            syncs = self.syncs.get(int(self.launch_tid[p]))
            j = int(np.searchsorted(syncs[1], t, side="right")) - 1 if syncs is not None else -1
            if j < 0 or syncs is None or syncs[1][j] <= lo:
                self._host(out, lo, t)
                break
            s_end = min(int(syncs[1][j]), t)
            self._host(out, s_end, t)
            # the device op the sync waited for: the last one to end before the sync returned
            k = int(np.searchsorted(self.end_sorted, s_end, side="right")) - 1
            if k < 0:
                self._host(out, lo, s_end)
                break
            p = int(self.by_end[k])  # by_end holds positions in the stream-sorted arrays
            d_end = int(self.end[p])
            out[_SYNC] += s_end - max(d_end, lo)
            if d_end <= lo:
                break
            self._ops(out, p, p, lo)
            t = int(self.ts[p])
        return out
