"""Nsight Systems SQLite exports (``nsys export --type sqlite report.nsys-rep``) -> the event table.

Tables read (each is optional; a file needs a kernel, runtime or NVTX table):
- ``CUPTI_ACTIVITY_KIND_KERNEL`` -> ``kernel`` rows: ``start``/``end`` ns, ``deviceId``,
  ``streamId``, ``correlationId``; the name is the demangled one from ``StringIds`` (else the short);
- ``CUPTI_ACTIVITY_KIND_MEMCPY`` -> ``memcpy`` rows named as Kineto names them, ``Memcpy HtoD
  (Pageable -> Device)``, from ``copyKind`` / ``srcKind`` / ``dstKind``; ``bytes``;
- ``CUPTI_ACTIVITY_KIND_MEMSET`` -> ``memset`` rows, ``Memset (Device)``; ``bytes``;
- ``CUPTI_ACTIVITY_KIND_RUNTIME`` -> ``runtime`` rows on the host thread, named without the API
  version suffix (``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``, Kineto's spelling); their
  ``correlationId`` is the one the kernel carries, so launches join device work as in Kineto;
- ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` -> ``sync`` rows on the device stream (``Stream Sync``...);
- ``NVTX_EVENTS`` push/pop and start/end ranges (event types 59, 60) with an end -> ``user_annotation``
  rows on the host thread (text from ``text``, else ``StringIds`` by ``textId``). Ranges PyTorch's
  ``emit_nvtx`` records per op (``aten::mm, seq = 3, ...``) -> ``cpu_op`` rows named up to the comma.
  Steps then come from ``--step-marker NAME`` (an NVTX range per step), or ProfilerStep#N ranges.

``globalPid`` / ``globalTid`` pack the process id in bits 24-47 and the thread id in bits 0-23.
One export may hold several processes (every rank ``nsys profile`` launched), or one process that
drives several devices (JAX): ``gpu_units`` lists the (process, device) pairs that ran device
work, ordered by device, and ``read_nsys_sqlite(path, process=pid, device=d)`` reads one of them
(the loader and ``analyze`` make each a rank, in that order: torchrun's LOCAL_RANK is the device).
Rows are fetched in bounded chunks (one Python tuple per row inside SQLite's C loop, converted to
numpy per chunk). emit_nvtx op ranges are linked to the kernels they launched in ``nsys_ops``.
Text that is not UTF-8 (some exports hold Latin-1 metadata) is decoded with replacement characters.
A table SQLite cannot read (a damaged or cut file) is skipped and named in a warning; the rest is
analyzed. Modules: ``nsys_db`` (the database), ``nsys_rows`` (CUPTI tables), ``nsys_nvtx`` (NVTX).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import TraceFormatError
from . import schema
from .columns import FileRead, assemble_table
from .nsys_db import DB_ERRORS, ID_MASK, PID_SHIFT, StringIds, columns_of, connect, device_properties, fetch, tables_of
from .nsys_nvtx import nvtx
from .nsys_ops import input_types, link_ops
from .nsys_rows import CATS, Part, kernels, memcpys, memsets, runtime, syncs

#: The tables and columns this reader uses, as nsys's export names them (a real export has many
#: more), as SQL: for building small exports in tests and benchmarks, and as a summary of the reader.
READ_COLUMNS = """
    CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, contextId INT, streamId INT,
        correlationId INT, globalPid INT, demangledName INT, shortName INT);
    CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT, end INT, deviceId INT, contextId INT, streamId INT,
        correlationId INT, globalPid INT, bytes INT, copyKind INT, srcKind INT, dstKind INT);
    CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INT, end INT, deviceId INT, contextId INT, streamId INT,
        correlationId INT, globalPid INT, value INT, bytes INT, memKind INT);
    CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INT, end INT, deviceId INT, contextId INT, streamId INT,
        correlationId INT, globalPid INT, syncType INT);
    CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, eventClass INT, globalTid INT,
        correlationId INT, nameId INT, returnValue INT);
    CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, rangeId INT, category INT, color INT,
        text TEXT, globalTid INT, endGlobalTid INT, textId INT, domainId INT);
    CREATE TABLE TARGET_INFO_GPU (id INT, name TEXT, totalMemory INT, smCount INT, computeMajor INT, computeMinor INT);
