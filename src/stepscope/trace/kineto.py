"""Kineto / torch.profiler Chrome-trace JSON -> the normalized event table (see ``schema.py``).

Decoding uses typed, GC-free msgspec Structs: only the fields the analyses need are materialized,
unknown args are skipped by the decoder, and ``Input Dims``/``Input type`` stay raw JSON text.
``ts``/``dur`` are kept as raw number text and converted exactly to integer ns (``numparse``).
Per chunk the Structs become Arrow columns and are dropped, so memory stays bounded.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import TraceFormatError
from . import schema
from .jsonstream import BLOCK_BYTES, StreamState, event_text_blocks, iter_event_chunks, parse_trailer
from .numparse import raw_lines_to_ns

try:  # the optional C scanner (setup.py); the portable msgspec path is used without it
    from . import _fastkineto as _fast  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _fast = None

_NORAW = msgspec.Raw(b"")


class _Args(msgspec.Struct, gc=False, frozen=True):
    external_id: int | None = msgspec.field(name="External id", default=None)
    external_id_old: int | None = msgspec.field(name="external id", default=None)
    correlation: int | None = None
    device: int | str | None = None  # ROCm runtime events write strings ("0x0", "2560")
    stream: int | str | None = None
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=_NORAW)
    input_type: msgspec.Raw = msgspec.field(name="Input type", default=_NORAW)
    collective: str | None = msgspec.field(name="Collective name", default=None)
    in_msg_nelems: int | None = msgspec.field(name="In msg nelems", default=None)
    out_msg_nelems: int | None = msgspec.field(name="Out msg nelems", default=None)
    group_size: int | None = msgspec.field(name="Group size", default=None)
    dtype: str | None = None
    pg_name: str | int | None = msgspec.field(name="Process Group Name", default=None)
    pg_desc: str | None = msgspec.field(name="Process Group Description", default=None)
    nbytes: int | str | None = msgspec.field(name="bytes", default=None)


_EMPTY_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: msgspec.Raw = _NORAW
    dur: msgspec.Raw = _NORAW
    id: int | str | None = None
    args: _Args = _EMPTY_ARGS


_DECODER = msgspec.json.Decoder(list[_Event])
_ONE = msgspec.json.Decoder(_Event)
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


@dataclass
class _Skipped:
    count: int = 0


def _lenient_decode(text: bytes, skipped: _Skipped) -> list[_Event]:
    """Slow path for a chunk with a wrongly-typed field: keep every event that converts."""
    out: list[_Event] = []
    for raw in _RAW_LIST.decode(text):
        try:
            out.append(_ONE.decode(raw))
            continue
        except msgspec.ValidationError:
            pass
        obj = msgspec.json.decode(raw)
        if not isinstance(obj, dict):
            skipped.count += 1
            continue
        for key in ("pid", "tid", "id", "name", "cat", "ph"):
            if key in obj and not isinstance(obj[key], (int, str)):
                obj[key] = str(obj[key]) if key in ("name", "cat", "ph") else None
        args = obj.get("args")
        if not isinstance(args, dict):
            obj.pop("args", None)
        else:
            # drop the args whose type we cannot use rather than the whole event
            obj["args"] = {k: v for k, v in args.items() if k not in _ARG_NAMES or _arg_ok(k, v)}
        try:
            out.append(_ONE.decode(msgspec.json.encode(obj)))
        except (msgspec.ValidationError, msgspec.DecodeError):
            skipped.count += 1
    return out


_ARG_NAMES = {f.encode_name: f.type for f in msgspec.structs.fields(_Args)}


def _arg_ok(key: str, value: Any) -> bool:
    try:
        msgspec.convert(value, _ARG_NAMES[key])
        return True
    except (msgspec.ValidationError, TypeError):
        return isinstance(_ARG_NAMES[key], type) and _ARG_NAMES[key] is msgspec.Raw


def _make_decoder(skipped: _Skipped) -> Any:
    def decode(text: bytes) -> list[_Event]:
        try:
            return _DECODER.decode(text)
        except msgspec.ValidationError:
            return _lenient_decode(text, skipped)
        except UnicodeDecodeError:
            # invalid UTF-8 inside strings (seen in real files): keep the event, mark the bytes
            fixed = text.decode("utf-8", "replace").encode("utf-8")
            try:
                return _DECODER.decode(fixed)
            except msgspec.ValidationError:
                return _lenient_decode(fixed, skipped)

    return decode


def _to_int_ids(values: list[Any]) -> pa.Array:
    try:
        return pa.array(values, type=pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([v if v.__class__ is int else _id_of(v) for v in values], type=pa.int64())


def _id_of(v: Any) -> int | None:
    if v is None or isinstance(v, int):
        return v
    try:
        return int(str(v), 0)
    except ValueError:
        pass
    digits = "".join(ch for ch in str(v) if ch.isdigit())
    return int(digits) if digits and len(digits) < 18 else None


def _int_col(values: list[Any], dtype: pa.DataType = pa.int64()) -> np.ndarray:
    arr = _to_int_ids(values) if dtype == pa.int64() else pa.array(values, type=dtype)
    return pc.fill_null(arr, -1).to_numpy()


def _dict(values: list[Any]) -> pa.Array:
    return pa.array(values, type=pa.string()).dictionary_encode()


def _raw_text(values: list[msgspec.Raw]) -> pa.Array:
    return pa.array([bytes(v) or None for v in values], type=pa.binary()).cast(pa.string())


_KINDS = [k.value for k in schema.Kind]
_KIND_DICT = pa.array(_KINDS, pa.string())
_K = schema.KIND_CODE


def _codes(arr: pa.Array, fn: Any) -> np.ndarray:
    """``fn`` applied to each distinct string (dictionary entry), broadcast to rows as int8 codes."""
    d = arr.dictionary_encode() if not pa.types.is_dictionary(arr.type) else arr
    lut = np.array([fn(v) for v in d.dictionary.to_pylist()] + [fn(None)], dtype=np.int8)
    return lut[pc.fill_null(d.indices, len(lut) - 1).to_numpy()]


def _kind_column(cat: pa.Array, ph: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Kind per row from the profiler category and phase: (dictionary array, int8 codes).

    Regexes/lookups run once per distinct category, never per row."""
    code = _codes(cat, lambda c: _K[schema.CATEGORY_TO_KIND.get((c or "").lower(), schema.Kind.OTHER).value])
    ph_code = _codes(ph, lambda v: 1 if v in ("s", "f", "t") else 2 if v in ("i", "I") else 0)
    code = np.where(ph_code == 1, np.int8(_K["flow"]), code)
    code = np.where((ph_code == 2) & (code == _K["other"]), np.int8(_K["instant"]), code)
    kind = pa.DictionaryArray.from_arrays(pa.array(code.astype(np.int32)), _KIND_DICT)
    return kind, code


