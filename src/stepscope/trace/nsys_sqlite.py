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
Text that is not UTF-8 (some exports hold Latin-1 metadata) is decoded with replacement characters. A table SQLite cannot read (a damaged or cut file) is skipped and named in
a warning; the rest is analyzed.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from urllib.request import pathname2url

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import TraceFormatError
from . import schema
from .columns import FileRead, assemble_table
from .nsys_ops import input_types, link_ops

MAGIC = b"SQLite format 3\x00"
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
_CHUNK = 1 << 16
_PID_SHIFT, _ID_MASK = 24, 0xFFFFFF
# CUPTI_ActivityMemcpyKind / CUPTI_ActivityMemoryKind, in Kineto's spelling of memcpy names
_COPY = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP"}
_MEM = {1: "Pageable", 2: "Pinned", 3: "Device", 4: "Array", 5: "Managed", 6: "Device Static", 7: "Managed Static"}
_SYNC = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
_VERSION = re.compile(r"_v\d+$")
_NVTX_RANGES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange
_OP = re.compile(r"^(aten|autograd|c10d)::")
_K = schema.KIND_CODE
_CATS = ["kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "cuda_runtime", "user_annotation", "cpu_op"]


def is_nsys_sqlite(path: str | Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def _connect(p: Path) -> sqlite3.Connection:
    # read-only and immutable: no journal or lock files beside a report on a read-only share
    con = sqlite3.connect(f"file:{pathname2url(str(p.resolve()))}?mode=ro&immutable=1", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    return con


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


# what a damaged file raises: SQLite's own errors, and its error text when that is not UTF-8
_DB_ERRORS = (sqlite3.DatabaseError, UnicodeDecodeError)


def _fetch(con: sqlite3.Connection, sql: str, width: int) -> np.ndarray:
    """Integer rows of ``sql`` as an (n, width) int64 array, fetched in chunks (nulls are -1 in the
    SQL). A value that is not an integer (SQLite stores any type in any column; a damaged page
    does) is a damaged table: ``sqlite3.DatabaseError``."""
    cur = con.execute(sql)
    parts = []
    while chunk := cur.fetchmany(_CHUNK):
        try:
            parts.append(np.array(chunk, dtype=np.int64).reshape(-1, width))
        except (TypeError, ValueError, OverflowError) as exc:
            raise sqlite3.DatabaseError(f"values that are not integers ({exc.__class__.__name__})") from None
    return np.concatenate(parts) if parts else np.empty((0, width), np.int64)


class _Strings:
    """``StringIds`` values looked up for the ids a table uses (its distinct ids only: the table can
    hold millions of strings, of which a trace's kernels and calls use a few thousand)."""

    def __init__(self, con: sqlite3.Connection, present: bool) -> None:
        self.con, self.present = con, present and "value" in _columns(con, "StringIds")

    def __call__(self, ids: np.ndarray) -> dict[int, str]:
        if not self.present or ids.size == 0:
            return {}
        out: dict[int, str] = {}
        for k in range(0, ids.size, 50_000):  # bounded statement length
            listed = ", ".join(str(int(i)) for i in ids[k : k + 50_000])
            out.update(self.con.execute(f"SELECT id, value FROM StringIds WHERE id IN ({listed})").fetchall())
        return out


def gpu_units(path: str | Path) -> list[tuple[int, int]]:
    """(process id, CUDA device) of every pair that ran kernels, memcpys or memsets, ordered by
    device, then process: the ranks of an export (one per process under torchrun; one per device
    for a process that drives several, as a JAX process does)."""
    p = Path(path)
    try:
        with _connect(p) as con:
            tables = _tables(con)
            sel = [
                f"SELECT globalPid, deviceId FROM {t}"
                for t in _DEVICE_TABLES
                if t in tables and {"globalPid", "deviceId"} <= _columns(con, t)
            ]
            if not sel:
                return []
            rows = _fetch(
                con,
                f"SELECT DISTINCT (globalPid >> {_PID_SHIFT}) & {_ID_MASK}, deviceId FROM ({' UNION ALL '.join(sel)}) "
                "WHERE globalPid IS NOT NULL AND deviceId IS NOT NULL",
                2,
            )
    except _DB_ERRORS:  # not a database, or a damaged table: read as one unit, where the reader says which
        return []
    o = np.lexsort((rows[:, 0], rows[:, 1]))
    return [(int(pid), int(dev)) for pid, dev in rows[o]]


_DEVICE_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
_FIX = "export the report with: nsys export --type sqlite -o report.sqlite report.nsys-rep"


_NSYS_TABLES = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"}


def nsys_tables_present(path: str | Path) -> bool | None:
    """Whether an SQLite file holds any table an Nsight export has; None when it cannot be read
    (the reader then says why)."""
    try:
        con = _connect(Path(path))
        try:
            return bool(_NSYS_TABLES & _tables(con))
        finally:
            con.close()
    except _DB_ERRORS:
        return None


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def read_nsys_sqlite(path: str | Path, *, process: int | None = None, device: int | None = None) -> FileRead:
    """The events of an Nsight Systems SQLite export (module docstring): of one process (its host
    rows and device work) when ``process`` is given, and of its work on one CUDA device when
    ``device`` is too (the host rows stay whole: launches for other devices match nothing)."""
    p = Path(path)
    try:
        con = _connect(p)
    except _DB_ERRORS as exc:  # cannot open it at all (permissions)
        raise TraceFormatError(
            f"cannot open the SQLite file ({exc})", path=str(p), fix="check the file and its permissions"
        ) from None
    try:
        tables = _tables(con)
    except _DB_ERRORS as exc:
        con.close()
        raise TraceFormatError(f"not a readable SQLite database ({exc})", path=str(p), fix=_FIX) from None
    if not (_NSYS_TABLES & tables):
        con.close()
        raise TraceFormatError(
            "SQLite file without Nsight Systems tables (no CUPTI_ACTIVITY_KIND_KERNEL, "
            "CUPTI_ACTIVITY_KIND_RUNTIME or NVTX_EVENTS)",
            path=str(p),
            fix="pass an nsys export of a report traced with CUDA (nsys profile -t cuda,nvtx)",
        )
    conds = ([f"((globalPid >> {_PID_SHIFT}) & {_ID_MASK}) = {int(process)}"] if process is not None else []) + (
        [f"deviceId = {int(device)}"] if device is not None else []
    )
    where = f"WHERE {' AND '.join(conds)}" if conds else ""
    where_t = f"WHERE ((globalTid >> {_PID_SHIFT}) & {_ID_MASK}) = {int(process)}" if process is not None else ""
    parts: list[dict[str, np.ndarray]] = []
    skipped: list[str] = []
    with con:
        try:
            strings = _Strings(con, "StringIds" in tables)
        except _DB_ERRORS as exc:  # names then read as "<string N>"
            strings = _Strings(con, False)
            skipped.append(f"StringIds ({exc})")
        for table, build in _READERS:
            if table not in tables:
                continue
            try:
                got = build(con, where_t if table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS") else where, strings)
            except _DB_ERRORS as exc:  # a damaged page or a cut file: keep the other tables
                skipped.append(f"{table} ({exc})")
                continue
            if got is not None:
                parts.extend(got if isinstance(got, list) else [got])
        cols = _merge(parts)  # empties the parts as it goes
        used = np.unique(np.asarray(cols["device"]))
        props = _device_properties(con, used[used >= 0]) if "TARGET_INFO_GPU" in tables else []
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


# TARGET_INFO_GPU column -> Kineto's deviceProperties key (what the roofline's device lookup reads)
_PROPS = {
    "id": "id",
    "name": "name",
    "totalMemory": "totalGlobalMem",
    "computeMajor": "computeMajor",
    "computeMinor": "computeMinor",
    "smCount": "numSms",
    "maxThreadsPerBlock": "maxThreadsPerBlock",
}


def _device_properties(con: sqlite3.Connection, used: np.ndarray) -> list[dict[str, object]]:
    """The devices the events ran on, by CUDA device id, as Kineto's ``deviceProperties`` entries."""
    try:
        have = [c for c in _PROPS if c in _columns(con, "TARGET_INFO_GPU")]
    except _DB_ERRORS:
        return []
    if "id" not in have or used.size == 0:
        return []
    ids = ", ".join(str(int(i)) for i in used)
    try:
        rows = con.execute(f"SELECT {', '.join(have)} FROM TARGET_INFO_GPU WHERE id IN ({ids}) ORDER BY id").fetchall()
    except _DB_ERRORS:
        return []
    seen: set[object] = set()
    out = []
    for r in rows:  # one entry per device (an export lists a GPU once per VM)
        d = {_PROPS[c]: v for c, v in zip(have, r) if v is not None}
        if d.get("id") not in seen:
            seen.add(d.get("id"))
            out.append(d)
    return out


def _pid(g: np.ndarray) -> np.ndarray:
    return (g >> _PID_SHIFT) & _ID_MASK


def _named(ids: np.ndarray, strings: _Strings, clean: re.Pattern[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """(index into the distinct names, the names) for string ids: one lookup per distinct id."""
    uniq, inv = np.unique(ids, return_inverse=True)
    found = strings(uniq)
    names = [found.get(int(i), f"<string {int(i)}>") for i in uniq]
    if clean is not None:
        names = [clean.sub("", n) for n in names]
    return inv.ravel(), names


def _device_rows(
    a: np.ndarray, kind: str, cat: str, name_idx: np.ndarray, names: list[str], nbytes: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    n = a.shape[0]
    return {
        "kind": np.full(n, _K[kind], np.int32),
        "cat": np.full(n, _CATS.index(cat), np.int32),
        "name_idx": name_idx,
        "names": names,
        "pid": _pid(a[:, 5]),
        "tid": a[:, 3],
        "device": a[:, 2],
        "stream": a[:, 3],
        "ts": a[:, 0],
        "dur": a[:, 1] - a[:, 0],
        "correlation": a[:, 4],
        "bytes": nbytes if nbytes is not None else np.full(n, -1, np.int64),
    }


_BASE = "start, COALESCE(end, start), COALESCE(deviceId, -1), COALESCE(streamId, -1), COALESCE(correlationId, -1), globalPid"


def _kernels(con: sqlite3.Connection, where: str, strings: _Strings) -> dict[str, np.ndarray] | None:
    have = _columns(con, "CUPTI_ACTIVITY_KIND_KERNEL")
    name = "COALESCE(demangledName, shortName, -1)" if "demangledName" in have else "COALESCE(shortName, -1)"
    a = _fetch(con, f"SELECT {_BASE}, {name} FROM CUPTI_ACTIVITY_KIND_KERNEL {where}", 7)
    idx, names = _named(a[:, 6], strings)
    return _device_rows(a, "kernel", "kernel", idx, names)


def _memcpys(con: sqlite3.Connection, where: str, strings: _Strings) -> dict[str, np.ndarray] | None:
    have = _columns(con, "CUPTI_ACTIVITY_KIND_MEMCPY")
    src = "COALESCE(srcKind, 0)" if "srcKind" in have else "0"
    dst = "COALESCE(dstKind, 0)" if "dstKind" in have else "0"
    a = _fetch(
        con,
        f"SELECT {_BASE}, COALESCE(copyKind, 0), {src}, {dst}, COALESCE(bytes, -1) FROM CUPTI_ACTIVITY_KIND_MEMCPY {where}",
        10,
    )
    key = a[:, 6] * 10_000 + a[:, 7] * 100 + a[:, 8]
    uniq, inv = np.unique(key, return_inverse=True)
    names = [
        f"Memcpy {_COPY.get(int(k) // 10_000, 'Unknown')} ({_MEM.get(int(k) // 100 % 100, 'Unknown')} -> "
        f"{_MEM.get(int(k) % 100, 'Unknown')})"
        for k in uniq
    ]
    return _device_rows(a, "memcpy", "gpu_memcpy", inv.ravel(), names, a[:, 9])


def _memsets(con: sqlite3.Connection, where: str, strings: _Strings) -> dict[str, np.ndarray] | None:
    have = _columns(con, "CUPTI_ACTIVITY_KIND_MEMSET")
    mem = "COALESCE(memKind, 3)" if "memKind" in have else "3"
    a = _fetch(con, f"SELECT {_BASE}, {mem}, COALESCE(bytes, -1) FROM CUPTI_ACTIVITY_KIND_MEMSET {where}", 8)
    uniq, inv = np.unique(a[:, 6], return_inverse=True)
    return _device_rows(
        a, "memset", "gpu_memset", inv.ravel(), [f"Memset ({_MEM.get(int(k), 'Unknown')})" for k in uniq], a[:, 7]
    )


def _syncs(con: sqlite3.Connection, where: str, strings: _Strings) -> dict[str, np.ndarray] | None:
    a = _fetch(con, f"SELECT {_BASE}, COALESCE(syncType, 0) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION {where}", 7)
    uniq, inv = np.unique(a[:, 6], return_inverse=True)
    return _device_rows(a, "sync", "cuda_sync", inv.ravel(), [_SYNC.get(int(k), "Synchronize") for k in uniq])


def _host_rows(a: np.ndarray, kind: np.ndarray, cat: np.ndarray, name_idx: np.ndarray, names: list[str]) -> dict:
    n = a.shape[0]
    minus1 = np.full(n, -1, np.int64)
    return {
        "kind": kind,
        "cat": cat,
        "name_idx": name_idx,
        "names": names,
        "pid": _pid(a[:, 2]),
        "tid": a[:, 2] & _ID_MASK,
        "device": minus1,
        "stream": minus1,
        "ts": a[:, 0],
        "dur": a[:, 1] - a[:, 0],
        "correlation": a[:, 3],
        "bytes": minus1,
    }


def _runtime(con: sqlite3.Connection, where: str, strings: _Strings) -> dict[str, np.ndarray] | None:
    a = _fetch(
        con,
        "SELECT start, COALESCE(end, start), globalTid, COALESCE(correlationId, -1), COALESCE(nameId, -1) "
        f"FROM CUPTI_ACTIVITY_KIND_RUNTIME {where}",
        5,
    )
    idx, names = _named(a[:, 4], strings, _VERSION)
    n = a.shape[0]
    return _host_rows(
        a, np.full(n, _K["runtime"], np.int32), np.full(n, _CATS.index("cuda_runtime"), np.int32), idx, names
    )


# PyTorch's emit_nvtx range text (torch/csrc/profiler/util.cpp getNvtxStr):
# "<op>, seq = <n>, op_id = <m>, sizes = [[2, 3], []], input_op_ids = [...]" (each part optional)
_EMIT = r"^(?P<name>[^,]*)(?:, seq = (?P<seq>-?\d+))?(?:, op_id = \d+)?(?:, sizes = (?P<sizes>\[(?:\[[-0-9, ]*\](?:, )?)*\]))?"


def _nvtx(con: sqlite3.Connection, where: str, strings: _Strings) -> list[dict] | None:
    """NVTX ranges, one part per fetched chunk (so the texts held as Python strings at once are a
    chunk's, not the file's: with emit_nvtx every op range has a text of its own)."""
    have = _columns(con, "NVTX_EVENTS")
    if not {"start", "end", "eventType", "globalTid"} <= have:
        return None
    types = ", ".join(str(t) for t in _NVTX_RANGES)
    cond = f"eventType IN ({types}) AND end IS NOT NULL" + (f" AND {where[len('WHERE ') :]}" if where else "")
    # each range's text: inline, else the string table's by textId (in SQL)
    inline = "text" if "text" in have else "NULL"
    by_id = "(SELECT value FROM StringIds WHERE id = textId)" if "textId" in have and strings.present else "NULL"
    cur = con.execute(
        f"SELECT start, end, globalTid, COALESCE({inline}, {by_id}, '<nvtx range>') FROM NVTX_EVENTS WHERE {cond}"
    )
    out = []
    while chunk := cur.fetchmany(_CHUNK):
        start, end, tid, text = zip(*chunk)
        try:
            a = np.array([start, end, tid, np.full(len(start), -1)], dtype=np.int64).T
            label = pa.array(text, pa.string())
        except (TypeError, ValueError, OverflowError, pa.ArrowException) as exc:
            raise sqlite3.DatabaseError(f"values of the wrong type ({exc.__class__.__name__})") from None
        out.append(_nvtx_part(a, label))
    return out


def _nvtx_part(a: np.ndarray, label: pa.Array) -> dict:
    # emit_nvtx op ranges (every one a distinct text: seq and op_id differ) parsed in Arrow, not per row
    op = pc.fill_null(pc.match_substring_regex(label, _OP.pattern), False)
    parsed = pc.extract_regex(label, _EMIT)
    name = pc.if_else(op, parsed.field("name"), label).dictionary_encode()
    # an optional group that did not match is "" (or the whole struct null for a non-op text)
    seq_text, size_text = parsed.field("seq"), parsed.field("sizes")
    seq = pc.if_else(pc.fill_null(pc.and_(op, pc.not_equal(seq_text, "")), False), seq_text, None).cast(pa.int64())
    sizes = pc.if_else(
        pc.fill_null(pc.and_(op, pc.not_equal(size_text, "")), False), size_text, pa.nulls(len(label), pa.string())
    )
    opn = op.to_numpy(zero_copy_only=False)
    kind = np.where(opn, _K["cpu_op"], _K["user_annotation"]).astype(np.int32)
    cat = np.where(opn, _CATS.index("cpu_op"), _CATS.index("user_annotation")).astype(np.int32)
    rows = _host_rows(
        a, kind, cat, name.indices.to_numpy(zero_copy_only=False).astype(np.int64), name.dictionary.to_pylist()
    )
    rows["seq"] = pc.fill_null(seq, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    rows["dims"] = sizes
    return rows


_READERS = (
    ("CUPTI_ACTIVITY_KIND_KERNEL", _kernels),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", _memcpys),
    ("CUPTI_ACTIVITY_KIND_MEMSET", _memsets),
    ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", _syncs),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", _runtime),
    ("NVTX_EVENTS", _nvtx),
)


def _merge(parts: list[dict]) -> dict[str, object]:
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
    out["kind"] = pa.DictionaryArray.from_arrays(pa.array(c["kind"]), pa.array(list(_K), pa.string()))
    out["cat"] = pa.DictionaryArray.from_arrays(pa.array(c["cat"]), pa.array(_CATS, pa.string()))
    out.update(schema.absent_xla_columns(n))
    return out
