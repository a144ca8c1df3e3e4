"""HCCL's links: ``ASCEND_PROFILER_OUTPUT/communication_matrix.json``.

Written by torch_npu at profiler level 1 and up: ``{"step<N>": {"collective" | "p2p":
{"<op type>-<part>@<group hash>": {"<src>-<dst>": {"Transport Type", "Transit Size(MB)",
"Transit Time(ms)", "Bandwidth(GB/s)", "Op Name"}}}}}``. Per op type torch_npu keeps a few of its
operators (``top1``, ``middle``, ``bottom1``..``bottom3``, by bandwidth) and their ``total`` over all
of them: only ``total`` entries are read when there are any (the others repeat part of it), else
every entry (files that name operators one by one). ``src`` and ``dst`` are ranks *local to the
group*; the link from a rank to itself says which local rank the file's own rank is in that group
(msprof-analyze's ``comm_matrix_analysis`` maps them the same way). Sizes stay in HCCL's MB and
times in ns, so MB per ms is the bandwidth in the unit HCCL reports as GB/s.

The links become a small columnar dictionary in the file's header (``LINKS_KEY``).
"""

from __future__ import annotations

import math
import re
from typing import Any

from .ascend_files import read_json_beside

LINKS_KEY = "hccl_links"
FILE = "communication_matrix.json"
_MAX_BYTES = 64 << 20
_STEP = re.compile(r"^step(\d{0,9})$")
_LINK = re.compile(r"^(\d{1,9})-(\d{1,9})$")
_PART = re.compile(r"^(?P<op>.+?)-(?P<part>top\d|middle|bottom\d|total)$")


def read_hccl_links(timeline: str) -> tuple[dict[str, list[Any]] | None, str | None]:
    """The links of the ``communication_matrix.json`` beside a timeline (None when there is none),
    and a warning when the file is there but cannot be used."""
    doc, warning = read_json_beside(timeline, FILE, _MAX_BYTES, "HCCL's links")
    if doc is None:
        return None, warning
    cols = _columns(doc if isinstance(doc, dict) else {})
    return (cols, None) if cols["src"] else (None, None)


def _entries(doc: dict[str, Any]) -> list[tuple[int, str, str, dict[str, Any]]]:
    """(step, op type, group, links) of the entries to read (see the module)."""
    found: list[tuple[int, str, str, dict[str, Any], bool]] = []  # ..., is a "total" entry
    for step_key, kinds in doc.items():
        m = _STEP.match(str(step_key))
        if not m or not isinstance(kinds, dict):
            continue
        for kind in ("collective", "p2p"):
            ops = kinds.get(kind)
            for key, links in ops.items() if isinstance(ops, dict) else ():
                if not isinstance(links, dict):
                    continue
                name, _, group = str(key).partition("@")
                part = _PART.match(name)
                op = part.group("op") if part else name
                found.append((int(m.group(1) or -1), op, group, links, bool(part and part.group("part") == "total")))
    has_total = any(total for *_, total in found)
    return [(s, op, g, links) for s, op, g, links, total in found if total or not has_total]


def _columns(doc: dict[str, Any]) -> dict[str, list[Any]]:
    cols: dict[str, list[Any]] = {k: [] for k in ("step", "op", "group", "src", "dst", "transport", "mb", "transit_ns")}
    for step, op, group, links in _entries(doc):
        for link, v in links.items():
            m = _LINK.match(str(link))
            if m is None or not isinstance(v, dict):
                continue
            cols["step"].append(step)
            cols["op"].append(op[:64])
            cols["group"].append(group[:64])
            cols["src"].append(int(m.group(1)))
            cols["dst"].append(int(m.group(2)))
            cols["transport"].append(str(v.get("Transport Type") or "")[:16])
            cols["mb"].append(_number(v.get("Transit Size(MB)"), 1e9))
            cols["transit_ns"].append(round(_number(v.get("Transit Time(ms)"), 1e9) * 1e6))
    return cols


def _number(v: Any, limit: float) -> float:
    """A plausible non-negative number as recorded, else 0."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v < limit:
        return 0.0
    return float(v)
