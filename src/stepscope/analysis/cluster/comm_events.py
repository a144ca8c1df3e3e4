"""Per-rank collective instances, the input of the cluster view (``view.py``).

One instance per communication kernel (device ranks) or per ``gloo:*`` annotation (CPU gloo
ranks, which record the collective's execution on gloo's threads; ``c10d::*`` ops when there is no
``gloo:*`` row). Each has: collective type, process group (recorded ``Process Group Name``; for
XLA ops the HLO instruction ``xla:<module>/<op>``, which every device runs; else the kernel's
stream ``stream:<id>`` (a communicator runs on its own stream); else ``default``), sequence number = its position among the rank's instances of the same
(group, type) in time order (the recorded args carry no sequence number, so order is the
fallback the issue allows), start/duration on the rank's own clock, message bytes and group size
when recorded (on the kernel, or on the CPU op that launched it, joined by External id), and the
step it belongs to.

Message bytes follow nccl-tests: max(in, out) elements x dtype size (all-reduce: the buffer;
all-gather: the gathered output; reduce-scatter: the input).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ...trace.commside import rows_with, side_columns
from ...trace.dictcol import dict_mask
from ...trace.schema import KIND_CODE as KIND
from .. import intervals as iv
from ..classify import COMM_PREFIX, Rules
from ..context import RankContext
from ..rankdata import RankData
from ..steps.breakdown import IdleGaps
from . import critical_walk
from .comm_args import group_names, object_array, side_args

DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "double": 8,
    "float64": 8,
    "int": 4,
    "int32": 4,
    "int64": 8,
    "long": 8,
    "int8": 1,
    "uint8": 1,
    "byte": 1,
    "char": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "c10::bfloat16": 2,
    "c10::half": 2,
}


_PER_INSTANCE = {"per_instance": True}  # field metadata: one entry per collective instance


@dataclass(frozen=True)
class CommEvents:
    group: np.ndarray = field(metadata=_PER_INSTANCE)  # object: process group name
    ctype: np.ndarray = field(metadata=_PER_INSTANCE)  # object: all_reduce, all_gather, ...
    seq: np.ndarray = field(metadata=_PER_INSTANCE)  # int64, per (group, ctype) on this rank
    start_ns: np.ndarray = field(metadata=_PER_INSTANCE)
    dur_ns: np.ndarray = field(metadata=_PER_INSTANCE)
    bytes: np.ndarray = field(metadata=_PER_INSTANCE)  # int64, -1 unknown
    group_size: np.ndarray = field(metadata=_PER_INSTANCE)  # int64, -1 unknown
    step: np.ndarray = field(metadata=_PER_INSTANCE)  # int64, -1 outside the steps
    # merged intervals of this rank's compute work and data loading (for the critical path), and
    # its step windows (start, end) on its own clock
    compute_iv: tuple[np.ndarray, np.ndarray] = (np.empty(0, np.int64), np.empty(0, np.int64))
    loader_iv: tuple[np.ndarray, np.ndarray] = (np.empty(0, np.int64), np.empty(0, np.int64))
    step_windows: tuple[np.ndarray, np.ndarray] = (np.empty(0, np.int64), np.empty(0, np.int64))
    host_bound_iv: tuple[np.ndarray, np.ndarray] = (
        np.empty(0, np.int64),
        np.empty(0, np.int64),
    )  # device idle, host late
    sync_wait_iv: tuple[np.ndarray, np.ndarray] = (
        np.empty(0, np.int64),
        np.empty(0, np.int64),
    )  # device idle, host in a sync
    launch_iv: tuple[np.ndarray, np.ndarray] = (
        np.empty(0, np.int64),
        np.empty(0, np.int64),
    )  # device idle, launch in flight
    # per instance: this rank's local time from its previous collective's end (or its step start)
    # to the instance's start, split as BOUND_KINDS; per step: from the last collective's end to
    # the step end. Computed from the intervals above by ``finalize``, which then drops them, so
    # what travels to the parent is O(instances), not O(kernels).
    before: np.ndarray | None = field(default=None, metadata=_PER_INSTANCE)
    tail: np.ndarray | None = None
    # from the recorded ``Process Group Ranks`` / ``In split size`` args when the reader kept them:
    # the group's global ranks and this rank's input split (None when not recorded); object arrays
    # of tuple[int, ...] | None per instance
    members: np.ndarray | None = field(default=None, metadata=_PER_INSTANCE)
    in_split: np.ndarray | None = field(default=None, metadata=_PER_INSTANCE)
    # the instance's row in RankData.dev (device ranks)
    dev_index: np.ndarray | None = field(default=None, metadata=_PER_INSTANCE)

    @property
    def size(self) -> int:
        return int(self.start_ns.size)


def per_instance_fields() -> tuple[str, ...]:
    """The ``CommEvents`` fields with one entry per collective instance (metadata ``per_instance``)."""
    return tuple(f.name for f in dataclasses.fields(CommEvents) if f.metadata.get("per_instance"))


BOUND_KINDS = critical_walk.KINDS
_EMPTY_IV = (np.empty(0, np.int64), np.empty(0, np.int64))


def _split(ev: CommEvents, lo: int, hi: int) -> list[int]:
    """[lo, hi) on this rank's clock split by bound type, in BOUND_KINDS order and precedence."""
    if hi <= lo:
        return [0] * len(BOUND_KINDS)
    covered, parts = 0, []
    acc_s, acc_e = np.empty(0, np.int64), np.empty(0, np.int64)
    for ivs in (ev.compute_iv, ev.loader_iv, ev.host_bound_iv, ev.launch_iv, ev.sync_wait_iv):
        s, e = ivs
        if s.size:
            a = int(np.searchsorted(e, lo, side="right"))
            b = int(np.searchsorted(s, hi, side="left"))
            s, e = iv.clip(s[a:b], e[a:b], lo, hi)
        acc_s, acc_e = np.concatenate([acc_s, s]), np.concatenate([acc_e, e])
        total = iv.union_length(acc_s, acc_e)
        parts.append(total - covered)
        covered = total
    return parts + [(hi - lo) - covered, 0, 0]  # no device ops on a CPU rank: communication, memcpy 0


