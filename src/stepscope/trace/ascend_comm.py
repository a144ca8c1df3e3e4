"""HCCL's own timing of each collective: ``ASCEND_PROFILER_OUTPUT/communication.json``.

Written by torch_npu (``_communication_parser.py``) at profiler level 1 and up:
``{"step<N>": {"collective" | "p2p": {"<op>@<group hash>": {"Communication Time Info": {...},
"Communication Bandwidth Info": {<transport>: {...}}}, "Total Op Info": {...}}}}``. Per operator:
``Elapse Time(ms)`` (its whole time), ``Transit Time(ms)`` (moving data), ``Wait Time(ms)``
(waiting for the peers: a late rank, not the link), ``Synchronization Time(ms)``; per transport
(``HCCS``, ``RDMA``, ``PCIE``, ``SDMA``, ``SIO``...) ``Transit Size(MB)`` and ``Transit Time(ms)``.
Units are mixed (start in us, durations in ms, sizes in MB); sizes are kept in HCCL's MB, so
that MB / ms is the bandwidth in the unit HCCL reports as GB/s. The per-step "Total Op Info" sums
are left out: they repeat the operators.

The operators become a small columnar dictionary in the file's header (``HCCL_KEY``): lists of
equal length, so it survives the Parquet cache as JSON.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .ascend_files import read_json_beside

HCCL_KEY = "hccl_ops"
FILE = "communication.json"
_STEP = re.compile(r"^step(\d{0,9})$")
_MAX_BYTES = 64 << 20  # a communication.json of a long run is a few MB
_TIME = "Communication Time Info"
_LINKS = "Communication Bandwidth Info"
_FIELDS = {"elapse_ns": "Elapse Time(ms)", "transit_ns": "Transit Time(ms)", "wait_ns": "Wait Time(ms)"}
_FIELDS |= {"sync_ns": "Synchronization Time(ms)"}


def read_hccl_ops(timeline: str) -> tuple[dict[str, list[Any]] | None, str | None]:
    """The operators of the ``communication.json`` beside a timeline (None when there is none),
    and a warning when the file is there but cannot be used."""
    doc, warning = read_json_beside(timeline, FILE, _MAX_BYTES, "HCCL's own timing")
    if doc is None:
        return None, warning
    ops = _columns(doc if isinstance(doc, dict) else {})
    return (ops, None) if ops["name"] else (None, None)


def _columns(doc: dict[str, Any]) -> dict[str, list[Any]]:
    cols: dict[str, list[Any]] = {k: [] for k in ("name", "group", "step", "p2p", *_FIELDS, "mb", "links")}
    for step_key, kinds in doc.items():
        m = _STEP.match(str(step_key))
        if not m or not isinstance(kinds, dict):
            continue
        step = int(m.group(1)) if m.group(1) else -1
        for kind in ("collective", "p2p"):
            ops = kinds.get(kind)
            for key, op in ops.items() if isinstance(ops, dict) else ():
                if key == "Total Op Info" or not isinstance(op, dict) or not isinstance(op.get(_TIME), dict):
                    continue
                name, _, group = str(key).partition("@")
                cols["name"].append(name[:256])
                cols["group"].append(group[:64])
                cols["step"].append(step)
                cols["p2p"].append(kind == "p2p")
                for out, field in _FIELDS.items():
                    cols[out].append(_ns(op[_TIME].get(field)))
                links = _links(op.get(_LINKS))
                cols["links"].append(links)
                # the same data shows under its link and the engine that moved it (HCCS and SDMA)
                cols["mb"].append(max((mb for mb, _ in links.values()), default=0.0))
    return cols


def _ns(ms: Any) -> int:
    """Milliseconds as recorded -> ns; 0 for a missing or implausible value."""
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms) or not 0 <= ms < 1e9:
        return 0
    return round(ms * 1e6)


def _links(info: Any) -> dict[str, tuple[float, int]]:
    """transport -> (MB, transit ns), for the transports that moved data."""
    out: dict[str, tuple[float, int]] = {}
    for transport, v in info.items() if isinstance(info, dict) else ():
        if not isinstance(v, dict):
            continue
        mb = v.get("Transit Size(MB)")
        if isinstance(mb, (int, float)) and not isinstance(mb, bool) and math.isfinite(mb) and 0 < mb < 1e9:
            out[str(transport)[:16]] = (float(mb), _ns(v.get("Transit Time(ms)")))
    return out