_STRUCT_INT_FIELDS = {
    "external_id": "external_id",
    "external_id_old": "external_id_old",
    "correlation": "correlation",
    "device": "device",
    "stream": "stream",
    "bytes": "nbytes",
    "in_msg_nelems": "in_msg_nelems",
    "out_msg_nelems": "out_msg_nelems",
    "group_size": "group_size",
}


def _columns_from_structs(events: list[_Event]) -> dict[str, Any]:
    """Raw columns from msgspec Structs (the portable path)."""
    n = len(events)
    args = [e.args for e in events]
    cols: dict[str, Any] = {
        "ph": pa.array([e.ph for e in events], type=pa.string()),
        "cat": pa.array([e.cat for e in events], type=pa.string()),
        "name": pa.array([e.name for e in events], type=pa.string()),
        "ts": raw_lines_to_ns(b"\n".join([e.ts for e in events]), n),
        "dur": raw_lines_to_ns(b"\n".join([e.dur for e in events]), n),
        "pid": _int_col([e.pid for e in events]),
        "tid": _int_col([e.tid for e in events]),
        "id": _int_col([e.id for e in events]),
        "collective": pa.array([a.collective for a in args], type=pa.string()),
        "dtype": pa.array([a.dtype for a in args], type=pa.string()),
        "pg_name": pa.array([None if a.pg_name is None else str(a.pg_name) for a in args], type=pa.string()),
        "pg_desc": pa.array([a.pg_desc for a in args], type=pa.string()),
        "input_dims": _raw_text([a.input_dims for a in args]),
        "input_types": _raw_text([a.input_type for a in args]),
    }
    for col, attr in _STRUCT_INT_FIELDS.items():
        cols[col] = _int_col([getattr(a, attr) for a in args])
    return cols


def _columns_from_c(raw: dict[str, Any]) -> dict[str, Any]:
    """Raw columns from the C scanner's buffers (no per-event Python objects)."""
    cols: dict[str, Any] = {}
    for key, val in raw.items():
        if isinstance(val, tuple):
            data, offs, valid = val
            v = np.frombuffer(valid, dtype=np.uint8)
            bitmap = pa.py_buffer(np.packbits(v, bitorder="little").tobytes())
            arr = pa.StringArray.from_buffers(len(v), pa.py_buffer(offs), pa.py_buffer(data), bitmap)
            try:
                arr.validate(full=True)  # the scanner copies bytes as they are: check UTF-8
            except pa.ArrowInvalid:
                binary = pa.Array.from_buffers(pa.binary(), len(v), [bitmap, pa.py_buffer(offs), pa.py_buffer(data)])
                arr = pa.array([None if x is None else x.decode("utf-8", "replace") for x in binary.to_pylist()], pa.string())
            cols[key] = arr
        else:
            cols[key] = np.frombuffer(val, dtype=np.int64)
    for key in ("ts", "dur"):
        cols[key] = np.where(cols[key] == np.iinfo(np.int64).min, -1, cols[key])
    return cols


