"""Rank-level statistics: top kernels/CPU ops, launch statistics, per-stream idle, step fluctuation.

Quantiles use the nearest-rank method: ``p_q = sorted[ceil(q * n) - 1]``.
"""

from __future__ import annotations

import numpy as np

from ...trace.schema import KIND_CODE as KIND
from .. import intervals as iv
from ..rankdata import RankData
from .results import CollectiveTime, IdleCauses, LaunchStats, OpStat, StepBreakdown, StepFlag, StepStats, StreamIdle

#: runtime calls that launch one kernel (CUDA, HIP, driver API), and with graph launches, any launch
KERNEL_LAUNCH_NAMES = ("LaunchKernel", "LaunchCooperativeKernel", "ModuleLaunchKernel", "LaunchKernelExC")
_LAUNCH_NAMES = (*KERNEL_LAUNCH_NAMES, "GraphLaunch")


def op_stats(
    name_idx: np.ndarray,
    names: list[str],
    dur: np.ndarray,
    categories: np.ndarray | None,
    step_total_ns: int,
    top_k: int,
    labels: np.ndarray | None = None,
) -> tuple[OpStat, ...]:
    """The ``top_k`` names by total time. ``categories`` is a label per row, or a code into
    ``labels`` per row when ``labels`` is given."""
    if name_idx.size == 0:
        return ()
    # totals and counts per name in one pass; only the top names' rows are sorted (percentiles)
    all_counts = np.bincount(name_idx)
    all_totals = np.bincount(name_idx, weights=dur)
    seen = np.flatnonzero(all_counts)
    top_names = seen[np.argsort(-all_totals[seen], kind="stable")[:top_k]]
    # the top names' durations sorted by (name, duration) with one sort of a combined key:
    # key = position of the name among the top * span + (duration - the least duration)
    pos = np.full(all_counts.size, -1, np.int64)
    pos[top_names] = np.arange(top_names.size)
    rows = np.flatnonzero(pos[name_idx] >= 0)
    dr = np.asarray(dur[rows]).astype(np.int64)
    lo = int(dr.min()) if dr.size else 0
    span = int(dr.max()) - lo + 1 if dr.size else 1
    key = np.sort(pos[name_idx[rows]] * span + (dr - lo))
    slot, d = key // span, key % span + lo
    _, first, counts = np.unique(slot, return_index=True, return_counts=True)
    uniq = top_names[slot[first]]
    totals = np.add.reduceat(d, first)
    p50 = d[first + np.ceil(0.50 * counts).astype(np.int64) - 1]
    p99 = d[first + np.ceil(0.99 * counts).astype(np.int64) - 1]
    cat_of = None
    if categories is not None:
        # one row of each top name (a name has one category)
        row_of = np.empty(all_counts.size, np.int64)
        row_of[name_idx[rows[::-1]]] = rows[::-1]
        cat_of = np.asarray(categories)[row_of[uniq]]
        if labels is not None:
            cat_of = labels[cat_of]
    best = np.argsort(-totals, kind="stable")
    out = []
    for j in best:
        out.append(
            OpStat(
                name=names[uniq[j]],
                category=str(cat_of[j]) if cat_of is not None else "cpu_op",
                count=int(counts[j]),
                total_ns=int(totals[j]),
                mean_ns=float(totals[j] / counts[j]),
                p50_ns=int(p50[j]),
                p99_ns=int(p99[j]),
                share_of_step_ratio=float(totals[j] / step_total_ns) if step_total_ns > 0 else 0.0,
            )
        )
    return tuple(out)


def top_kernels(rd: RankData, dev_step: np.ndarray, step_total_ns: int, top_k: int) -> tuple[OpStat, ...]:
    d = rd.dev
    m = dev_step >= 0
    labels = np.asarray(d.categories.labels + ("",), dtype=object)
    return op_stats(d.name_idx[m], d.names, (d.end - d.ts)[m], d.categories.codes[m], step_total_ns, top_k, labels)


