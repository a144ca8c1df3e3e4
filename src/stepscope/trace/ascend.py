"""Ascend NPU timelines (torch_npu / MindSpore profiler ``trace_view.json``) -> the event table.

The file is Chrome trace-event JSON (a top-level list; timestamps are strings with sub-microsecond
digits, parsed exactly to the nanosecond by the Kineto readers), so those read it; this module then
gives its rows their meaning from the process each belongs to (``process_name`` metadata):

- ``Ascend Hardware``: device work. Each slice is an NPU task; its thread is the stream
  (``Stream <id>``); its ``Task Type`` arg (AI_CORE, AI_VECTOR_CORE, MIX_AIC, AI_CPU, HCCL...) is
  in ``cat``. Copy tasks (MEMCPY_*, SDMA, PCIe DMA) become ``memcpy`` rows; event and notify
  record/wait tasks ``sync`` rows (the stream waits, the cores do nothing); the rest ``kernel``.
- ``Communication`` (``HCCL`` before CANN 8): HCCL. Each communicator's op lane (thread
  "Group <name> Communication") holds its operators (``hcom_allReduce__428_0_1``): these become
  device rows on a stream of their own (``COMM_STREAM_BASE`` + thread id), named as HCCL names
  them, so communication is recognized by name. The "Plane N" lanes hold the operators' tasks
  (Memcpy, Notify_Wait, RDMASend), which the operators stand for: dropped. The same tasks appear
  again on the NPU's HCCL streams under runtime names (NOTIFY_WAIT, MEMCPY_ASYNC): a stream whose
  task time lies at least half inside the operators is HCCL's, and its tasks are dropped too, so
  nothing counts twice (msprof's own overlap analysis also takes the operators' intervals).
- ``CANN``: the host runtime (AscendCL / aclnn calls): ``runtime`` rows. A ``HostToDevice`` flow
  joins a task to the call enclosing the flow's start: both get one ``correlation`` id.
- ``Python`` (and any other process): host rows as Kineto gives them (``cpu_op``,
  ``ProfilerStep#N``). An ``async_npu`` flow joins a task to the innermost operator enclosing
  the flow's start, torch_npu's own ``aclnn*`` launch records aside (the ATen operator around one
  holds the shapes): both get one ``external_id``.
- ``Overlap Analysis``: msprof's own computing / communication / free split. Not device work: its
  totals are kept in the header (``ascend_overlap_ns``) to cross-check ours, and its rows dropped.
Beside the timeline: HCCL's own timing of each collective (``communication.json``: wait vs transit,
``ascend_comm.py``), its links (``communication_matrix.json``, ``ascend_matrix.py``) and msprof's step split (``step_trace_time.csv``, ``ascend_steps.py``) are kept in
the header; ``kernel_details.csv`` gives the tasks their shapes and cores (``ascend_kernels.py``). The flows used (and torch_npu's ``async_task_queue`` enqueue -> dequeue flows) are dropped, as the
Kineto readers drop CUDA launch flows. The device id is the ``NPU <id>`` label of the hardware
process, else 0; the rank comes from ``profiler_info_<rank>.json`` beside the output folder.
Layout: Ascend's profiler documentation and torch_npu's ``profiler/analysis`` writers.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..analysis import intervals as iv
from .ascend_comm import HCCL_KEY, read_hccl_ops
from .ascend_files import rank_header
from .ascend_hccl_args import operator_args, side_table
from .ascend_kernels import FILE as DETAILS_FILE
from .ascend_kernels import counter_ranges, join_kernel_details, read_kernel_details
from .ascend_matrix import LINKS_KEY, read_hccl_links
from .ascend_steps import STEPS_KEY, read_step_trace
from .chrome_meta import ProcessMeta
from .columns import FileRead
from .counters import CounterRange
from .dictcol import lookup_ints, per_value
from .schema import KIND_CODE, Kind

ASCEND_FORMAT = "ascend"
DEVICE_PROCESS = "Ascend Hardware"
RUNTIME_PROCESS = "CANN"
OVERLAP_PROCESS = "Overlap Analysis"
#: process names that mark a file as an Ascend timeline
MARKER_PROCESSES = frozenset((DEVICE_PROCESS, RUNTIME_PROCESS, OVERLAP_PROCESS))
#: flow categories that only link rows (their links become ids) and are then dropped
_LINK_FLOWS = ("HostToDevice", "async_npu", "async_task_queue")
COMM_PROCESSES = frozenset(("Communication", "HCCL"))  # "HCCL" in CANN before 8.0
#: a communicator's op lane as a stream: far above the NPU's own stream ids, so never one of them
COMM_STREAM_BASE = 1 << 32
_COMM_OP_NAME = re.compile(r"^(hcom_|hccl)", re.I)
_COPY_TASK = re.compile(r"MEMCPY|SDMA|DMA", re.I)
_WAIT_TASK = re.compile(r"^(EVENT|NOTIFY|CAPTURE)_(WAIT|RECORD|RESET)|^(WRITE_VALUE|PLACE_HOLDER|CONDITION)_SQE$", re.I)
_EXCLUDED_TASK = re.compile(r"^(PROFILING_(ENABLE|DISABLE)|WRITE_BACK|INVALID|END_SQE)$", re.I)
_NPU_LABEL = re.compile(r"^\s*NPU\s*(\d{1,6})\s*$")
_MAX_STEP_BACK = 8  # enclosing-slice search: how many earlier slices of a thread to try


def is_ascend(meta: dict[int, ProcessMeta]) -> bool:
    """Whether a trace's process names are an Ascend profiler's (its NPU rows' process)."""
    return any(m.name == DEVICE_PROCESS for m in meta.values())


def to_ascend(fr: FileRead, meta: dict[int, ProcessMeta]) -> FileRead:
    """A Kineto-read Ascend timeline with its rows given their Ascend meaning (see the module)."""
    t = fr.table
    pid, tid = t["pid"].to_numpy(), t["tid"].to_numpy()
    kind = _kind_codes(t)
    flow = kind == KIND_CODE["flow"]
    on_hw = _in_process(pid, meta, (DEVICE_PROCESS,)) & ~flow
    on_rt = _in_process(pid, meta, (RUNTIME_PROCESS,)) & ~flow
    on_comm = _in_process(pid, meta, COMM_PROCESSES) & ~flow & (kind != KIND_CODE["instant"])
    comm_op = on_comm & _op_lane(t, meta)
    hw_kind = _device_kinds(t)
    dropped_hw = on_hw & ((hw_kind < 0) | _under_comm_ops(t, on_hw, comm_op))
    on_dev = (on_hw & ~dropped_hw) | comm_op
    kind = np.where(on_hw & ~dropped_hw, hw_kind, kind)
    kind = np.where(comm_op, np.int8(KIND_CODE["kernel"]), kind)
    kind = np.where(on_rt & (kind == KIND_CODE["other"]), np.int8(KIND_CODE["runtime"]), kind)
    device = np.where(on_dev, _device_ids(pid, meta), -1).astype(np.int32)
    stream = np.where(comm_op, COMM_STREAM_BASE + tid, np.where(on_dev, tid, -1))
    corr, ext = _links(t, kind, on_dev, on_rt)
    ov_rows = _in_process(pid, meta, (OVERLAP_PROCESS,))
    overlap = _overlap_totals(t, ov_rows)
    drop = ov_rows | dropped_hw | (on_comm & ~comm_op) | (flow & _cat_in(t, _LINK_FLOWS))
    t = _with(t, kind=kind, device=device, stream=stream, correlation=corr, external_id=ext)
    t = t.filter(pa.array(~drop))
    comm_args = _comm_args(fr, t, drop, comm_op, meta)
    header = {**fr.header, "format": ASCEND_FORMAT, "ascend_overlap_ns": overlap, **rank_header(fr.path)}
    hccl, warning = read_hccl_ops(fr.path)
    if hccl is not None:
        header[HCCL_KEY] = hccl
    steps, steps_warning = read_step_trace(fr.path)
    if steps is not None:
        header[STEPS_KEY] = steps
    links, links_warning = read_hccl_links(fr.path)
    if links is not None:
        header[LINKS_KEY] = links
    t, counted, detail_warning = _with_kernel_details(t, fr.path)
    notes = (warning, steps_warning, links_warning, detail_warning)
    warnings = (*fr.warnings, *(w for w in notes if w))
    return replace(fr, table=t, header=header, warnings=warnings, comm_args=comm_args, counters=counted)


def _comm_args(
    fr: FileRead, t: pa.Table, drop: np.ndarray, comm_op: np.ndarray, meta: dict[int, ProcessMeta]
) -> pa.Table | None:
    """The side table of the kept rows (renumbered after the drop): the reader's own entries, and
    the HCCL operators' message sizes and groups (``ascend_hccl_args.py``)."""
    new_row = np.cumsum(~drop) - 1
    parts = []
    if fr.comm_args is not None and fr.comm_args.num_rows:
        old = fr.comm_args["row"].to_numpy()
        keep = ~drop[old]
        kept = fr.comm_args.filter(pa.array(keep))
        parts.append(kept.set_column(0, kept.schema.field("row"), pa.array(new_row[old[keep]])))
    ops = side_table(t, new_row[comm_op & ~drop], meta, operator_args(fr.path) if comm_op.any() else {})
    if ops is not None:
        parts.append(ops)
    return pa.concat_tables(parts).unify_dictionaries() if parts else None


def _with_kernel_details(t: pa.Table, path: str) -> tuple[pa.Table, tuple[CounterRange, ...], str | None]:
    """The NPU tasks given ``kernel_details.csv``'s shapes and cores (``ascend_kernels.py``), the
    tasks its cores counted (when the file is this timeline's); a warning when the file is
    unusable or most of its tasks are not in the timeline."""
    details, warning = read_kernel_details(path)
    if details is None:
        return t, (), warning
    stream = t["stream"].to_numpy()
    on_task = (_kind_codes(t) == KIND_CODE["kernel"]) & (stream >= 0) & (stream < COMM_STREAM_BASE)
    t, matched = join_kernel_details(t, on_task, details)
    expected = int(pc.sum(pc.greater_equal(details["stream"], 0)).as_py() or 0)
    if matched < 0.9 * min(expected, int(on_task.sum())):
        warning = (
            f"{DETAILS_FILE}: {matched:,} of its {expected:,} NPU tasks match the timeline's (another run's file?); "
            "the rest have no shapes"
        )
        return t, (), warning
    return t, counter_ranges(details), warning


def _in_process(pid: np.ndarray, meta: dict[int, ProcessMeta], names: Collection[str]) -> np.ndarray:
    return np.isin(pid, [p for p, m in meta.items() if m.name in names])


def _op_lane(t: pa.Table, meta: dict[int, ProcessMeta]) -> np.ndarray:
    """Per row: whether it sits on a communicator's op lane of a communication process. With thread
    names, the lanes named "... Communication" (the "Plane N" lanes hold the ops' tasks); without,
    the rows named like an HCCL operator (``hcom_allReduce__428_0_1``)."""
    pid, tid = t["pid"].to_numpy(), t["tid"].to_numpy()
    by_name = per_value(t["name"], lambda n: bool(_COMM_OP_NAME.match(n)), null=False, dtype=bool)
    out = np.zeros(pid.size, bool)
    for p, m in meta.items():
        if m.name not in COMM_PROCESSES:
            continue
        mine = pid == p
        lanes = [k for k, v in m.threads.items() if "Communication" in v]
        out |= mine & (np.isin(tid, lanes) if m.threads else by_name)
    return out


def _under_comm_ops(t: pa.Table, on_hw: np.ndarray, comm_op: np.ndarray) -> np.ndarray:
    """NPU tasks of the streams that run communication: a stream whose task time lies at least half
    inside the communication operators (of the file: one NPU) is HCCL's. Its tasks (memcpy, notify,
    reduce) are what the operators stand for; kept beside them they would count twice."""
    out = np.zeros(on_hw.size, bool)
    if not comm_op.any():
        return out
    ts, dur, stream = t["ts_ns"].to_numpy(), t["dur_ns"].to_numpy(), t["tid"].to_numpy()
    ops = iv.Covered.of(ts[comm_op], ts[comm_op] + dur[comm_op])
    hw = np.flatnonzero(on_hw)
    _, lane = np.unique(stream[hw], return_inverse=True)
    busy = np.bincount(lane, weights=dur[hw])
    inside = np.bincount(lane, weights=ops.between(ts[hw], ts[hw] + dur[hw]))
    out[hw] = ((busy > 0) & (2 * inside >= busy))[lane]
    return out


def _kind_codes(t: pa.Table) -> np.ndarray:
    return per_value(t["kind"], lambda k: KIND_CODE.get(k, KIND_CODE["other"]), null=KIND_CODE["other"], dtype=np.int8)


def _device_kinds(t: pa.Table) -> np.ndarray:
    """Kind per row if it were an NPU task: from its task type (``cat``), else its name; -1 for the
    profiler's own markers and invalid tasks (PROFILING_ENABLE/DISABLE, WRITE_BACK, INVALID), which
    msprof counts as computing but are no work of the job."""

    def of(task: str) -> int:
        if _EXCLUDED_TASK.match(task):
            return -2
        if _WAIT_TASK.search(task):
            return KIND_CODE["sync"]
        return KIND_CODE["memcpy"] if _COPY_TASK.search(task) else KIND_CODE["kernel"]

    by_type = per_value(t["cat"], of, null=-1, dtype=np.int8)
    by_name = per_value(
        t["name"], lambda n: KIND_CODE["memcpy"] if n.upper().startswith("MEMCPY") else -1, null=-1, dtype=np.int8
    )
    kind = np.where(by_name >= 0, by_name, np.where(by_type >= 0, by_type, np.int8(KIND_CODE["kernel"])))
    return np.where(by_type == -2, np.int8(-1), kind)


def _device_ids(pid: np.ndarray, meta: dict[int, ProcessMeta]) -> np.ndarray:
    """The NPU id per row from its process's ``NPU <id>`` label (0 when the label has no id)."""
    ids = {p: int(m_.group(1)) if m.labels and (m_ := _NPU_LABEL.match(m.labels)) else 0 for p, m in meta.items()}
    return lookup_ints(pid, ids, 0)


def _cat_in(t: pa.Table, cats: tuple[str, ...]) -> np.ndarray:
    return per_value(t["cat"], lambda c: c in cats, null=False, dtype=bool)


def _links(t: pa.Table, kind: np.ndarray, on_dev: np.ndarray, on_rt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``correlation`` (task <-> CANN call, from HostToDevice flows) and ``external_id`` (task <->
    operator, from async_npu flows) per row. The id given is the host row's index offset past
    the file's own ids, so a call launching several tasks carries one id, as a CUDA launch does."""
    corr = t["correlation"].to_numpy().copy()
    ext = t["external_id"].to_numpy().copy()
    base = int(max(corr.max(initial=-1), ext.max(initial=-1))) + 1
    ts, end = t["ts_ns"].to_numpy(), t["ts_ns"].to_numpy() + t["dur_ns"].to_numpy()
    pid, tid = t["pid"].to_numpy(), t["tid"].to_numpy()
    flow = kind == KIND_CODE["flow"]
    for cat, host_sel, column in (
        ("HostToDevice", on_rt & ~flow, corr),
        ("async_npu", (kind == KIND_CODE["cpu_op"]) & ~flow & ~_launch_record(t), ext),
    ):
        s_rows, f_rows = _flow_ends(t, flow, cat)
        if s_rows.size == 0:
            continue
        host = _bind(np.flatnonzero(host_sel), s_rows, pid, tid, ts, end)
        task = _bind(np.flatnonzero(on_dev & (kind != KIND_CODE["flow"])), f_rows, pid, tid, ts, end)
        ok = (host >= 0) & (task >= 0)
        column[task[ok]] = base + host[ok]
        column[host[ok]] = base + host[ok]
    # a runtime call carries its task's operator id too, as CUDA launches do
    task_rows = np.flatnonzero(on_dev & (corr >= base))
    task_of = np.full(kind.size, -1, dtype=np.int64)
    task_of[corr[task_rows] - base] = task_rows
    calls = np.flatnonzero(on_rt & (corr >= base) & (ext < 0))
    found = task_of[calls]
    ext[calls[found >= 0]] = ext[found[found >= 0]]
    return corr, ext


def _launch_record(t: pa.Table) -> np.ndarray:
    """torch_npu's own ``aclnn*`` records: the launch inside an ATen operator, not an operator (the
    operator around it holds the shapes and sequence number the roofline and phases read)."""
    return per_value(t["name"], lambda n: n.startswith("aclnn"), null=False, dtype=bool)


def _flow_ends(t: pa.Table, flow: np.ndarray, cat: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the start and finish events of each flow of ``cat`` that has both."""
    sel = flow & _cat_in(t, (cat,))
    fid = t["flow_id"].to_numpy()
    phase = per_value(t["flow_phase"], lambda p: {"s": 1, "f": 2}.get(p, 0), null=0, dtype=np.int8)
    s_rows = np.flatnonzero(sel & (phase == 1))
    f_rows = np.flatnonzero(sel & (phase == 2))
    _, si, fi = np.intersect1d(fid[s_rows], fid[f_rows], return_indices=True)
    return s_rows[si], f_rows[fi]


def _bind(
    cands: np.ndarray, q: np.ndarray, pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """Per query row ``q``: the innermost candidate slice of the same (pid, tid) that contains the
    query's time (a slice starting exactly then counts), else -1. One sort and binary search per
    thread; a query inside a slice that ends before it is retried on up to 8 earlier slices."""
    out = np.full(q.size, -1, dtype=np.int64)
    if cands.size == 0 or q.size == 0:
        return out
    groups = np.unique(np.stack([pid[q], tid[q]], axis=1), axis=0)
    for gp, gt in groups.tolist():
        c = cands[(pid[cands] == gp) & (tid[cands] == gt)]
        qi = np.flatnonzero((pid[q] == gp) & (tid[q] == gt))
        if c.size == 0:
            continue
        c = c[np.lexsort((-(end[c] - ts[c]), ts[c]))]  # by start; among equal starts the longest first
        qt = ts[q[qi]]
        pos = np.searchsorted(ts[c], qt, side="right") - 1
        for _ in range(_MAX_STEP_BACK):
            ok = pos >= 0
            hit = ok & (end[c[np.maximum(pos, 0)]] >= qt)
            done = hit & (out[qi] < 0)
            out[qi[done]] = c[pos[done]]
            pos = np.where(hit | ~ok, -1, pos - 1)
            if not (pos >= 0).any():
                break
    return out


def _overlap_totals(t: pa.Table, rows: np.ndarray) -> dict[str, int]:
    """msprof's Overlap Analysis lanes: total ns per lane name (Computing, Communication, Free...)."""
    if not rows.any():
        return {}
    sub = t.filter(pa.array(rows))
    names = pc.cast(sub["name"], pa.string())
    g = pa.table({"name": names, "dur": sub["dur_ns"]}).group_by("name").aggregate([("dur", "sum")])
    return {str(n): int(d) for n, d in zip(g["name"].to_pylist(), g["dur_sum"].to_pylist(), strict=True) if n}


def _with(t: pa.Table, **cols: np.ndarray) -> pa.Table:
    for name, values in cols.items():
        i = t.schema.get_field_index(name)
        field = t.schema.field(i)
        if name == "kind":
            arr: Any = pa.DictionaryArray.from_arrays(
                pa.array(values.astype(np.int32)), pa.array([k.value for k in Kind], pa.string())
            )
        else:
            arr = pa.array(values, type=field.type)
        t = t.set_column(i, field, arr)
    return t