def _drop_rows(cols: dict[str, Any], include_python: bool) -> dict[str, Any]:
    """Portable path: drop metadata/counter rows, launch flows and (unless asked) python rows."""
    ph, cat = cols["ph"], cols["cat"]
    keep = pc.and_(pc.fill_null(pc.not_equal(ph, "M"), True), pc.fill_null(pc.not_equal(ph, "C"), True))
    # launch flows (CPU launch -> kernel) carry the same link as the correlation column: drop them
    launch_flow = pc.and_(
        pc.is_in(ph, pa.array(["s", "f", "t"])),
        pc.or_(pc.equal(cat, "ac2g"), pc.and_(pc.equal(cat, "async"), pc.equal(cols["name"], "launch"))),
    )
    keep = pc.and_(keep, pc.invert(pc.fill_null(launch_flow, False)))
    if not include_python:
        keep = pc.and_(keep, pc.fill_null(pc.not_equal(cat, "python_function"), True))
    keep_np = keep.to_numpy(zero_copy_only=False)
    if keep_np.all():
        return cols
    idx = np.flatnonzero(keep_np)
    ia = pa.array(idx)
    return {k: (v.take(ia) if isinstance(v, pa.Array) else v[idx]) for k, v in cols.items()}


def columns_to_table(cols: dict[str, Any], rank: int, include_python: bool, *, prefiltered: bool = False) -> pa.Table:
    """Shared last step of both paths: drop metadata rows (unless the C scanner already did:
    ``prefiltered``), derive kind/device/stream/flow."""
    ph, cat = cols["ph"], cols["cat"]
    if not prefiltered:
        cols = _drop_rows(cols, include_python)
        ph, cat = cols["ph"], cols["cat"]
    n = len(ph)
    ph = pc.fill_null(ph, "")
    cat = cat.dictionary_encode()
    kind, code = _kind_column(cat, ph)
    pid, tid = cols["pid"], cols["tid"]
    on_device = np.isin(code, [_K[k] for k in ("kernel", "memcpy", "memset", "gpu_annotation", "sync")])
    device = cols["device"]
    stream = cols["stream"]
    # old schemas and non-CUDA devices: pid is the device, tid the stream
    device = np.where(on_device, np.where(device < 0, pid, device), -1).astype(np.int32)
    stream = np.where(on_device, np.where(stream < 0, tid, stream), -1)
    ext = np.where(cols["external_id"] < 0, cols["external_id_old"], cols["external_id"])
    is_flow = code == _K["flow"]
    flow_id = np.where(is_flow, cols["id"], -1)
    dur = cols["dur"]
    out = {
        "rank": pa.array(np.full(n, rank, dtype=np.int32)),
        "kind": kind,
        "name": cols["name"].dictionary_encode(),
        "cat": cat,
        "pid": pa.array(pid),
        "tid": pa.array(tid),
        "device": pa.array(device),
        "stream": pa.array(stream),
        "ts_ns": pa.array(cols["ts"]),
        "dur_ns": pa.array(np.where(dur < 0, 0, dur)),
        "correlation": pa.array(cols["correlation"]),
        "external_id": pa.array(ext),
        "flow_id": pa.array(flow_id),
        "flow_phase": pc.if_else(pa.array(is_flow), ph, pa.scalar(None, pa.string())).dictionary_encode(),
        "input_dims": cols["input_dims"],
        "input_types": cols["input_types"],
        "collective": cols["collective"].dictionary_encode(),
        "in_msg_nelems": pa.array(cols["in_msg_nelems"]),
        "out_msg_nelems": pa.array(cols["out_msg_nelems"]),
        "msg_dtype": cols["dtype"].dictionary_encode(),
        "group_size": pa.array(np.asarray(cols["group_size"]).astype(np.int32)),
        "pg_name": cols["pg_name"].dictionary_encode(),
        "pg_desc": cols["pg_desc"].dictionary_encode(),
        "bytes": pa.array(cols["bytes"]),
    }
    return pa.Table.from_pydict(out, schema=schema.EVENT_SCHEMA)