def top_cpu_ops(
    rd: RankData, cpu_start: np.ndarray, cpu_end: np.ndarray, step_total_ns: int, top_k: int
) -> tuple[OpStat, ...]:
    h = rd.host
    sel = np.flatnonzero(h.kind == KIND["cpu_op"])
    if cpu_start.size:
        ts = h.ts[sel]
        i = np.searchsorted(cpu_start, ts, side="right") - 1
        sel = sel[(i >= 0) & (ts < cpu_end[np.maximum(i, 0)])]
    return op_stats(h.name_idx[sel], h.names, h.end[sel] - h.ts[sel], None, step_total_ns, top_k)


def launch_stats(rd: RankData, dev_step: np.ndarray, short_threshold_ns: int = 10_000) -> LaunchStats:
    d = rd.dev
    k = (d.kind == KIND["kernel"]) & (dev_step >= 0)
    matched = k & (d.launch_ts >= 0)
    delay = np.sort((d.ts - d.launch_ts)[matched])
    dur = (d.end - d.ts)[k]
    short = dur < short_threshold_ns
    h = rd.host
    is_launch = np.array([any(x in n for x in _LAUNCH_NAMES) for n in h.names], dtype=bool)[h.name_idx] & (
        h.kind == KIND["runtime"]
    )
    ldur = (h.end - h.ts)[is_launch]
    is_graph = np.array(["GraphLaunch" in n for n in h.names], dtype=bool)[h.name_idx] & (h.kind == KIND["runtime"])
    n = delay.size
    return LaunchStats(
        kernels=int(k.sum()),
        matched=int(n),
        delay_p50_ns=int(delay[int(np.ceil(0.5 * n)) - 1]) if n else 0,
        delay_p99_ns=int(delay[int(np.ceil(0.99 * n)) - 1]) if n else 0,
        delay_mean_ns=float(delay.mean()) if n else 0.0,
        short_kernels=int(short.sum()),
        short_kernel_time_ns=int(dur[short].sum()),
        short_threshold_ns=short_threshold_ns,
        launch_call_mean_ns=float(ldur.mean()) if ldur.size else 0.0,
        graph_launches=int(is_graph.sum()),
    )


def stream_idle(rd: RankData, dev_step: np.ndarray) -> tuple[StreamIdle, ...]:
    """Idle gaps per stream inside the steps, with causes (see :class:`IdleCauses`).

    A gap is between consecutive work on the same stream in the same step. If the work after the
    gap was launched after the gap began, the stream was waiting for the host; if it was
    launched earlier and other streams were busy for most of the gap, it waited on another
    stream; otherwise "other".
    """
    d = rd.dev
    m = dev_step >= 0
    if not m.any():
        return ()
    dv, st, s, e, lt, sp = d.device[m], d.stream[m], d.ts[m], d.end[m], d.launch_ts[m], dev_step[m]
    us, ue = iv.union(s, e)
    o = np.lexsort((s, sp, st, dv))
    dv, st, s, e, lt, sp = dv[o], st[o], s[o], e[o], lt[o], sp[o]
    same = np.zeros(s.size, bool)
    same[1:] = (dv[1:] == dv[:-1]) & (st[1:] == st[:-1]) & (sp[1:] == sp[:-1])
    prev_end = np.empty_like(e)
    prev_end[0] = e[0]
    prev_end[1:] = e[:-1]
    gap = np.where(same, s - prev_end, 0)
    g = gap > 0
    gs, ge = prev_end[g], s[g]
    host = lt[g] > gs
    others_busy = iv.busy_before(us, ue, ge) - iv.busy_before(us, ue, gs)
    wait = ~host & (others_busy * 2 > (ge - gs))
    other = ~host & ~wait
    # rows are sorted by (device, stream): a new pair starts where either changes
    first = np.ones(s.size, bool)
    first[1:] = (dv[1:] != dv[:-1]) | (st[1:] != st[:-1])
    inv = np.cumsum(first) - 1
    uk = np.stack([dv[first], st[first]], axis=1)
    busy = np.bincount(inv, weights=(e - s), minlength=len(uk))
    glen = (ge - gs).astype(np.float64)
    ginv = inv[g]

    def per(mask: np.ndarray) -> np.ndarray:
        return np.bincount(ginv[mask], weights=glen[mask], minlength=len(uk))

    hb, wt, ot = per(host), per(wait), per(other)
    ng = np.bincount(ginv, minlength=len(uk))
    out = []
    for j, (dev_id, stream_id) in enumerate(uk):
        out.append(
            StreamIdle(
                device=int(dev_id),
                stream=int(stream_id),
                busy_ns=int(busy[j]),
                idle_ns=int(hb[j] + wt[j] + ot[j]),
                causes=IdleCauses(host_bound_ns=int(hb[j]), wait_ns=int(wt[j]), other_ns=int(ot[j]), gaps=int(ng[j])),
            )
        )
    return tuple(out)


