"""The XPlane -> event table mapping rules that both XPlane readers apply (``xplane.py`` has the
whole mapping): which planes are read, which stats are kept and under which key, how a line and an
event name decide the row's kind, and how a device plane's stats become device properties.

The C-scanner path (``xplane_scan``) applies them once per distinct string, the portable path
(``xplane_portable``) once per distinct event template; both import them from here only.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal

from ..errors import TraceFormatError
from . import schema

_DEVICE_PLANE = re.compile(r"^/device:([A-Za-z_]+):(\d+)")
RUNTIME = re.compile(r"^(cu[A-Z]|cuda[A-Z]|hip[A-Z]|nccl[A-Z])")
CONTROL = re.compile(r"^(while|conditional|call)(\.\d+)?$")
_FUSION_KIND = re.compile(r"\bkind=k(\w+)")
_HLO_OPCODE = re.compile(r"=\s*[^=]*?\s([a-z][a-z0-9-]*)\(")

#: stat name -> key, for the string stats (direct or by ``ref_value``)
STRING_STATS = {
    "hlo_op": "op",
    "hlo_module": "module",
    "tf_op": "tf_op",
    "name": "name_stack",
    "long_name": "long_name",
    "hlo_category": "op_class",
}
#: stat name -> key, for the integer stats (``int64``, else ``uint64``, else ``double`` truncated)
INT_STATS = {
    "flops": "flops",
    "model_flops": "flops",
    "bytes_accessed": "bytes_accessed",
    "correlation_id": "correlation",
    "device_ordinal": "device_ordinal",
    "step_num": "step_num",
}
#: an integer stat (FLOPs, bytes, ids) outside [0, MAX_INT_STAT], or a double that is not a finite
#: number in that range (NaN, inf, uint64 max), is damaged: -1 (unknown), in both readers
MAX_INT_STAT = 2**62


def int_stat(int64: int, uint64: int, double: float) -> int:
    """One XStat's integer value as both readers read it: the int64 or uint64 value when set,
    else the double truncated; -1 when that value is outside [0, MAX_INT_STAT]."""
    v = int64 or uint64
    if v:
        return v if 0 <= v <= MAX_INT_STAT else -1
    return int(double) if math.isfinite(double) and 0 <= double <= MAX_INT_STAT else -1


STRING_KEYS = ("op", "module", "tf_op", "name_stack", "long_name", "op_class")
INT_KEYS = ("flops", "bytes_accessed", "correlation", "device_ordinal", "step_num")

LineKind = Literal["host", "steps", "ops", "annotation"]
SKIP_PLANE, HOST_PLANE = -2, -1

_K = schema.Kind


def plane_device(plane_name: str) -> int:
    """The device id of a ``/device:<TYPE>:<n>`` plane (``CUSTOM`` excluded), ``HOST_PLANE`` for
    ``/host:CPU``, ``SKIP_PLANE`` for every other plane."""
    m = _DEVICE_PLANE.match(plane_name)
    if m is not None and m.group(1) != "CUSTOM":
        return int(m.group(2))
    return HOST_PLANE if plane_name.startswith("/host:CPU") else SKIP_PLANE


def line_kind(plane_is_device: bool, line_name: str) -> LineKind:
    """What a line's events are: host events, step markers, XLA ops, or annotations."""
    if not plane_is_device:
        return "host"
    if line_name == "Steps":
        return "steps"
    if line_name in ("XLA Ops", "TPU Ops", "Ops") or line_name.startswith("Stream #"):
        return "ops"
    return "annotation"


def kernel_kind(name: str) -> str:
    """The kind of an XLA op row by its name: memcpy, memset, else kernel."""
    n = name.lower()
    if "memcpy" in n or n.startswith("copy-start") or "dmacopy" in n:
        return _K.MEMCPY.value
    if "memset" in n:
        return _K.MEMSET.value
    return _K.KERNEL.value


def good_tf_op(tf_op: object) -> bool:
    """Whether a ``tf_op`` stat is a name stack (TPU, newer GPU); else the ``name`` stat is."""
    return isinstance(tf_op, str) and bool(tf_op) and not tf_op.endswith(":")


def op_class_from_hlo(long_name: str) -> str | None:
    """The HLO opcode read from ``long_name`` (the instruction's HLO text), with the fusion kind
    for fusions (``fusion:kLoop``); None when the text has no opcode."""
    m = _HLO_OPCODE.search(long_name)
    if m is None:
        return None
    fk = _FUSION_KIND.search(long_name)
    return f"{m.group(1)}:k{fk.group(1)}" if (m.group(1) == "fusion" and fk) else m.group(1)


def plane_properties(plane_name: str, stats: dict[str, Any]) -> dict[str, Any] | None:
    """A device plane's stats as Kineto-style device properties (None for other planes)."""
    device = plane_device(plane_name)
    if device < 0 or not stats:
        return None
    return {
        "id": device,
        "name": "",
        "vendor": stats.get("device_vendor"),
        "computeMajor": stats.get("compute_cap_major"),
        "computeMinor": stats.get("compute_cap_minor"),
        "numSms": stats.get("core_count"),
        "totalGlobalMem": stats.get("memory_size"),
        "clockRateKHz": stats.get("clock_rate"),
        "memoryBandwidthBytesPerS": stats.get("memory_bandwidth"),
    }


def not_xspace(path: Path) -> TraceFormatError:
    """The error for a file with no complete XSpace plane."""
    return TraceFormatError(
        "not an XSpace protobuf (or truncated before its first complete plane)",
        path=str(path),
        fix="pass the <host>.xplane.pb written by jax.profiler; re-capture if the file was cut",
    )