"""
_DEVICE_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
_NSYS_TABLES = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"}
_HOST_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")  # filtered by globalTid, the others by globalPid
_READERS = (
    ("CUPTI_ACTIVITY_KIND_KERNEL", kernels),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", memcpys),
    ("CUPTI_ACTIVITY_KIND_MEMSET", memsets),
    ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", syncs),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", runtime),
    ("NVTX_EVENTS", nvtx),
)
_FIX = "export the report with: nsys export --type sqlite -o report.sqlite report.nsys-rep"


def gpu_units(path: str | Path) -> list[tuple[int, int]]:
    """(process id, CUDA device) of every pair that ran kernels, memcpys or memsets, ordered by
    device, then process: the ranks of an export (one per process under torchrun; one per device
    for a process that drives several, as a JAX process does)."""
    p = Path(path)
    try:
        with connect(p) as con:
            tables = tables_of(con)
            sel = [
                f"SELECT globalPid, deviceId FROM {t}"
                for t in _DEVICE_TABLES
                if t in tables and {"globalPid", "deviceId"} <= columns_of(con, t)
            ]
            if not sel:
                return []
            rows = fetch(
                con,
                f"SELECT DISTINCT (globalPid >> {PID_SHIFT}) & {ID_MASK}, deviceId FROM ({' UNION ALL '.join(sel)}) "
                "WHERE globalPid IS NOT NULL AND deviceId IS NOT NULL",
                2,
            )
    except DB_ERRORS:  # not a database, or a damaged table: read as one unit, where the reader says which
        return []
    o = np.lexsort((rows[:, 0], rows[:, 1]))
    return [(int(pid), int(dev)) for pid, dev in rows[o]]


def nsys_tables_present(path: str | Path) -> bool | None:
    """Whether an SQLite file holds any table an Nsight export has; None when it cannot be read
    (the reader then says why)."""
    try:
        con = connect(Path(path))
        try:
            return bool(_NSYS_TABLES & tables_of(con))
        finally:
            con.close()
    except DB_ERRORS:
        return None


def _open(p: Path) -> tuple[sqlite3.Connection, set[str]]:
    """A connection to an export and its tables; ``TraceFormatError`` when it is not one."""
    try:
        con = connect(p)
    except DB_ERRORS as exc:  # cannot open it at all (permissions)
        raise TraceFormatError(
            f"cannot open the SQLite file ({exc})", path=str(p), fix="check the file and its permissions"
        ) from None
    try:
        tables = tables_of(con)
    except DB_ERRORS as exc:
        con.close()
        raise TraceFormatError(f"not a readable SQLite database ({exc})", path=str(p), fix=_FIX) from None
    if not (_NSYS_TABLES & tables):
        con.close()
        _refuse_other_profilers(p, tables)
        raise TraceFormatError(
            "SQLite file without Nsight Systems tables (no CUPTI_ACTIVITY_KIND_KERNEL, "
            "CUPTI_ACTIVITY_KIND_RUNTIME or NVTX_EVENTS)",
            path=str(p),
            fix="pass an nsys export of a report traced with CUDA (nsys profile -t cuda,nvtx)",
        )
    return con, tables


def _refuse_other_profilers(p: Path, tables: set[str]) -> None:
    """The databases of the other profilers stepscope meets, named with the export it reads:
    rocprofv3's rocpd (``rocpd_*`` tables, its default output since ROCm 7) and the Ascend
    profiler's ``export_type=Db`` (``ascend_pytorch_profiler_*.db``; CANN_API / PYTORCH_API tables)."""
    if any(t.startswith("rocpd_") for t in tables):
        raise TraceFormatError(
            "a rocpd database (rocprofv3's default output since ROCm 7), which stepscope does not read",
            path=str(p),
            fix="re-run rocprofv3 with --output-format json and pass its <pid>_results.json",
        )
    if p.name.startswith("ascend_pytorch_profiler") or {"CANN_API", "PYTORCH_API"} & tables:
        raise TraceFormatError(
            "an Ascend profiler database (export_type=Db), which stepscope does not read",
            path=str(p),
            fix="profile with experimental_config export_type=[torch_npu.profiler.ExportType.Text] and pass the "
            "*_ascend_pt directory",
        )