_COMPONENTS = (
    "compute_ns",
    "exposed_comm_ns",
    "exposed_memcpy_ns",
    "idle_input_wait_ns",
    "idle_host_bound_ns",
    "idle_other_ns",
    "dataloader_ns",
)


def _components(s: StepBreakdown) -> np.ndarray:
    return np.array(
        [
            s.compute_ns,
            s.exposed_comm_ns,
            s.exposed_memcpy_ns,
            s.idle_causes.input_wait_ns,
            s.idle_causes.host_bound_ns,
            s.idle_ns - s.idle_causes.input_wait_ns - s.idle_causes.host_bound_ns,
            s.cpu.dataloader_ns,
        ],
        dtype=np.float64,
    )


def step_stats(steps: tuple[StepBreakdown, ...], threshold_ratio: float = 0.10) -> StepStats:
    """Mean/median/spread of step time; steps over ``(1 + threshold) * median`` are flagged with the
    component (compute, exposed comm/memcpy, input-wait, host-bound or other idle, data loading) that grew
    most relative to its median over all steps."""
    if not steps:
        return StepStats(0, 0.0, 0.0, 0, 0, 0.0, 0.0, ())
    t = np.array([s.step_time_ns for s in steps], dtype=np.float64)
    med = float(np.median(t))
    comps = np.stack([_components(s) for s in steps])
    comp_med = np.median(comps, axis=0)
    flags = []
    for i, s in enumerate(steps):
        if med > 0 and t[i] > (1 + threshold_ratio) * med:
            growth = comps[i] - comp_med
            j = int(np.argmax(growth))
            flags.append(StepFlag(s.name, int(t[i]), float(t[i] / med - 1), _COMPONENTS[j], int(growth[j])))
    mean = float(t.mean())
    std = float(t.std())
    return StepStats(
        count=len(steps),
        mean_ns=mean,
        median_ns=med,
        min_ns=int(t.min()),
        max_ns=int(t.max()),
        std_ns=std,
        cv_ratio=std / mean if mean else 0.0,
        flagged=tuple(flags),
    )


def collective_totals(steps: tuple[StepBreakdown, ...]) -> tuple[CollectiveTime, ...]:
    """Per collective type, sums over the steps, largest communication time first."""
    acc: dict[str, list[int]] = {}
    for s in steps:
        for c in s.collectives:
            a = acc.setdefault(c.type, [0, 0, 0, 0])
            a[0] += c.comm_ns
            a[1] += c.overlapped_ns
            a[2] += c.exposed_ns
            a[3] += c.count
    out = [
        CollectiveTime(type=k, comm_ns=v[0], overlapped_ns=v[1], exposed_ns=v[2], count=v[3]) for k, v in acc.items()
    ]
    return tuple(sorted(out, key=lambda c: -c.comm_ns))
