"""Per-step time accounting by interval unions over all streams of a rank.

Within the step window ``W`` let C = union of compute kernels, M = union of communication, Y =
union of memcpy/memset. Then (``|.|`` = total length)::

    compute_ns        = |C|
    exposed_comm_ns   = |M \\ C|
    exposed_memcpy_ns = |Y \\ (C u M)|
    idle_ns           = |W| - |C u M u Y|
    comm_ns = |M|,  overlapped_comm_ns = |M n C|

so ``compute + exposed_comm + exposed_memcpy + idle == |W|`` exactly, in integer ns.

Ranks with no device work (CPU-only, gloo) are accounted on the host: the top-level ops of each
thread (ops not nested in another op of the same thread) are the "work"; communication ops
(``gloo:*``, ``c10d::*``...) are M and the rest C. A communication op nested inside a compute op
(DDP's all-reduce hook runs inside autograd) is N: compute = |C \\ N| and exposed communication
= |M \\ C| + |C n N|, so the partition still sums to the step.
"""

from __future__ import annotations

import re

import numpy as np

from ...trace.schema import KIND_CODE as KIND
from .. import intervals as iv
from ..classify import COMM_PREFIX, Rules
from ..rankdata import RankData
from .results import CollectiveTime, CpuStep, IdleCauses, StepBreakdown
from .windows import StepSpans

_DATALOADER = re.compile(r"enumerate\(DataLoader\)|DataLoader.*__next__|_DataLoaderIter|dataloader", re.I)
_OPTIMIZER = re.compile(r"^Optimizer\.step|optimizer\.step|^optimizer_step", re.I)


def _name_mask(names: list[str], pat: re.Pattern[str]) -> np.ndarray:
    return np.array([bool(pat.search(n)) for n in names], dtype=bool)


