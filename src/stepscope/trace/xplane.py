"""JAX / XLA profiler XSpace (``<host>.xplane.pb``) -> the normalized event table.

Mapping (one file = one host; ``split_devices`` makes each device of a host its own rank):
- a plane ``/device:<TYPE>:<n>`` is device ``n``; each of its lines is a stream (``stream`` = line
  id). Lines of XLA ops (``XLA Ops`` on TPU, ``Stream #k`` on GPU) are ``kernel`` rows (memcpy /
  memset by name); ``XLA Modules`` and name-scope / source lines are ``gpu_annotation`` rows;
  the ``Steps`` line gives step rows named ``XLAStep#<n>`` (host-like, for step detection;
  ``pid`` = 1 + the device, so a per-device split keeps each device's own steps).
- the ``/host:CPU`` plane: each line is a thread (``tid`` = line id); events are ``cpu_op`` rows,
  ``runtime`` when they are driver/runtime calls (cu*/cuda*/hip*), ``python_function`` for the
  Python tracer's ``$``-prefixed frames (dropped unless asked for). On the CPU backend the XLA
  ops themselves are host events with ``hlo_op`` and ``device_ordinal`` stats: they become
  ``kernel`` rows of device ``device_ordinal`` (stream = the thread); ``jax.profiler``
  ``StepTraceAnnotation`` events (a ``step_num`` stat) become ``XLAStep#<n>`` rows.
- control-flow ops (``while``, ``conditional``, ``call``) contain the ops they run: they are
  ``gpu_annotation`` rows (category ``xla_control``), not device work, so time is not counted twice.
- other planes (``/host:metadata``, ``Task Environment``, ``/device:CUSTOM:*``) are skipped and
  counted in the note.
- times: ``ts_ns = line.timestamp_ns + offset_ps // 1000``, ``dur_ns = duration_ps // 1000``.
- stats of the event, else of its metadata: ``hlo_op`` -> ``op``, ``hlo_module`` -> ``module``,
  ``tf_op`` / ``long_name`` / ``name`` (the name stack) -> ``scope``, ``hlo_category`` ->
  ``op_class``, ``flops`` / ``model_flops`` -> ``flops``, ``bytes_accessed`` -> ``bytes_accessed``,
  ``correlation_id`` -> ``correlation``; a ``ref_value`` names a stat-metadata entry whose name is
  the string value.

Parsing is done by the protobuf runtime (C); the per-line column extraction is Python list
comprehensions over events (about 1-2 us per event). A file that does not parse whole is walked
plane by plane: the complete planes before the cut are kept, with a warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import TraceFormatError
from . import schema
from .columns import FileRead, assemble_table
from .jsonstream import StreamState
from .xplane_rules import (
    CONTROL,
    INT_STATS,
    RUNTIME,
    SKIP_PLANE,
    STRING_STATS,
    good_tf_op,
    kernel_kind,
    line_kind,
    not_xspace,
    op_class_from_hlo,
    plane_device,
    plane_properties,
)
from .xplane_scan import columns, device_properties
from .xspace_pb import xspace_class

try:  # the optional C scanner (setup.py); the protobuf runtime path is used without it
    from . import _fastxplane as _fast  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _fast = None

_K = schema.Kind


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


_STRING_KEYS = frozenset(STRING_STATS.values())


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
            out[key] = st.int64_value or st.uint64_value or int(st.double_value)
    return out


def _finish(st: dict[str, Any]) -> dict[str, Any]:
    """Name stack from ``tf_op`` (TPU, newer GPU) or ``name``; XLA's category, else the HLO opcode
    (and fusion kind) read from ``long_name`` (the instruction's HLO text)."""
    tf_op = st.get("tf_op")
    scope = tf_op if good_tf_op(tf_op) else st.get("name_stack")
    out = {
        k: v
        for k, v in st.items()
        if k in ("op", "module", "op_class", "flops", "bytes_accessed", "correlation", "device_ordinal", "step_num")
    }
    out["scope"] = scope or None
    long_name = st.get("long_name")
    if not out.get("op_class") and isinstance(long_name, str):
        op_class = op_class_from_hlo(long_name)
        if op_class is not None:
            out["op_class"] = op_class
    return out


_KEYS = (
    "op",
    "module",
    "tf_op",
    "name_stack",
    "long_name",
    "op_class",
    "flops",
    "bytes_accessed",
    "device_ordinal",
    "step_num",
)


def _plane_rows(plane: Any, include_python: bool, out: dict[str, list[Any]]) -> int:
    """Append one plane's rows to ``out`` (column -> list of per-line arrays); returns the number
    of rows added. Each event maps to a row *template* (kind, name, XLA columns...) decided once
    per distinct (metadata, stats) pair; only the times and correlation ids are per event."""
    device = plane_device(_text(plane.name))
    if device == SKIP_PLANE:
        return 0
    is_device = device >= 0
    stat_names = {k: _text(v.name) for k, v in plane.stat_metadata.items()}
    wanted: dict[int, str] = {
        k: STRING_STATS.get(n) or INT_STATS[n] for k, n in stat_names.items() if n in STRING_STATS or n in INT_STATS
    }
    meta: dict[int, tuple[str, dict[str, Any]]] = {}
    for mid, md in plane.event_metadata.items():
        meta[mid] = (_text(md.name or md.display_name), _stats(md.stats, stat_names, wanted))
    added = 0
    for line in plane.lines:
        evs = line.events
        n = len(evs)
        if not n:
            continue
        lname = _text(line.display_name or line.name)
        lkind = line_kind(is_device, lname)
        base_ps = int(line.timestamp_ns) * 1000
        ts = (base_ps + np.fromiter((e.offset_ps for e in evs), np.int64, n)) // 1000
        dur = np.fromiter((e.duration_ps for e in evs), np.int64, n) // 1000
        mids = [e.metadata_id for e in evs]
        ev_stats = [_stats(e.stats, stat_names, wanted) if len(e.stats) else None for e in evs]
        corr = np.fromiter(((s.get("correlation", -1) if s else -1) for s in ev_stats), np.int64, n)
        templates: dict[tuple[Any, ...], int] = {}
        rows: list[tuple[Any, ...] | None] = []
        idx = np.empty(n, dtype=np.int64)
        for i in range(n):
            s = ev_stats[i]
            key = (mids[i], *(s.get(k) for k in _KEYS)) if s else (mids[i],)
            j = templates.get(key)
            if j is None:
                j = templates[key] = len(rows)
                rows.append(
                    _template(
                        meta.get(mids[i], (f"<metadata {mids[i]}>", {})),
                        s,
                        lkind,
                        lname,
                        int(line.id),
                        device,
                        include_python,
                        i,
                    )
                )
            idx[i] = j
        keep_rows = np.array([r is not None for r in rows], dtype=bool)
        keep = keep_rows[idx]
        if not keep.any():
            continue
        sel = np.flatnonzero(keep)
        tmpl = [r if r is not None else (None,) * 12 for r in rows]
        ti = idx[sel]
        for c, pos in (("kind", 0), ("name", 1), ("cat", 2), ("op", 7), ("module", 8), ("scope", 9), ("op_class", 10)):
            out[c].append(pa.array([r[pos] for r in tmpl], pa.string()).take(pa.array(ti)))
        for c, pos in (("pid", 3), ("tid", 4), ("device", 5), ("stream", 6)):
            out[c].append(np.array([r[pos] if r[pos] is not None else -1 for r in tmpl], dtype=np.int64)[ti])
        out["flops"].append(np.array([r[11][0] if r[11] else -1 for r in tmpl], dtype=np.int64)[ti])
        out["bytes_accessed"].append(np.array([r[11][1] if r[11] else -1 for r in tmpl], dtype=np.int64)[ti])
        out["ts"].append(ts[sel])
        out["dur"].append(dur[sel])
        out["correlation"].append(corr[sel])
        added += int(sel.size)
    return added


def _int_or(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else -1


def _template(
    meta: tuple[str, dict[str, Any]],
    ev: dict[str, Any] | None,
    lkind: str,
    lname: str,
    line_id: int,
    device: int,
    include_python: bool,
    i: int,
) -> tuple[Any, ...] | None:
    """(kind, name, cat, pid, tid, device, stream, op, module, scope, op_class, (flops, bytes)) for an
    event, or None to drop it."""
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
    return (
        kind,
        name,
        lname,
        pid,
        tid,
        dev,
        stream,
        *strs,
        (_int_or(st.get("flops")), _int_or(st.get("bytes_accessed"))),
    )


_OUT_COLS = (
    "kind",
    "name",
    "cat",
    "pid",
    "tid",
    "device",
    "stream",
    "ts",
    "dur",
    "op",
    "module",
    "scope",
    "op_class",
    "flops",
    "bytes_accessed",
    "correlation",
)


def _table(out: dict[str, list[Any]], rank: int) -> pa.Table:
    """Portable path: per-line arrays -> one table."""

    def cat(c: str, string: bool) -> Any:
        if string:
            return pa.concat_arrays(out[c]) if out[c] else pa.array([], pa.string())
        return np.concatenate(out[c]) if out[c] else np.empty(0, np.int64)

    return assemble_table(
        {c: cat(c, c in ("kind", "name", "cat", "op", "module", "scope", "op_class")) for c in _OUT_COLS}, rank
    )


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


def read_xplane(
    path: str | Path, *, rank: int = 0, include_python: bool = False, force_portable: bool = False
) -> FileRead:
    """Read one ``.xplane.pb`` file (one host) into the event table: the C scanner
    (``_fastxplane``) when it is built, else the protobuf runtime; both give the same table."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise TraceFormatError(
            f"cannot read ({exc.strerror})", path=str(p), fix="check the path and permissions"
        ) from None
    if _fast is not None and not force_portable:
        return _read_fast(p, data, rank, include_python)
    return _read_portable(p, data, rank, include_python)


def _read_fast(p: Path, data: bytes, rank: int, include_python: bool) -> FileRead:
    raw = _fast.scan(data)
    if raw["complete_planes"] == 0:
        raise not_xspace(p)
    hn = np.frombuffer(raw["hn"], np.int64).reshape(-1, 2)
    pl = np.frombuffer(raw["pl_name"], np.int64).reshape(-1, 2)
    text = [data[o : o + n].decode("utf-8", "replace") if o >= 0 else "" for o, n in pl]

    header: dict[str, Any] = {
        "format": "xplane",
        "hostnames": [data[o : o + n].decode("utf-8", "replace") for o, n in hn],
        "planes": text,
        "deviceProperties": device_properties(data, raw),
    }
    note = f"the file does not parse whole: kept {raw['complete_planes']} complete plane(s)" if raw["truncated"] else ""
    return FileRead(
        path=str(p),
        table=assemble_table(columns(data, raw, include_python), rank),
        header=header,
        truncated=bool(raw["truncated"]),
        note=note,
        skipped_events=0,
        bytes_read=len(data),
    )


def _read_portable(p: Path, data: bytes, rank: int, include_python: bool) -> FileRead:
    from google.protobuf.message import DecodeError

    xspace = xspace_class()
    state = StreamState(bytes_read=len(data), bytes_used=len(data))
    planes: list[Any]
    try:
        space = xspace.FromString(data)
        planes = list(space.planes)
        hosts = [_text(h) for h in space.hostnames]
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
            raise not_xspace(p) from None
        state.truncated = True
        state.note = (
            f"the file does not parse whole ({'cut' if cut else 'corrupt'}): kept {len(planes)} complete plane(s)"
        )
        hosts = []
    out: dict[str, list[Any]] = {c: [] for c in _OUT_COLS}
    skipped = 0
    for plane in planes:
        if _plane_rows(plane, include_python, out) == 0 and len(plane.lines):
            skipped += 1
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
    state.header = {
        "format": "xplane",
        "hostnames": hosts,
        "planes": [_text(pl.name) for pl in planes],
        "deviceProperties": props,
    }
    if skipped:
        state.header["skipped_planes"] = skipped
    return FileRead(
        path=str(p),
        table=_table(out, rank),
        header=state.header,
        truncated=state.truncated,
        note=state.note,
        skipped_events=0,
        bytes_read=len(data),
    )


def split_devices(table: pa.Table) -> list[tuple[int, pa.Table]]:
    """One table per device of a multi-device host: the device's own rows and steps, plus every
    host row (shared). A host with one device (or none) stays one table."""
    dev = table["device"].to_numpy()
    pid = table["pid"].to_numpy()
    devices = np.unique(dev[dev >= 0])
    if devices.size < 2:
        return [(int(devices[0]) if devices.size else 0, table)]
    host = (dev < 0) & (pid == 0)
    out = []
    for d in devices:
        rows = np.flatnonzero(host | (dev == d) | ((dev < 0) & (pid == 1 + d)))
        out.append((int(d), table.take(pa.array(rows))))
    return out
