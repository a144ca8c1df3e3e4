"""msprof's own split of each step: ``ASCEND_PROFILER_OUTPUT/step_trace_time.csv``.

torch_npu writes it (``_trace_step_time_parser.py``) from its Overlap Analysis lanes clipped to
each ``ProfilerStep#N`` range, in microseconds: ``Computing`` (union of the compute tasks),
``Communication(Not Overlapped)``, ``Overlapped``, ``Communication``, ``Free`` (no task),
``Stage`` (the step less ``Bubble``), ``Bubble`` (the time in ``hcom_receive`` operators: a
pipeline-parallel wait), and in newer files ``Device_id`` and ``Preparing`` (from the framework's
step start to the device's first task). Columns are read by name; an older file lacks some.

The rows become a small columnar dictionary in the file's header (``STEPS_KEY``: lists of one
length, ns), kept by the Parquet cache, to cross-check stepscope's own breakdown.
"""

from __future__ import annotations

import csv
import io
import math
import re
from typing import Any

from .ascend_files import file_beside, unreadable

STEPS_KEY = "ascend_steps"
FILE = "step_trace_time.csv"
_MAX_BYTES = 16 << 20  # one line per step
_WHAT = "msprof's step split"
#: our column -> msprof's
COLUMNS = {
    "computing_ns": "Computing",
    "comm_not_overlapped_ns": "Communication(Not Overlapped)",
    "overlapped_ns": "Overlapped",
    "comm_ns": "Communication",
    "free_ns": "Free",
    "stage_ns": "Stage",
    "bubble_ns": "Bubble",
    "preparing_ns": "Preparing",
}
_STEP = re.compile(r"^\s*(\d{1,9})\s*$")


def read_step_trace(timeline: str) -> tuple[dict[str, list[Any]] | None, str | None]:
    """The rows of the ``step_trace_time.csv`` beside a timeline (None when there is none), and a
    warning when the file is there but cannot be used. A value that is missing or not a number
    is -1 (unknown); a row whose Step is not a number is left out."""
    p, warning = file_beside(timeline, FILE, _MAX_BYTES, _WHAT)
    if p is None:
        return None, warning
    try:
        rows = list(csv.DictReader(io.StringIO(p.read_bytes().decode("utf-8-sig"))))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        return None, unreadable(p, exc, _WHAT)
    if not rows or "Step" not in rows[0] or "Computing" not in rows[0]:
        return None, f"{p.name} has no Step and Computing columns; {_WHAT} left out"
    cols: dict[str, list[Any]] = {"step": [], **{k: [] for k in COLUMNS}}
    for r in rows:
        m = _STEP.match(r.get("Step") or "")
        if m is None:
            continue
        cols["step"].append(int(m.group(1)))
        for ours, theirs in COLUMNS.items():
            cols[ours].append(_ns(r.get(theirs)))
    return (cols, None) if cols["step"] else (None, None)


def _ns(us: str | None) -> int:
    """A microsecond value as written -> ns; -1 when missing or not a plausible number."""
    try:
        v = float(us) if us is not None else math.nan
    except ValueError:
        return -1
    return round(v * 1000) if math.isfinite(v) and 0 <= v < 1e12 else -1
