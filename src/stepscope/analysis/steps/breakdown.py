"""Per-step time accounting by interval unions over all streams of a rank.

The step windows partition the device timeline (``windows.step_windows``); all device work in a
window counts, whoever launched it, clipped to the window. Within the step window ``W`` let C = union of compute kernels, M = union of communication, Y =
union of memcpy/memset. Then (``|.|`` = total length)::

    compute_ns        = |C|
    exposed_comm_ns   = |M \\ C|
    exposed_memcpy_ns = |Y \\ (C u M)|
    idle_ns           = |W| - |C u M u Y|
    comm_ns = |M|,  overlapped_comm_ns = |M n C|

so ``compute + exposed_comm + exposed_memcpy + idle == |W|`` exactly, in integer ns; the idle
causes (``idle.py``) sum to ``idle_ns``. ``spill_over_ns`` = the union, in W, of the work launched
by earlier steps.

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
from ..classify import COMM_PREFIX, Categories, Rules
from ..rankdata import RankData
from . import idle
from .idle import GapLog, IdleGaps, NextWork
from .results import CollectiveTime, CpuStep, StepBreakdown
from .warmup import flag_warmup
from .windows import StepSpans, StepWindows

_DATALOADER = re.compile(r"enumerate\(DataLoader\)|DataLoader.*__next__|_DataLoaderIter|dataloader", re.I)
_OPTIMIZER = re.compile(r"^Optimizer\.step|optimizer\.step|^optimizer_step", re.I)
#: compiling on the host: torch.compile's ``<phase> (dynamo_timed)`` ranges (recorded while profiling),
#: runtime compilation and module loads (NVRTC, hipRTC, CUDA/HIP module loads, Ascend op compile)
_COMPILE = re.compile(
    r"\(dynamo_timed\)$|^nvrtcCompileProgram|^hiprtcCompileProgram|^cuModuleLoadData|^cuLinkComplete"
    r"|^hipModuleLoadData|^aclopCompile",
    re.I,
)


def _name_mask(names: list[str], pat: re.Pattern[str]) -> np.ndarray:
    return np.array([bool(pat.search(n)) for n in names], dtype=bool)


def _host_time_per_step(s: np.ndarray, e: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every CPU step ``[lo, hi)`` at once: the union length of the ranges ``[s, e)`` clipped
    to it, and how many of them it clips to something non-empty. With ``lo < hi``, a non-empty
    range ending at or before ``lo`` also starts before ``hi``, so that count is
    ``#(s < hi) - #(e <= lo)`` over the non-empty ranges."""
    busy = np.maximum(iv.Covered.of(s, e).between(lo, hi), 0)
    k = e > s
    s_sorted, e_sorted = np.sort(s[k]), np.sort(e[k])
    count = np.searchsorted(s_sorted, hi, side="left") - np.searchsorted(e_sorted, lo, side="right")
    return busy, np.where(hi > lo, count, 0)


@dataclass(frozen=True, kw_only=True)
class Accounting:
    """The step accounting of one rank: each step's breakdown, the idle gaps behind its idle causes,
    and the host rows it reads as data loading and optimizer."""

    steps: tuple[StepBreakdown, ...]
    idle_gaps: IdleGaps
    dataloader_mask: np.ndarray  # over host rows
    optimizer_mask: np.ndarray  # over host rows
    device_busy_ns: int  # union of all device work
    outside_steps_ns: int  # the part of it outside every step window


