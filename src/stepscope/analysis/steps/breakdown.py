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
from dataclasses import dataclass

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


Intervals = tuple[np.ndarray, np.ndarray]  # (starts, ends), int64 ns, sorted and disjoint


@dataclass(frozen=True, kw_only=True)
class IdleGaps:
    """A rank's device-idle gaps inside its steps, merged over the steps, by what ended them: the
    host had not yet called the launch of the next work (``host_bound``), the host sat in a
    synchronizing call (``sync_wait``), neither (``other``); a host-bound gap is cut at the launch
    call, and the part after it, the launch in flight, is ``launch_overhead``."""

    host_bound: Intervals
    sync_wait: Intervals
    other: Intervals
    launch_overhead: Intervals


@dataclass(frozen=True, kw_only=True)
class Accounting:
    """The step accounting of one rank: each step's breakdown, the idle gaps behind its idle causes,
    and the host rows it reads as data loading and optimizer."""

    steps: tuple[StepBreakdown, ...]
    idle_gaps: IdleGaps
    dataloader_mask: np.ndarray  # over host rows
    optimizer_mask: np.ndarray  # over host rows


def account(rd: RankData, spans: StepSpans, dev_step: np.ndarray, rules: Rules) -> Accounting:
    acct = StepAccountant(rd, spans, dev_step, rules)
    steps = tuple(acct.step(i) for i in range(len(spans.names)))
    return Accounting(
        steps=steps, idle_gaps=acct.idle_gaps(), dataloader_mask=acct.dl_mask, optimizer_mask=acct.opt_mask
    )


# gap causes, the codes of the gap log
_HOST, _SYNC, _OTHER, _LAUNCH = 0, 1, 2, 3


@dataclass(frozen=True)
class _CpuWork:
    """CPU-only ranks: the work rows (top-level ops of each thread, plus communication nested in them)."""

    sel: np.ndarray  # host rows
    is_comm: np.ndarray
    nested: np.ndarray
    ctype: np.ndarray  # object: "cpu" or "comm:<collective>"


def _cpu_work(rd: RankData, rules: Rules) -> _CpuWork:
    h = rd.host
    comm_name = _name_mask(h.names, rules.comm_ops)[h.name_idx]
    step_name = np.array([n.startswith("ProfilerStep#") for n in h.names])[h.name_idx]
    is_op = ((h.kind == KIND["cpu_op"]) | ((h.kind == KIND["user_annotation"]) & comm_name)) & ~step_name
    idx = np.flatnonzero(is_op)
    top = top_level(h.tid[idx], h.ts[idx], h.end[idx])
    # communication called from inside a compute op (DDP's all-reduce hook inside autograd)
    # is communication, not compute: kept as its own rows and carved out of the parent
    nested = idx[~top & comm_name[idx]]
    sel = np.concatenate([idx[top], nested])
    is_comm = comm_name[sel]
    ctype = np.array(
        [COMM_PREFIX + rules.collective_of(h.names[i]) if c else "cpu" for i, c in zip(h.name_idx[sel], is_comm)],
        dtype=object,
    )
    return _CpuWork(sel, is_comm, np.r_[np.zeros(int(top.sum()), bool), np.ones(nested.size, bool)], ctype)


@dataclass(frozen=True)
class _Work:
    """One step's work intervals clipped to its window ``[w0, w1)``, with their group (0 compute, 1
    communication, 2 memory), category code, launch time and nested-communication flag."""

    s: np.ndarray
    e: np.ndarray
    group: np.ndarray
    cat: np.ndarray
    launch: np.ndarray
    nested: np.ndarray
    w0: int
    w1: int
    source: str  # "device" | "cpu"
    n_dev: int

    def clipped(self) -> _Work:
        s, e = np.maximum(self.s, self.w0), np.minimum(self.e, self.w1)
        k = e > s
        return _Work(
            s[k],
            e[k],
            self.group[k],
            self.cat[k],
            self.launch[k],
            self.nested[k],
            self.w0,
            self.w1,
            self.source,
            self.n_dev,
        )