def chunk_to_table(events: list[_Event], rank: int, include_python: bool) -> pa.Table:
    return columns_to_table(_columns_from_structs(events), rank, include_python)


@dataclass(frozen=True)
class FileRead:
    """One file's events plus what the file says about itself."""

    path: str
    table: pa.Table
    header: dict[str, Any]
    truncated: bool
    note: str
    skipped_events: int
    bytes_read: int


def read_kineto(
    path: str | Path,
    *,
    rank: int = 0,
    include_python: bool = False,
    block: int = BLOCK_BYTES,
    force_portable: bool = False,
) -> FileRead:
    """Read one Kineto trace file into the event table (all rows get ``rank``).

    Uses the C scanner when it is built (``_fastkineto``), else msgspec; both give the same table.
    """
    p = Path(path)
    if _fast is not None and not force_portable:
        try:
            return _read_fast(p, rank, include_python, block)
        except _FastPathFailed:
            pass  # odd content: the portable path below decides (and recovers what it can)
    skipped = _Skipped()
    decode = _make_decoder(skipped)
    tables: list[pa.Table] = []
    state = StreamState()
    # the decoded Structs are GC-free and dropped per chunk; collection passes only cost time here
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for events, state in iter_event_chunks(p, decode, block=block):
            if events:
                tables.append(chunk_to_table(events, rank, include_python))
            del events
    finally:
        if was_enabled:
            gc.enable()
    if not tables and not state.truncated and state.bytes_read == 0:
        raise TraceFormatError("file is empty", path=str(p), fix="the profiler wrote nothing; re-run the capture")
    table = _concat(tables)
    if table.num_rows == 0 and state.truncated:
        raise TraceFormatError(
            "truncated before the first complete event; nothing to recover",
            path=str(p),
            fix="re-capture the trace and let the profiler finish writing",
        )
    return FileRead(
        path=str(p),
        table=table,
        header=state.header,
        truncated=state.truncated,
        note=state.note,
        skipped_events=skipped.count,
        bytes_read=state.bytes_read,
    )


class _FastPathFailed(Exception):
    pass


def _read_fast(p: Path, rank: int, include_python: bool, block: int) -> FileRead:
    """C scanner path: scan each block in place, convert its columns to Arrow.

    The event cut by a block boundary is completed by scanning ``carry + first bytes of the next
    block`` (a small copy), after which the rest of the block is scanned without copying it.
    """
    assert _fast is not None
    tables: list[pa.Table] = []
    state = StreamState()
    closed = False
    tail = b""
    rem = b""
    head_bytes = max(64, min(1 << 20, block // 8))

    def scan(buf: bytes | memoryview) -> tuple[int, int]:
        n, consumed, status, raw = _fast.parse(buf, include_python)
        if status < 0:
            raise _FastPathFailed
        if n:
            tables.append(columns_to_table(_columns_from_c(raw), rank, include_python, prefiltered=True))
        return consumed, status

    for data, state in event_text_blocks(p, block=block):
        if closed:
            tail += bytes(data)
            continue
        view = memoryview(bytes(data) if isinstance(data, bytearray) else data)
        if rem:
            head = rem + bytes(view[:head_bytes])
            consumed, status = scan(head)
            if status == 1:
                closed, tail, rem = True, head[consumed + 1 :] + bytes(view[head_bytes:]), b""
                continue
            if len(view) <= head_bytes:
                rem = head[consumed:]
                continue
            if consumed < len(rem):  # one event longer than the head: join the whole block (rare)
                view = memoryview(head[consumed:] + bytes(view[head_bytes:]))
            else:
                view = view[consumed - len(rem) :]
        consumed, status = scan(view)
        if status == 1:
            closed, tail, rem = True, bytes(view[consumed + 1 :]), b""
            continue
        rem = bytes(view[consumed:])
    if not closed:
        state.truncated = True  # the event array never closes: a job killed mid-write
    elif not state.truncated:
        state.header.update(parse_trailer(tail))
    if not tables and state.truncated:
        raise TraceFormatError(
            "truncated before the first complete event; nothing to recover",
            path=str(p),
            fix="re-capture the trace and let the profiler finish writing",
        )
    return FileRead(
        path=str(p),
        table=_concat(tables),
        header=state.header,
        truncated=state.truncated,
        note=state.note,
        skipped_events=0,
        bytes_read=state.bytes_read,
    )


def _concat(tables: list[pa.Table]) -> pa.Table:
    if not tables:
        return schema.empty_table()
    if len(tables) == 1:
        return tables[0]
    # chunks stay separate (no full copy); dictionaries are unified so columns combine cheaply
    return pa.concat_tables(tables).unify_dictionaries()