def _read_tables(
    con: sqlite3.Connection, tables: set[str], process: int | None, device: int | None
) -> tuple[list[Part], list[str]]:
    """The parts of every table the export has, of ``process`` (and ``device``) when given, and
    the tables skipped as unreadable (with SQLite's reason)."""
    conds = ([f"((globalPid >> {PID_SHIFT}) & {ID_MASK}) = {int(process)}"] if process is not None else []) + (
        [f"deviceId = {int(device)}"] if device is not None else []
    )
    where = f"WHERE {' AND '.join(conds)}" if conds else ""
    where_t = f"WHERE ((globalTid >> {PID_SHIFT}) & {ID_MASK}) = {int(process)}" if process is not None else ""
    parts: list[Part] = []
    skipped: list[str] = []
    try:
        strings = StringIds(con, "StringIds" in tables)
    except DB_ERRORS as exc:  # names then read as "<string N>"
        strings = StringIds(con, False)
        skipped.append(f"StringIds ({exc})")
    for table, build in _READERS:
        if table not in tables:
            continue
        try:
            got = build(con, where_t if table in _HOST_TABLES else where, strings)
        except DB_ERRORS as exc:  # a damaged page or a cut file: keep the other tables
            skipped.append(f"{table} ({exc})")
            continue
        if got is not None:
            parts.extend(got if isinstance(got, list) else [got])
    return parts, skipped


def read_nsys_sqlite(path: str | Path, *, process: int | None = None, device: int | None = None) -> FileRead:
    """The events of an Nsight Systems SQLite export (module docstring): of one process (its host
    rows and device work) when ``process`` is given, and of its work on one CUDA device when
    ``device`` is too (the host rows stay whole: launches for other devices match nothing)."""
    p = Path(path)
    con, tables = _open(p)
    with con:
        parts, skipped = _read_tables(con, tables, process, device)
        cols = _merge(parts)  # empties the parts as it goes
        used = np.unique(np.asarray(cols["device"]))
        props = device_properties(con, used[used >= 0]) if "TARGET_INFO_GPU" in tables else []
    con.close()
    header: dict[str, object] = {"format": "nsys-sqlite", "deviceProperties": props}
    if process is not None:
        header["process"] = process
    if device is not None:
        header["device"] = device
    return FileRead(
        path=str(p),
        table=assemble_table(cols, 0),
        header=header,
        truncated=bool(skipped),
        note=f"unreadable tables skipped: {'; '.join(skipped)}" if skipped else "",
        skipped_events=0,
        bytes_read=p.stat().st_size,
    )


def _merge(parts: list[Part]) -> dict[str, object]:
    """The readers' columns concatenated, in the form ``assemble_table`` takes: names as one
    dictionary of distinct strings (each part's indices shifted and remapped, per distinct name).
    Each column leaves the parts as it is concatenated, so the parts and the result are not both
    held whole."""

    def take(k: str, empty: np.ndarray) -> np.ndarray:
        return np.concatenate([p.pop(k) if k in p else np.full(len(p["ts"]), -1, empty.dtype) for p in parts] + [empty])

    offsets = np.cumsum([0] + [len(p["names"]) for p in parts])
    every = [n for p in parts for n in p["names"]]
    uniq, remap = np.unique(np.asarray(every + [""], dtype=object), return_inverse=True)
    idx = np.concatenate(
        [remap.ravel()[p.pop("name_idx") + off] for p, off in zip(parts, offsets)] + [np.empty(0, np.int64)]
    )
    dims = pa.concat_arrays(
        [p.pop("dims") if "dims" in p else pa.nulls(len(p["ts"]), pa.string()) for p in parts]
        + [pa.nulls(0, pa.string())]
    )
    i32, i64 = np.empty(0, np.int32), np.empty(0, np.int64)
    c = {
        k: take(k, i32 if k in ("kind", "cat") else i64)
        for k in ("kind", "cat", "pid", "tid", "device", "stream", "dur", "correlation", "bytes", "seq")
    }
    c["ts"] = take("ts", i64)  # last: the other columns' fill length reads it
    n = len(c["ts"])
    out: dict[str, object] = {k: c[k] for k in ("pid", "tid", "device", "stream", "ts", "dur", "correlation", "bytes")}
    out["sequence_number"] = c["seq"]
    ext = link_ops(c["kind"], c["pid"], c["tid"], c["ts"], c["dur"], c["correlation"])
    out["external_id"], out["input_dims"] = ext, dims
    out["input_types"] = input_types(c["kind"], idx, uniq, ext, dims)
    out["name"] = pa.DictionaryArray.from_arrays(pa.array(idx.astype(np.int32)), pa.array(uniq.tolist(), pa.string()))
    out["kind"] = pa.DictionaryArray.from_arrays(pa.array(c["kind"]), pa.array(list(schema.KIND_CODE), pa.string()))
    out["cat"] = pa.DictionaryArray.from_arrays(pa.array(c["cat"]), pa.array(CATS, pa.string()))
    out.update(schema.absent_xla_columns(n))
    return out
