"""Portable XPlane reader: the protobuf runtime (upb, C) parses the XSpace, Python maps it.

Same mapping (``xplane_rules``; the whole of it in ``xplane.py``) and the same table as the
C-scanner path (``xplane_scan``, tested equal). Each event maps to a row *template* (kind, name,
XLA columns...) decided once per distinct (metadata, stats) pair of its line; only the times and
correlation ids are per event (about 1-2 us per event). A file that does not parse whole is walked
plane by plane: the complete planes before the cut are kept, with a note.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from . import schema
from .columns import FileRead, assemble_table
from .xplane_rules import (
    CONTROL,
    INT_KEYS,
    INT_STATS,
    RUNTIME,
    SKIP_PLANE,
    STRING_KEYS,
    STRING_STATS,
    good_tf_op,
    int_stat,
    kernel_kind,
    line_kind,
    not_xspace,
    op_class_from_hlo,
    plane_device,
    plane_properties,
)
from .xspace_pb import xspace_class

_K = schema.Kind
_STRING_KEYS = frozenset(STRING_KEYS)
_TEMPLATE_KEYS = tuple(k for k in STRING_KEYS + INT_KEYS if k != "correlation")  # per event: correlation
_KEPT = ("op", "module", "op_class", "flops", "bytes_accessed", "correlation", "device_ordinal", "step_num")
_STRING_COLS = ("kind", "name", "cat", "op", "module", "scope", "op_class")
_OUT_COLS = (*_STRING_COLS, "pid", "tid", "device", "stream", "ts", "dur", "flops", "bytes_accessed", "correlation")
_Meta = tuple[str, dict[str, Any]]  # an event metadata's name and stats


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _stats(stats: Any, stat_names: dict[int, str], wanted: dict[int, str]) -> dict[str, Any]:
    """The wanted stats of one event or metadata: strings (direct or by reference) and ints."""
    out: dict[str, Any] = {}
    for st in stats:
        key = wanted.get(st.metadata_id)
        if key is None:
            continue
        if key in _STRING_KEYS:
            ref = st.ref_value
            out[key] = stat_names.get(ref) if ref else _text(st.str_value)
        else:
            out[key] = int_stat(st.int64_value, st.uint64_value, st.double_value)
    return out


def _finish(st: dict[str, Any]) -> dict[str, Any]:
    """Name stack from ``tf_op`` (TPU, newer GPU) or ``name``; XLA's category, else the HLO opcode
    (and fusion kind) read from ``long_name`` (the instruction's HLO text)."""
    tf_op = st.get("tf_op")
    scope = tf_op if good_tf_op(tf_op) else st.get("name_stack")
    out = {k: v for k, v in st.items() if k in _KEPT}
    out["scope"] = scope or None
    long_name = st.get("long_name")
    if not out.get("op_class") and isinstance(long_name, str):
        op_class = op_class_from_hlo(long_name)
        if op_class is not None:
            out["op_class"] = op_class
    return out


def _plane_rows(plane: Any, include_python: bool, out: dict[str, list[Any]]) -> int:
    """Append one plane's rows to ``out`` (column -> list of per-line arrays); returns the number
    of rows added."""
    device = plane_device(_text(plane.name))
    if device == SKIP_PLANE:
        return 0
    stat_names = {k: _text(v.name) for k, v in plane.stat_metadata.items()}
    wanted: dict[int, str] = {
        k: STRING_STATS.get(n) or INT_STATS[n] for k, n in stat_names.items() if n in STRING_STATS or n in INT_STATS
    }
    meta: dict[int, _Meta] = {
        mid: (_text(md.name or md.display_name), _stats(md.stats, stat_names, wanted))
        for mid, md in plane.event_metadata.items()
    }
    added = 0
    for line in plane.lines:
        evs = line.events
        if len(evs):
            ev_stats = [_stats(e.stats, stat_names, wanted) if len(e.stats) else None for e in evs]
            added += _line_rows(line, ev_stats, meta, device, include_python, out)
    return added


def _line_rows(
    line: Any,
    ev_stats: list[dict[str, Any] | None],
    meta: dict[int, _Meta],
    device: int,
    include_python: bool,
    out: dict[str, list[Any]],
) -> int:
    """Append one line's rows to ``out``; returns the number of rows added."""
    evs, n = line.events, len(ev_stats)
    lname = _text(line.display_name or line.name)
    lkind = line_kind(device >= 0, lname)
    mids = [e.metadata_id for e in evs]
    templates: dict[tuple[Any, ...], int] = {}
    rows: list[tuple[Any, ...] | None] = []
    idx = np.empty(n, dtype=np.int64)
    for i in range(n):
        s = ev_stats[i]
        key = (mids[i], *(s.get(k) for k in _TEMPLATE_KEYS)) if s else (mids[i],)
        j = templates.get(key)
        if j is None:
            j = templates[key] = len(rows)
            md = meta.get(mids[i], (f"<metadata {mids[i]}>", {}))
            rows.append(_template(md, s, lkind, lname, int(line.id), device, include_python, i))
        idx[i] = j
    sel = np.flatnonzero(np.array([r is not None for r in rows], dtype=bool)[idx])
    if not sel.size:
        return 0
    base_ps = int(line.timestamp_ns) * 1000
    out["ts"].append(((base_ps + np.fromiter((e.offset_ps for e in evs), np.int64, n)) // 1000)[sel])
    out["dur"].append((np.fromiter((e.duration_ps for e in evs), np.int64, n) // 1000)[sel])
    corr = np.fromiter(((s.get("correlation", -1) if s else -1) for s in ev_stats), np.int64, n)
    out["correlation"].append(corr[sel])
    _append_templates(out, rows, idx[sel])
    return int(sel.size)


def _append_templates(out: dict[str, list[Any]], rows: list[tuple[Any, ...] | None], ti: np.ndarray) -> None:
    """Append the template columns of the rows ``ti`` (indices into ``rows``) to ``out``."""
    tmpl = [r if r is not None else (None,) * 12 for r in rows]
    for c, pos in (("kind", 0), ("name", 1), ("cat", 2), ("op", 7), ("module", 8), ("scope", 9), ("op_class", 10)):
        out[c].append(pa.array([r[pos] for r in tmpl], pa.string()).take(pa.array(ti)))
    for c, pos in (("pid", 3), ("tid", 4), ("device", 5), ("stream", 6)):
        out[c].append(np.array([r[pos] if r[pos] is not None else -1 for r in tmpl], dtype=np.int64)[ti])
    out["flops"].append(np.array([r[11][0] if r[11] else -1 for r in tmpl], dtype=np.int64)[ti])
    out["bytes_accessed"].append(np.array([r[11][1] if r[11] else -1 for r in tmpl], dtype=np.int64)[ti])


def _int_or(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else -1


def _template(
    meta: _Meta,
    ev: dict[str, Any] | None,
    lkind: str,
    lname: str,
    line_id: int,
    device: int,
    include_python: bool,
    i: int,
) -> tuple[Any, ...] | None:
    """(kind, name, cat, pid, tid, device, stream, op, module, scope, op_class, (flops, bytes)) for an
    event (the ``i``-th of its line), or None to drop it."""
    name, mstats = meta
    st = _finish({**mstats, **ev} if ev else mstats)
    if lkind == "host" and "step_num" in st:
        kind, pid, tid, dev, stream = _K.USER_ANNOTATION.value, 0, line_id, -1, -1
        st["scope"] = name
        name = f"XLAStep#{st['step_num']}"
    elif lkind == "host" and st.get("op") and "device_ordinal" in st:
        pid, tid, dev, stream = 0, -1, int(st["device_ordinal"]), line_id
        kind = _K.GPU_ANNOTATION.value if CONTROL.match(st["op"]) else kernel_kind(name)
    elif lkind == "host":
        if name.startswith("$"):
            if not include_python:
                return None
            kind = _K.PYTHON_FUNCTION.value
        else:
            kind = _K.RUNTIME.value if RUNTIME.match(name) else _K.CPU_OP.value
        pid, tid, dev, stream = 0, line_id, -1, -1
    elif lkind == "steps":
        kind, pid, tid, dev, stream = _K.USER_ANNOTATION.value, 1 + device, -1 - line_id, -1, -1
        name = f"XLAStep#{name}" if name.isdigit() else f"XLAStep#{i}"
    else:
        kind = kernel_kind(name) if lkind == "ops" else _K.GPU_ANNOTATION.value
        if kind == _K.KERNEL.value and st.get("op") and CONTROL.match(st["op"]):
            kind = _K.GPU_ANNOTATION.value
        pid, tid, dev, stream = 0, -1, device, line_id
    strs = [None if st.get(c) is None else str(st.get(c)) for c in ("op", "module", "scope", "op_class")]
    flops_bytes = (_int_or(st.get("flops")), _int_or(st.get("bytes_accessed")))
    return (kind, name, lname, pid, tid, dev, stream, *strs, flops_bytes)


def _table(out: dict[str, list[Any]], rank: int) -> pa.Table:
    """Per-line arrays -> one table."""

    def cat(c: str) -> Any:
        if c in _STRING_COLS:
            return pa.concat_arrays(out[c]) if out[c] else pa.array([], pa.string())
        return np.concatenate(out[c]) if out[c] else np.empty(0, np.int64)

    return assemble_table({c: cat(c) for c in _OUT_COLS}, rank)


def _planes_until_cut(data: bytes) -> tuple[list[bytes], bool]:
    """Top-level walk of the XSpace wire format: the serialized planes (field 1) that are
    complete, and whether the data ended inside one."""
    planes: list[bytes] = []
    pos, n = 0, len(data)
    while pos < n:
        tag, pos = _varint(data, pos)
        if pos < 0:
            return planes, True
        field, wire = tag >> 3, tag & 7
        if wire == 2:
            size, pos = _varint(data, pos)
            if pos < 0 or pos + size > n:
                return planes, True
            if field == 1:
                planes.append(data[pos : pos + size])
            pos += size
        elif wire == 0:
            _, pos = _varint(data, pos)
            if pos < 0:
                return planes, True
        else:
            return planes, True  # not an XSpace layout we know: stop here
    return planes, False


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    while pos < len(data) and shift < 70:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    return 0, -1


def _parse(p: Path, data: bytes) -> tuple[list[Any], list[str], str]:
    """(planes, host names, note): the whole XSpace, else its complete planes before the cut or
    the damage, with a note saying so (host names are then unknown)."""
    from google.protobuf.message import DecodeError

    xspace = xspace_class()
    try:
        space = xspace.FromString(data)
        return list(space.planes), [_text(h) for h in space.hostnames], ""
    except DecodeError:
        chunks, cut = _planes_until_cut(data)
    plane_cls = type(xspace().planes.add())
    planes = []
    for c in chunks:
        try:
            planes.append(plane_cls.FromString(c))
        except DecodeError:
            break
    if not planes:
        raise not_xspace(p)
    return (
        planes,
        [],
        f"the file does not parse whole ({'cut' if cut else 'corrupt'}): kept {len(planes)} complete plane(s)",
    )


def _device_properties(planes: list[Any]) -> list[dict[str, Any]]:
    """Kineto-style ``deviceProperties`` of the device planes, from their own stats."""
    props = []
    for pl in planes:
        names = {k: _text(v.name) for k, v in pl.stat_metadata.items()}
        stats = {
            names.get(st.metadata_id, ""): (
                _text(st.str_value) if st.WhichOneof("value") == "str_value" else (st.int64_value or st.uint64_value)
            )
            for st in pl.stats
        }
        pp = plane_properties(_text(pl.name), {k: v for k, v in stats.items() if k})
        if pp:
            props.append(pp)
    return props


def read_portable(p: Path, data: bytes, rank: int, include_python: bool) -> FileRead:
    """The event table of the XSpace ``data`` (read from ``p``), by the protobuf runtime."""
    planes, hosts, note = _parse(p, data)
    out: dict[str, list[Any]] = {c: [] for c in _OUT_COLS}
    skipped = sum(1 for plane in planes if _plane_rows(plane, include_python, out) == 0 and len(plane.lines))
    header: dict[str, Any] = {
        "format": "xplane",
        "hostnames": hosts,
        "planes": [_text(pl.name) for pl in planes],
        "deviceProperties": _device_properties(planes),
    }
    if skipped:
        header["skipped_planes"] = skipped
    return FileRead(
        path=str(p),
        table=_table(out, rank),
        header=header,
        truncated=bool(note),
        note=note,
        skipped_events=0,
        bytes_read=len(data),
    )