def finalize(
    ev: CommEvents, walker: critical_walk.Walker | None = None, tail_ops: np.ndarray | None = None
) -> CommEvents:
    """Per-instance and per-step-tail breakdowns; the intervals are dropped. With a ``walker``
    (device ranks) each local stretch is the backward walk over the rank's dependency graph
    (``critical_walk``), ending at the collective's kernel (or, for a step's tail, at
    ``tail_ops[step]``, the op that ends the step); else (CPU ranks, tests) the rank's intervals
    split the stretch."""
    n, k = ev.size, len(BOUND_KINDS)
    ws, we = ev.step_windows
    before = np.zeros((n, k), np.int64)
    tail = np.zeros((ws.size, k), np.int64)
    order = np.argsort(ev.start_ns, kind="stable")
    last_end: dict[int, int] = {}
    for i in order:
        st = int(ev.step[i])
        lo = last_end.get(st, int(ws[st]) if 0 <= st < ws.size else int(ev.start_ns[i]))
        if walker is not None and ev.dev_index is not None:
            before[i] = walker.walk(int(ev.dev_index[i]), lo)
        else:
            before[i] = _split(ev, lo, int(ev.start_ns[i]))
        last_end[st] = max(last_end.get(st, lo), int(ev.start_ns[i] + ev.dur_ns[i]))
    for st in range(ws.size):
        lo = last_end.get(st, int(ws[st]))
        if walker is not None and tail_ops is not None and st < tail_ops.size and tail_ops[st] >= 0:
            tail[st] = walker.walk(int(tail_ops[st]), lo, until=int(we[st]))
        else:
            tail[st] = _split(ev, lo, int(we[st]))
    return dataclasses.replace(
        ev,
        before=before,
        tail=tail,
        compute_iv=_EMPTY_IV,
        loader_iv=_EMPTY_IV,
        host_bound_iv=_EMPTY_IV,
        launch_iv=_EMPTY_IV,
        sync_wait_iv=_EMPTY_IV,
    )


def _empty() -> CommEvents:
    z = np.empty(0, np.int64)
    return CommEvents(np.empty(0, object), np.empty(0, object), z, z, z, z, z, z)