class StepAccountant:
    """Computes :class:`StepBreakdown` for each step of one rank."""

    def __init__(self, rd: RankData, spans: StepSpans, dev_step: np.ndarray, rules: Rules) -> None:
        self.rd, self.spans = rd, spans
        h = rd.host
        self.cpu_work = _cpu_work(rd, rules) if rd.dev.size == 0 else None
        # device-idle gaps of every step: (starts, ends, cause code)
        self.gap_log: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.dl_mask = _name_mask(h.names, _DATALOADER)[h.name_idx] & (h.kind != KIND["runtime"])
        self.opt_mask = _name_mask(h.names, _OPTIMIZER)[h.name_idx] & (h.kind != KIND["runtime"])
        # category labels -> small int codes, once
        labels = self.cpu_work.ctype if self.cpu_work is not None else rd.dev.category
        uniq, code = np.unique(labels.astype(str), return_inverse=True)
        self.code = code.ravel()
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
        self.sync_u = iv.union(h.ts[rd.sync_mask], h.end[rd.sync_mask])

    def _work(self, i: int, c0: int, c1: int) -> _Work:
        cw = self.cpu_work
        if cw is not None:
            h = self.rd.host
            s, e = h.ts[cw.sel], h.end[cw.sel]
            inside = (e > c0) & (s < c1)
            group = np.where(cw.is_comm[inside], 1, 0).astype(np.int8)
            launch = np.full(int(inside.sum()), -1, np.int64)
            return _Work(s[inside], e[inside], group, self.code[inside], launch, cw.nested[inside], c0, c1, "cpu", 0)
        d = self.rd.dev
        mine = self._dev_order[self._dev_bounds[i] : self._dev_bounds[i + 1]]
        s, e = d.ts[mine], d.end[mine]
        w0, w1, source = (int(s.min()), int(e.max()), "device") if mine.size else (c0, c1, "cpu")
        nested = np.zeros(s.size, bool)
        return _Work(s, e, d.group[mine], self.code[mine], d.launch_ts[mine], nested, w0, w1, source, int(mine.size))

    def step(self, i: int) -> StepBreakdown:
        sp = self.spans
        c0, c1 = int(sp.cpu_start[i]), int(sp.cpu_end[i])
        w = self._work(i, c0, c1).clipped()
        parts, colls = _partition(w, self.labels)
        by_cat, ktime = _by_category(w, self.labels)
        causes, gaps = _idle_causes(w.s, w.e, w.launch, w.w0, w.w1, self.sync_u)
        if gaps is not None:
            self.gap_log.append(gaps)
        return StepBreakdown(
            name=sp.names[i],
            step_time_ns=w.w1 - w.w0,
            window_start_ns=w.w0,
            window_end_ns=w.w1,
            cpu_step_ns=c1 - c0,
            cpu_start_ns=c0,
            **parts,
            by_category_ns=by_cat,
            kernel_time_by_category_ns=ktime,
            collectives=colls,
            idle_causes=causes,
            cpu=self._cpu(c0, c1, causes.host_bound_ns),
            device_events=w.n_dev,
            window_source=w.source,
        )

    def idle_gaps(self) -> IdleGaps:
        return IdleGaps(
            host_bound=self._gaps(_HOST),
            sync_wait=self._gaps(_SYNC),
            other=self._gaps(_OTHER),
            launch_overhead=self._gaps(_LAUNCH),
        )

    def _gaps(self, cause: int) -> Intervals:
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