def top_level(tid: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Boolean mask of intervals not contained in an earlier-starting interval of the same thread."""
    n = ts.size
    if n == 0:
        return np.zeros(0, bool)
    o = np.lexsort((-end, ts, tid))
    t, s, e = tid[o], ts[o], end[o]
    lo = s.min()
    span = int(max(e.max(), s.max()) - lo) + 1
    _, g = np.unique(t, return_inverse=True)
    # shift each thread into its own time band so one running max never crosses threads
    shift = g.astype(np.int64) * span - lo
    run = np.maximum.accumulate(e + shift)
    prev = np.empty(n, np.int64)
    prev[0] = np.iinfo(np.int64).min
    prev[1:] = run[:-1]
    new_thread = np.empty(n, bool)
    new_thread[0] = True
    new_thread[1:] = g[1:] != g[:-1]
    top = new_thread | (s + shift >= prev)
    out = np.empty(n, bool)
    out[o] = top
    return out


class _SortedRanges:
    """Intervals sorted by start; ``within(lo, hi)`` = (union length, count) clipped to [lo, hi)."""

    def __init__(self, s: np.ndarray, e: np.ndarray) -> None:
        o = np.argsort(s, kind="stable")
        self.s, self.e = s[o], e[o]
        self.max_dur = int((self.e - self.s).max()) if self.s.size else 0

    def within(self, lo: int, hi: int) -> tuple[int, int]:
        a = int(np.searchsorted(self.s, lo - self.max_dur, side="left"))
        b = int(np.searchsorted(self.s, hi, side="left"))
        s, e = iv.clip(self.s[a:b], self.e[a:b], lo, hi)
        return iv.union_length(s, e), int(s.size)


class StepAccountant:
    """Computes :class:`StepBreakdown` for each step of one rank."""

    def __init__(self, rd: RankData, spans: StepSpans, dev_step: np.ndarray, rules: Rules) -> None:
        self.rd = rd
        self.spans = spans
        self.dev_step = dev_step
        self.rules = rules
        h = rd.host
        self.cpu_mode = rd.dev.size == 0
        # device-idle gaps of every step: (starts, ends, cause 0 host-bound before the launch call /
        # 1 sync wait / 2 other / 3 host-bound after the launch call: launch overhead)
        self.gap_log: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.dl_mask = _name_mask(h.names, _DATALOADER)[h.name_idx] & (h.kind != KIND["runtime"])
        self.opt_mask = _name_mask(h.names, _OPTIMIZER)[h.name_idx] & (h.kind != KIND["runtime"])
        if self.cpu_mode:
            comm_name = _name_mask(h.names, rules.comm_ops)[h.name_idx]
            step_name = np.array([n.startswith("ProfilerStep#") for n in h.names])[h.name_idx]
            is_op = ((h.kind == KIND["cpu_op"]) | ((h.kind == KIND["user_annotation"]) & comm_name)) & ~step_name
            idx = np.flatnonzero(is_op)
            top = top_level(h.tid[idx], h.ts[idx], h.end[idx])
            # communication called from inside a compute op (DDP's all-reduce hook inside autograd)
            # is communication, not compute: kept as its own rows and carved out of the parent
            nested = idx[~top & comm_name[idx]]
            sel = np.concatenate([idx[top], nested])
            self.cpu_sel = sel
            self.cpu_is_comm = comm_name[sel]
            self.cpu_nested = np.r_[np.zeros(int(top.sum()), bool), np.ones(nested.size, bool)]
            self.cpu_ctype = np.array(
                [
                    COMM_PREFIX + rules.collective_of(h.names[i]) if c else "cpu"
                    for i, c in zip(h.name_idx[sel], self.cpu_is_comm)
                ],
                dtype=object,
            )
        # category labels -> small int codes, once
        if self.cpu_mode:
            uniq, code = np.unique(self.cpu_ctype.astype(str), return_inverse=True)
            self.cpu_code = code.ravel()
        else:
            uniq, code = np.unique(rd.dev.category.astype(str), return_inverse=True)
            self.dev_code = code.ravel()
        self.labels: list[str] = [str(u) for u in uniq]
        # device rows grouped by step once (not one full scan per step)
        self._dev_order = np.argsort(dev_step, kind="stable")
        self._dev_bounds = np.searchsorted(dev_step[self._dev_order], np.arange(len(spans.names) + 1))
        # host ranges per figure, sorted by start, for per-step windows by binary search
        self._ranges = {
            k: _SortedRanges(h.ts[m], h.end[m])
            for k, m in (("dl", self.dl_mask), ("opt", self.opt_mask), ("sync", rd.sync_mask))
        }
        # sync calls as intervals, for idle-cause attribution
        self.sync_s = h.ts[rd.sync_mask]
        self.sync_e = h.end[rd.sync_mask]
        self.sync_u = iv.union(self.sync_s, self.sync_e)

    # ------------------------------------------------------------------------------------------
    def step(self, i: int) -> StepBreakdown:
        sp = self.spans
        c0, c1 = int(sp.cpu_start[i]), int(sp.cpu_end[i])
        if self.cpu_mode:
            sel = self.cpu_sel
            h = self.rd.host
            s, e = h.ts[sel], h.end[sel]
            inside = (e > c0) & (s < c1)
            s, e = s[inside], e[inside]
            group = np.where(self.cpu_is_comm[inside], 1, 0).astype(np.int8)
            cat = self.cpu_code[inside]
            w0, w1, source = c0, c1, "cpu"
            launch = np.full(s.size, -1, np.int64)
            nested = self.cpu_nested[inside]
            n_dev = 0
        else:
            d = self.rd.dev
            mine = self._dev_order[self._dev_bounds[i] : self._dev_bounds[i + 1]]
            s, e = d.ts[mine], d.end[mine]
            group, cat, launch = d.group[mine], self.dev_code[mine], d.launch_ts[mine]
            n_dev = int(mine.size)
            if mine.size:
                w0, w1, source = int(s.min()), int(e.max()), "device"
            else:
                w0, w1, source = c0, c1, "cpu"
            nested = np.zeros(s.size, bool)
        s_c, e_c = np.maximum(s, w0), np.minimum(e, w1)
        keep = e_c > s_c
        s_c, e_c, group_k, cat_k, launch_k = s_c[keep], e_c[keep], group[keep], cat[keep], launch[keep]
        nested_k = nested[keep]
        window = w1 - w0
        # sets: 0 compute, 1 comm, 2 memory, 3.. one per collective type present
        labels = self.labels
        comm_codes = np.unique(cat_k[group_k == 1])[:12]
        ctypes = [labels[c][len(COMM_PREFIX) :] for c in comm_codes]
        set_ids = group_k.astype(np.int64)
        ids = [set_ids]
        starts = [s_c]
        ends = [e_c]
        for j, cc in enumerate(comm_codes):
            m = cat_k == cc
            starts.append(s_c[m])
            ends.append(e_c[m])
            ids.append(np.full(int(m.sum()), 3 + j, np.int64))
        # N: communication nested inside a compute op on the same thread (CPU ranks): time in N is
        # communication even though its parent op covers it, so compute = |C \ N|, and
        # exposed comm = |M \ C| + |C n N| (N is part of M); the partition still sums to the window
        n_bit = 3 + len(ctypes)
        starts.append(s_c[nested_k])
        ends.append(e_c[nested_k])
        ids.append(np.full(int(nested_k.sum()), n_bit, np.int64))
        L = iv.mask_lengths(np.concatenate(starts), np.concatenate(ends), np.concatenate(ids), n_bit + 1)
        C, M, Y, N = 1, 2, 4, 1 << n_bit
        compute = iv.masked_sum(L, all_of=C, none_of=N)
        comm = iv.masked_sum(L, all_of=M)
        overlapped = iv.masked_sum(L, all_of=C | M, none_of=N)
        exposed_comm = iv.masked_sum(L, all_of=M, none_of=C) + iv.masked_sum(L, all_of=C | N)
        memcpy = iv.masked_sum(L, all_of=Y)
        exposed_memcpy = iv.masked_sum(L, all_of=Y, none_of=C | M)
        busy = iv.masked_sum(L)
        idle = window - busy
        colls = []
        for j, ct in enumerate(ctypes):
            b = 1 << (3 + j)
            colls.append(
                CollectiveTime(
                    type=ct,
                    comm_ns=iv.masked_sum(L, all_of=b),
                    overlapped_ns=iv.masked_sum(L, all_of=b | C, none_of=N),
                    exposed_ns=iv.masked_sum(L, all_of=b, none_of=C) + iv.masked_sum(L, all_of=b | C | N),
                    count=int((cat_k == comm_codes[j]).sum()),
                )
            )
        by_cat: dict[str, int] = {}
        ktime: dict[str, int] = {}
        if cat_k.size:
            sums = np.bincount(cat_k, weights=(e_c - s_c), minlength=len(labels)).astype(np.int64)
            for k in np.unique(cat_k):
                m = cat_k == k
                by_cat[labels[k]] = iv.union_length(s_c[m], e_c[m])
                ktime[labels[k]] = int(sums[k])
        causes = self._idle_causes(s_c, e_c, launch_k, w0, w1)
        return StepBreakdown(
            name=sp.names[i],
            step_time_ns=window,
            window_start_ns=w0,
            window_end_ns=w1,
            cpu_step_ns=c1 - c0,
            cpu_start_ns=c0,
            compute_ns=compute,
            comm_ns=comm,
            overlapped_comm_ns=overlapped,
            exposed_comm_ns=exposed_comm,
            memcpy_ns=memcpy,
            exposed_memcpy_ns=exposed_memcpy,
            idle_ns=idle,
            by_category_ns=by_cat,
            kernel_time_by_category_ns=ktime,
            collectives=tuple(colls),
            idle_causes=causes,
            cpu=self._cpu(c0, c1, causes.host_bound_ns),
            device_events=n_dev,
            window_source=source,
        )

    def _idle_causes(self, s: np.ndarray, e: np.ndarray, launch: np.ndarray, w0: int, w1: int) -> IdleCauses:
        """Classify each device-idle gap inside the window by the work that ended it."""
        us, ue = iv.union(s, e)
        if us.size == 0:
            return IdleCauses(other_ns=w1 - w0, gaps=1 if w1 > w0 else 0)
        gs = np.concatenate([[w0], ue])
        ge = np.concatenate([us, [w1]])
        ok = ge > gs
        gs, ge = gs[ok], ge[ok]
        if gs.size == 0:
            return IdleCauses()
        # the device work that ends each gap: earliest start at the gap end (latest launch wins ties)
        o = np.lexsort((-launch, s))
        ss, ll = s[o], launch[o]
        pos = np.clip(np.searchsorted(ss, ge, side="left"), 0, ss.size - 1)
        nxt_launch = np.where(ge < w1, ll[pos], -1)
        host = nxt_launch > gs
        sync_overlap = iv.busy_before(self.sync_u[0], self.sync_u[1], ge) - iv.busy_before(
            self.sync_u[0], self.sync_u[1], gs
        )
        wait = ~host & (sync_overlap > 0)
        other = ~host & ~wait
        length = ge - gs
        # host-bound gaps split at the launch call: before it the host was busy (CPU), after it
        # the launch itself was in flight (launch overhead, code 3)
        cut = np.where(host, np.clip(nxt_launch, gs, ge), ge)
        code = np.where(host, 0, np.where(wait, 1, 2)).astype(np.int8)
        launch_part = host & (cut < ge)
        self.gap_log.append(
            (
                np.concatenate([gs, cut[launch_part]]),
                np.concatenate([np.where(host, cut, ge), ge[launch_part]]),
                np.concatenate([code, np.full(int(launch_part.sum()), 3, np.int8)]),
            )
        )
        return IdleCauses(
            host_bound_ns=int(length[host].sum()),
            wait_ns=int(length[wait].sum()),
            other_ns=int(length[other].sum()),
            gaps=int(gs.size),
        )

    def gaps(self, cause: int) -> tuple[np.ndarray, np.ndarray]:
        """Merged idle gaps of one cause over the steps computed so far."""
        if not self.gap_log:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        s = np.concatenate([g[0][g[2] == cause] for g in self.gap_log])
        e = np.concatenate([g[1][g[2] == cause] for g in self.gap_log])
        return iv.union(s.astype(np.int64), e.astype(np.int64))

    def _cpu(self, c0: int, c1: int, cpu_bound_ns: int) -> CpuStep:
        dl, _ = self._ranges["dl"].within(c0, c1)
        opt, _ = self._ranges["opt"].within(c0, c1)
        sync, n_sync = self._ranges["sync"].within(c0, c1)
        return CpuStep(dataloader_ns=dl, optimizer_ns=opt, sync_ns=sync, sync_calls=n_sync, cpu_bound_ns=cpu_bound_ns)
