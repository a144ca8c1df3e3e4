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

Two readers give the same table: the C scanner (``_fastxplane.c``, columns in ``xplane_scan``) and
the protobuf runtime (``xplane_portable``), both applying the rules of ``xplane_rules``. A file that
does not parse whole keeps its complete planes before the cut, with a note.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import TraceFormatError
from .columns import FileRead, assemble_table
from .xplane_portable import read_portable
from .xplane_rules import not_xspace
from .xplane_scan import columns, device_properties

try:  # the optional C scanner (setup.py); the protobuf runtime path is used without it
    from . import _fastxplane as _fast  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _fast = None


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
    return read_portable(p, data, rank, include_python)


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