def _partition(w: _Work, labels: list[str]) -> tuple[dict[str, int], tuple[CollectiveTime, ...]]:
    """The window's time by set (module docstring), and per collective type present."""
    # sets: 0 compute, 1 comm, 2 memory, 3.. one per collective type present
    comm_codes = np.unique(w.cat[w.group == 1])[:12]
    starts, ends, ids = [w.s], [w.e], [w.group.astype(np.int64)]
    for j, cc in enumerate(comm_codes):
        m = w.cat == cc
        starts.append(w.s[m])
        ends.append(w.e[m])
        ids.append(np.full(int(m.sum()), 3 + j, np.int64))
    # N: communication nested inside a compute op on the same thread (CPU ranks): time in N is
    # communication even though its parent op covers it, so compute = |C \ N|, and
    # exposed comm = |M \ C| + |C n N| (N is part of M); the partition still sums to the window
    n_bit = 3 + comm_codes.size
    starts.append(w.s[w.nested])
    ends.append(w.e[w.nested])
    ids.append(np.full(int(w.nested.sum()), n_bit, np.int64))
    L = iv.mask_lengths(np.concatenate(starts), np.concatenate(ends), np.concatenate(ids), n_bit + 1)
    C, M, Y, N = 1, 2, 4, 1 << n_bit
    parts = {
        "compute_ns": iv.masked_sum(L, all_of=C, none_of=N),
        "comm_ns": iv.masked_sum(L, all_of=M),
        "overlapped_comm_ns": iv.masked_sum(L, all_of=C | M, none_of=N),
        "exposed_comm_ns": iv.masked_sum(L, all_of=M, none_of=C) + iv.masked_sum(L, all_of=C | N),
        "memcpy_ns": iv.masked_sum(L, all_of=Y),
        "exposed_memcpy_ns": iv.masked_sum(L, all_of=Y, none_of=C | M),
        "idle_ns": (w.w1 - w.w0) - iv.masked_sum(L),
    }
    colls = []
    for j, cc in enumerate(comm_codes):
        b = 1 << (3 + j)
        colls.append(
            CollectiveTime(
                type=labels[cc][len(COMM_PREFIX) :],
                comm_ns=iv.masked_sum(L, all_of=b),
                overlapped_ns=iv.masked_sum(L, all_of=b | C, none_of=N),
                exposed_ns=iv.masked_sum(L, all_of=b, none_of=C) + iv.masked_sum(L, all_of=b | C | N),
                count=int((w.cat == cc).sum()),
            )
        )
    return parts, tuple(colls)


def _by_category(w: _Work, labels: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Per category: union of its work in the window, and its summed work time."""
    by_cat: dict[str, int] = {}
    ktime: dict[str, int] = {}
    if w.cat.size:
        sums = np.bincount(w.cat, weights=(w.e - w.s), minlength=len(labels)).astype(np.int64)
        for k in np.unique(w.cat):
            m = w.cat == k
            by_cat[labels[k]] = iv.union_length(w.s[m], w.e[m])
            ktime[labels[k]] = int(sums[k])
    return by_cat, ktime


def _idle_causes(
    s: np.ndarray, e: np.ndarray, launch: np.ndarray, w0: int, w1: int, sync_u: Intervals
) -> tuple[IdleCauses, tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
    """Classify each device-idle gap inside the window by the work that ended it; and the gaps
    (starts, ends, cause code) for the gap log."""
    us, ue = iv.union(s, e)
    if us.size == 0:
        return IdleCauses(other_ns=w1 - w0, gaps=1 if w1 > w0 else 0), None
    gs = np.concatenate([[w0], ue])
    ge = np.concatenate([us, [w1]])
    ok = ge > gs
    gs, ge = gs[ok], ge[ok]
    if gs.size == 0:
        return IdleCauses(), None
    # the device work that ends each gap: earliest start at the gap end (latest launch wins ties)
    o = np.lexsort((-launch, s))
    ss, ll = s[o], launch[o]
    pos = np.clip(np.searchsorted(ss, ge, side="left"), 0, ss.size - 1)
    nxt_launch = np.where(ge < w1, ll[pos], -1)
    host = nxt_launch > gs
    sync_overlap = iv.busy_before(sync_u[0], sync_u[1], ge) - iv.busy_before(sync_u[0], sync_u[1], gs)
    wait = ~host & (sync_overlap > 0)
    other = ~host & ~wait
    length = ge - gs
    # host-bound gaps split at the launch call: before it the host was busy (CPU), after it
    # the launch itself was in flight (launch overhead)
    cut = np.where(host, np.clip(nxt_launch, gs, ge), ge)
    code = np.where(host, _HOST, np.where(wait, _SYNC, _OTHER)).astype(np.int8)
    launch_part = host & (cut < ge)
    gaps = (
        np.concatenate([gs, cut[launch_part]]),
        np.concatenate([np.where(host, cut, ge), ge[launch_part]]),
        np.concatenate([code, np.full(int(launch_part.sum()), _LAUNCH, np.int8)]),
    )
    causes = IdleCauses(
        host_bound_ns=int(length[host].sum()),
        wait_ns=int(length[wait].sum()),
        other_ns=int(length[other].sum()),
        gaps=int(gs.size),
    )
    return causes, gaps