def _bytes(in_n: np.ndarray, out_n: np.ndarray, dtype: list[str | None]) -> np.ndarray:
    size = np.array([DTYPE_BYTES.get((d or "").lower(), -1) for d in dtype], dtype=np.int64)
    n = np.maximum(in_n, out_n)
    return np.where((n >= 0) & (size > 0), n * np.maximum(size, 0), -1)


def _step_of(ts: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    if starts.size == 0:
        return np.full(ts.size, -1, np.int64)
    o = np.argsort(starts, kind="stable")
    pos = np.searchsorted(starts[o], ts, side="right") - 1
    ok = pos >= 0
    idx = np.where(ok, o[np.clip(pos, 0, None)], -1)
    inside = ok & (ts < ends[np.clip(idx, 0, None)])
    return np.where(inside, idx, -1)


def _seq(group: np.ndarray, ctype: np.ndarray, start: np.ndarray) -> np.ndarray:
    key = np.array([f"{g}\x00{c}" for g, c in zip(group, ctype)], dtype=object)
    o = np.lexsort((start, key.astype(str)))
    seq = np.empty(start.size, np.int64)
    ks = key[o]
    first = np.r_[True, ks[1:] != ks[:-1]] if ks.size else np.empty(0, bool)
    run_start = np.maximum.accumulate(np.where(first, np.arange(ks.size), 0)) if ks.size else np.empty(0, np.int64)
    seq[o] = np.arange(ks.size) - run_start
    return seq


def compute(ctx: RankContext) -> CommEvents:
    """This rank's collective instances with the intervals the critical path splits its local time by."""
    windows = (
        np.array([s.window_start_ns for s in ctx.steps], np.int64),
        np.array([s.window_end_ns for s in ctx.steps], np.int64),
    )
    return extract(
        ctx.data,
        ctx.events,
        ctx.dev_step,
        (ctx.spans.cpu_start, ctx.spans.cpu_end),
        ctx.rules,
        windows,
        ctx.dataloader_mask,
        ctx.idle_gaps,
        ctx.comm_args,
    )


def extract(
    rd: RankData,
    events: pa.Table,
    dev_step: np.ndarray,
    step_cpu: tuple[np.ndarray, np.ndarray],
    rules: Rules,
    step_windows: tuple[np.ndarray, np.ndarray],
    loader_mask: np.ndarray | None = None,
    idle: IdleGaps | None = None,
    comm_args: pa.Table | None = None,
) -> CommEvents:
    ev = _device(rd, events, dev_step, comm_args) if rd.dev.size else _host(rd, step_cpu, rules)
    if rd.dev.size:
        comp = rd.dev.group == 0
        cs, ce = iv.union(rd.dev.ts[comp], rd.dev.end[comp])
    else:
        h = rd.host
        is_comm = np.array([bool(rules.comm_ops.search(n)) for n in h.names], dtype=bool)[h.name_idx]
        work = (h.kind == KIND["cpu_op"]) & ~is_comm
        cs, ce = iv.union(h.ts[work], h.end[work])
    ls, le = (
        iv.union(rd.host.ts[loader_mask], rd.host.end[loader_mask])
        if loader_mask is not None and loader_mask.any()
        else (np.empty(0, np.int64), np.empty(0, np.int64))
    )
    ev = dataclasses.replace(ev, compute_iv=(cs, ce), loader_iv=(ls, le), step_windows=step_windows)
    if idle is not None:
        ev = dataclasses.replace(
            ev, host_bound_iv=idle.host_bound, sync_wait_iv=idle.sync_wait, launch_iv=idle.launch_overhead
        )
    if rd.dev.size and ev.dev_index is not None:
        # the op that ends each step: the step's tail walks back from it
        n_steps = step_windows[0].size
        tail_ops = np.full(n_steps, -1, np.int64)
        ok = (dev_step >= 0) & (dev_step < n_steps)
        if ok.any():
            idx = np.flatnonzero(ok)
            o = np.lexsort((rd.dev.end[idx], dev_step[idx]))
            last = np.r_[dev_step[idx][o][1:] != dev_step[idx][o][:-1], True]
            tail_ops[dev_step[idx][o][last]] = idx[o][last]
        return finalize(ev, critical_walk.Walker(rd, (ls, le)), tail_ops)
    return finalize(ev)


def _side(comm: pa.Table | None, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, list, np.ndarray, list]:
    """The recorded message sizes, dtype, group size and process group of ``rows`` (-1 / None unknown)."""
    c = side_columns(comm, ("in_msg_nelems", "out_msg_nelems", "msg_dtype", "group_size", "pg_name"), rows)
    return (
        c["in_msg_nelems"].to_numpy().copy(),
        c["out_msg_nelems"].to_numpy().copy(),
        c["msg_dtype"].to_pylist(),
        c["group_size"].to_numpy().astype(np.int64),
        c["pg_name"].to_pylist(),
    )


def _device(rd: RankData, events: pa.Table, dev_step: np.ndarray, comm_args: pa.Table | None = None) -> CommEvents:
    d = rd.dev
    sel = np.flatnonzero(d.group == 1)  # the communication categories
    if sel.size == 0 or d.rows is None:
        return _empty()
    rows = d.rows[sel].astype(np.int64)
    in_n, out_n, dtype, gsize, pg = _side(comm_args, rows)
    ext = events["external_id"].take(pa.array(rows)).to_numpy()
    arg_row = rows.copy()  # the row whose side args describe each instance
    # args missing on the kernel: take them from the launching CPU op (same External id)
    host_rows = rows_with(comm_args)
    if host_rows.size:
        kinds = events["kind"].take(pa.array(host_rows))
        host_rows = host_rows[dict_mask(kinds, lambda k: k in ("cpu_op", "user_annotation"))]
    if host_rows.size:
        hext = events["external_id"].take(pa.array(host_rows)).to_numpy()
        o = np.argsort(hext, kind="stable")
        hext_s = hext[o]
        pos = np.clip(np.searchsorted(hext_s, ext), 0, hext_s.size - 1)
        hit = (ext >= 0) & (hext_s[pos] == ext) & (in_n < 0)
        if hit.any():
            src = host_rows[o[pos[hit]]]
            h_in, h_out, h_dtype, h_gsize, h_pg = _side(comm_args, src)
            in_n[hit], out_n[hit], gsize[hit] = h_in, h_out, h_gsize
            for k, j in enumerate(np.flatnonzero(hit)):
                dtype[j], pg[j] = h_dtype[k], pg[j] or h_pg[k]
            arg_row[hit] = src
    # no recorded process group: the stream stands in (each NCCL communicator runs on its own stream);
    # XLA collectives are one HLO instruction run by every device: the instruction is the group
    group = group_names(object_array(pg), d.stream[sel], d.xla, sel)
    kinds, kind_of = np.unique(d.categories.codes[sel], return_inverse=True)  # the prefix cut once per kind
    ctype = np.array([d.categories.labels[c][len(COMM_PREFIX) :] for c in kinds], dtype=object)[kind_of]
    start = d.ts[sel]
    members = in_split = None
    if comm_args is not None and comm_args.num_rows:
        members, in_split = side_args(comm_args, rows, arg_row)
    return CommEvents(
        group,
        ctype,
        _seq(group, ctype, start),
        start,
        (d.end - d.ts)[sel],
        _bytes(in_n, out_n, dtype),
        gsize,
        dev_step[sel].astype(np.int64),
        members=members,
        in_split=in_split,
        dev_index=sel.astype(np.int64),
    )


def _host(rd: RankData, step_cpu: tuple[np.ndarray, np.ndarray], rules: Rules) -> CommEvents:
    h = rd.host
    is_gloo = np.array([n.startswith("gloo:") for n in h.names], dtype=bool)[h.name_idx]
    sel = np.flatnonzero(is_gloo & (h.kind == KIND["user_annotation"]))
    if sel.size == 0:
        is_comm = np.array([bool(rules.comm_ops.search(n)) for n in h.names], dtype=bool)[h.name_idx]
        sel = np.flatnonzero(is_comm & (h.kind == KIND["cpu_op"]))
    if sel.size == 0:
        return _empty()
    names = [h.names[i] for i in h.name_idx[sel]]
    ctype = np.array([rules.collective_of(n) for n in names], dtype=object)
    group = np.full(sel.size, "default", dtype=object)
    start = h.ts[sel]
    neg = np.full(sel.size, -1, np.int64)
    return CommEvents(
        group, ctype, _seq(group, ctype, start), start, h.end[sel] - start, neg, neg.copy(), _step_of(start, *step_cpu)
    )