def account(
    rd: RankData, spans: StepSpans, dev_step: np.ndarray, win: StepWindows, rules: Rules, skip_steps: int | None
) -> Accounting:
    """Every step's breakdown (warm-up steps flagged, ``warmup.py``) and the rank's idle gaps."""
    acct = StepAccountant(rd, spans, dev_step, win, rules)
    steps = flag_warmup(tuple(acct.step(i) for i in range(len(spans.names))), skip_steps)
    busy, outside = acct.outside_steps()
    return Accounting(
        steps=steps,
        idle_gaps=acct.idle_gaps(),
        dataloader_mask=acct.dl_mask,
        optimizer_mask=acct.opt_mask,
        device_busy_ns=busy,
        outside_steps_ns=outside,
    )


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
    step_name = np.array([n.startswith("ProfilerStep#") for n in h.names], dtype=bool)[h.name_idx]
    is_op = ((h.kind == KIND["cpu_op"]) | ((h.kind == KIND["user_annotation"]) & comm_name)) & ~step_name
    idx = np.flatnonzero(is_op)
    top = iv.top_level(h.tid[idx], h.ts[idx], h.end[idx])
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
    communication, 2 memory), category code, nested-communication flag, and whether an earlier
    step launched them (spill-over)."""

    s: np.ndarray
    e: np.ndarray
    group: np.ndarray
    cat: np.ndarray
    nested: np.ndarray
    earlier: np.ndarray
    w0: int
    w1: int

    def clipped(self) -> _Work:
        s, e = np.maximum(self.s, self.w0), np.minimum(self.e, self.w1)
        k = e > s
        return _Work(s[k], e[k], self.group[k], self.cat[k], self.nested[k], self.earlier[k], self.w0, self.w1)


class StepAccountant:
    """Computes :class:`StepBreakdown` for each step of one rank."""

    def __init__(self, rd: RankData, spans: StepSpans, dev_step: np.ndarray, win: StepWindows, rules: Rules) -> None:
        self.rd, self.spans, self.win, self.dev_step = rd, spans, win, dev_step
        h, d = rd.host, rd.dev
        self.cpu_work = _cpu_work(rd, rules) if d.size == 0 else None
        self.gap_log: list[GapLog] = []
        self.dl_mask = _name_mask(h.names, _DATALOADER)[h.name_idx] & (h.kind != KIND["runtime"])
        self.opt_mask = _name_mask(h.names, _OPTIMIZER)[h.name_idx] & (h.kind != KIND["runtime"])
        compile_mask = _name_mask(h.names, _COMPILE)[h.name_idx]
        # category labels -> small int codes, once
        cats = Categories.of(self.cpu_work.ctype) if self.cpu_work is not None else d.categories
        self.code = cats.codes
        self.labels: list[str] = list(cats.labels)
        # device rows by start, with the running max of their ends: the rows overlapping a window
        # are a contiguous run of this order (then filtered by end)
        self._order = np.argsort(d.ts, kind="stable")
        self._starts = d.ts[self._order]
        self._run_end = np.maximum.accumulate(d.end[self._order]) if d.size else d.end
        self._own = np.bincount(dev_step[dev_step >= 0], minlength=len(spans.names))
        self.next_work = NextWork.of(d.ts, d.launch_ts)
        if self.cpu_work is not None:
            cw = self.cpu_work
            self.next_work = NextWork.of(h.ts[cw.sel], np.full(cw.sel.size, -1, np.int64))
        # host ranges per figure, sorted by start, for per-step windows by binary search
        lo, hi = spans.cpu_start.astype(np.int64), spans.cpu_end.astype(np.int64)
        self._host_time = {
            k: _host_time_per_step(h.ts[m], h.end[m], lo, hi)
            for k, m in (
                ("dl", self.dl_mask),
                ("opt", self.opt_mask),
                ("sync", rd.sync_mask),
                ("compile", compile_mask),
            )
        }
        self.sync_u = iv.Covered.of(h.ts[rd.sync_mask], h.end[rd.sync_mask])
        self.loader_u = iv.Covered.of(h.ts[self.dl_mask], h.end[self.dl_mask])
        active = (h.kind == KIND["cpu_op"]) | (h.kind == KIND["runtime"]) | self.dl_mask | compile_mask
        self.host_u = iv.Covered.of(h.ts[active], h.end[active])
        self.host_u_any = bool(active.any())

    def _silent(self, us: np.ndarray, ue: np.ndarray, w0: int, w1: int) -> int:
        """Idle in gaps the host was silent through; 0 for a trace of device work only (a
        kernels-only rocprofv3 or CUPTI trace records no host activity to be silent)."""
        if not self.host_u_any:
            return 0
        return idle.silent_ns(us, ue, w0, w1, self.host_u)

    def _work(self, i: int, c0: int, c1: int) -> tuple[_Work, str]:
        cw = self.cpu_work
        if cw is not None:
            h = self.rd.host
            s, e = h.ts[cw.sel], h.end[cw.sel]
            k = (e > c0) & (s < c1)
            group = np.where(cw.is_comm[k], 1, 0).astype(np.int8)
            return _Work(s[k], e[k], group, self.code[k], cw.nested[k], np.zeros(int(k.sum()), bool), c0, c1), "cpu"
        d = self.rd.dev
        w0, w1 = int(self.win.start[i]), int(self.win.end[i])
        a = int(np.searchsorted(self._run_end, w0, side="right"))
        b = int(np.searchsorted(self._starts, w1, side="left"))
        rows = self._order[a:b]
        rows = rows[d.end[rows] > w0]
        st = self.dev_step[rows]
        earlier = (st >= 0) & (st < i)
        nested = np.zeros(rows.size, bool)
        work = _Work(d.ts[rows], d.end[rows], d.group[rows], self.code[rows], nested, earlier, w0, w1)
        return work, "device" if self.win.own[i] else "cpu"

    def step(self, i: int) -> StepBreakdown:
        sp = self.spans
        c0, c1 = int(sp.cpu_start[i]), int(sp.cpu_end[i])
        raw, source = self._work(i, c0, c1)
        w = raw.clipped()
        parts, colls = _partition(w, self.labels)
        by_cat, ktime = _by_category(w, self.labels)
        us, ue = iv.union(w.s, w.e)
        causes, gaps = idle.idle_causes(us, ue, w.w0, w.w1, self.next_work, self.sync_u, self.loader_u)
        if gaps is not None:
            self.gap_log.append(gaps)
        return StepBreakdown(
            name=sp.names[i],
            step_time_ns=w.w1 - w.w0,
            window_start_ns=w.w0,
            window_end_ns=w.w1,
            cpu_step_ns=c1 - c0,
            cpu_start_ns=c0,
            compute_ns=parts["compute_ns"],
            comm_ns=parts["comm_ns"],
            overlapped_comm_ns=parts["overlapped_comm_ns"],
            exposed_comm_ns=parts["exposed_comm_ns"],
            memcpy_ns=parts["memcpy_ns"],
            exposed_memcpy_ns=parts["exposed_memcpy_ns"],
            idle_ns=parts["idle_ns"],
            by_category_ns=by_cat,
            kernel_time_by_category_ns=ktime,
            collectives=colls,
            idle_causes=causes,
            cpu=self._cpu(i, causes.host_bound_ns, self._silent(us, ue, w.w0, w.w1)),
            device_events=int(self._own[i]) if self.cpu_work is None else 0,
            window_source=source,
            spill_over_ns=iv.union_length(w.s[w.earlier], w.e[w.earlier]),
        )

    def idle_gaps(self) -> IdleGaps:
        log = self.gap_log
        return IdleGaps(
            host_bound=idle.merged(log, idle.HOST),
            sync_wait=idle.merged(log, idle.SYNC),
            other=idle.merged(log, idle.OTHER),
            launch_overhead=idle.merged(log, idle.LAUNCH),
        )

    def outside_steps(self) -> tuple[int, int]:
        """(device busy time, the part of it outside every step window): unions of all device work."""
        d = self.rd.dev
        if self.cpu_work is not None or d.size == 0:
            return 0, 0
        busy = iv.union_length(d.ts, d.end)
        if self.win.start.size == 0:
            return busy, busy
        s, e = iv.clip(d.ts, d.end, int(self.win.start[0]), int(self.win.end[-1]))
        return busy, busy - iv.union_length(s, e)

    def _cpu(self, i: int, cpu_bound_ns: int, silent_ns: int) -> CpuStep:
        t = self._host_time
        return CpuStep(
            dataloader_ns=int(t["dl"][0][i]),
            optimizer_ns=int(t["opt"][0][i]),
            sync_ns=int(t["sync"][0][i]),
            sync_calls=int(t["sync"][1][i]),
            cpu_bound_ns=cpu_bound_ns,
            silent_ns=silent_ns,
            compile_ns=int(t["compile"][0][i]),
        )


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
        # one union for all categories: each category's intervals shifted into its own span of
        # the time axis (the work is clipped to the window, so spans never overlap)
        shift = w.cat.astype(np.int64) * (w.w1 - w.w0 + 1) - w.w0
        us, ue = iv.union(w.s + shift, w.e + shift)
        span = w.w1 - w.w0 + 1
        union = np.bincount(us // span, weights=ue - us, minlength=len(labels)).astype(np.int64)
        for k in np.flatnonzero(np.bincount(w.cat, minlength=len(labels))):
            by_cat[labels[k]] = int(union[k])
            ktime[labels[k]] = int(sums[k])
    return by_cat, ktime
