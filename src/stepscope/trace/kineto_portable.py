"""Portable Kineto reader: typed, GC-free msgspec Structs (used when the C scanner is not built,
and as the fallback for content the scanner refuses). Gives the same table as the C path.

Only the fields the analyses need are materialized, unknown args are skipped by the decoder,
``Input Dims``/``Input type`` stay raw JSON text, and ``ts``/``dur`` are kept as raw number text and
converted exactly to integer ns (``numparse``).
"""

from __future__ import annotations

import gc
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .columns import FileRead, columns_to_tables, file_read
from .jsonsalvage import salvage
from .jsonstream import StreamState, iter_event_chunks
from .jsontext import max_depth
from .limits import MAX_JSON_DEPTH
from .numparse import raw_lines_to_ns

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
    sequence_number: int | None = msgspec.field(name="Sequence number", default=None)
    dtype: str | None = None
    pg_name: str | int | None = msgspec.field(name="Process Group Name", default=None)
    pg_desc: str | None = msgspec.field(name="Process Group Description", default=None)
    nbytes: int | str | None = msgspec.field(name="bytes", default=None)
    pg_ranks: msgspec.Raw = msgspec.field(name="Process Group Ranks", default=_NORAW)
    in_split: msgspec.Raw = msgspec.field(name="In split size", default=_NORAW)
    out_split: msgspec.Raw = msgspec.field(name="Out split size", default=_NORAW)
    task_type: str | None = msgspec.field(name="Task Type", default=None)  # Ascend NPU tasks (no "cat")


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


_RAW_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # control bytes JSON allows nowhere raw


def _make_decoder(skipped: _Skipped) -> Any:
    def decode(text: bytes) -> list[_Event]:
        # ``text`` is ``[`` events ``]``: an event nesting deeper than the limit is damaged, as in
        # the C scanner (msgspec itself would recurse until Python's recursion limit)
        if max_depth(text) > MAX_JSON_DEPTH + 1:
            raise msgspec.DecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels")
        try:
            return _DECODER.decode(text)
        except msgspec.ValidationError:
            return _lenient_decode(text, skipped)
        except msgspec.DecodeError:
            # raw control characters inside strings (JSON wants them escaped; the C scanner, like
            # many writers, takes them as they are): escaped, the text decodes to the same values
            if not _RAW_CONTROL.search(text):
                raise
            return decode(_RAW_CONTROL.sub(lambda m: b"\\u%04x" % m.group()[0], text))
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


def _int_col(values: list[Any], dtype: pa.DataType | None = None) -> np.ndarray:
    arr = _to_int_ids(values) if dtype is None or dtype == pa.int64() else pa.array(values, type=dtype)
    return pc.fill_null(arr, -1).to_numpy()


def _raw_text(values: list[msgspec.Raw]) -> pa.Array:
    return pa.array([bytes(v) or None for v in values], type=pa.binary()).cast(pa.string())


def _str_or_raw(values: list[msgspec.Raw]) -> pa.Array:
    """As the C scanner keeps such args: a JSON string's content, null for null, else the raw text."""
    out: list[str | None] = []
    for v in values:
        b = bytes(v)
        if not b or b == b"null":
            out.append(None)
        elif b[:1] == b'"':
            out.append(msgspec.json.decode(b, type=str))
        else:
            out.append(b.decode("utf-8", "replace"))
    return pa.array(out, type=pa.string())


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
    "sequence_number": "sequence_number",
}


def _columns_from_structs(events: list[_Event]) -> dict[str, Any]:
    """Raw columns from msgspec Structs (the portable path)."""
    n = len(events)
    args = [e.args for e in events]
    cols: dict[str, Any] = {
        "ph": pa.array([e.ph for e in events], type=pa.string()),
        "cat": pa.array([e.cat if e.cat is not None else e.args.task_type for e in events], type=pa.string()),
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
        "pg_ranks": _str_or_raw([a.pg_ranks for a in args]),
        "in_split": _str_or_raw([a.in_split for a in args]),
        "out_split": _str_or_raw([a.out_split for a in args]),
    }
    for col, attr in _STRUCT_INT_FIELDS.items():
        cols[col] = _int_col([getattr(a, attr) for a in args])
    return cols


def chunk_to_table(events: list[_Event], rank: int, include_python: bool) -> tuple[pa.Table, pa.Table | None]:
    return columns_to_tables(_columns_from_structs(events), rank, include_python)


def read_portable(p: Path, rank: int, include_python: bool, block: int) -> FileRead:
    skipped = _Skipped()
    decode = _make_decoder(skipped)
    tables: list[tuple[pa.Table, pa.Table | None]] = []
    state = StreamState()
    # the decoded Structs are GC-free and dropped per chunk; collection passes only cost time here
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for events, state in iter_event_chunks(p, decode, block=block):  # noqa: B007  (the last state is read below)
            if events:
                tables.append(chunk_to_table(events, rank, include_python))
            del events
    finally:
        if was_enabled:
            gc.enable()
    return file_read(str(p), tables, state, skipped.count + state.corrupt_events)


def salvage_region(text: bytes, rank: int, include_python: bool) -> tuple[list[tuple[pa.Table, pa.Table | None]], int]:
    """Damaged text (whole events, the damaged ones among them) read exactly as this reader reads
    damage (``jsonsalvage.salvage``): the tables of the events kept, and how many were dropped.
    The C scanner hands its damaged regions here, so the two readers agree on damaged files."""
    skipped = _Skipped()
    values, dropped = salvage(bytearray(text), _make_decoder(skipped), len(text))
    tables = [chunk_to_table(events, rank, include_python) for events in values if events]
    return tables, dropped + skipped.count
