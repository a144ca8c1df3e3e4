"""What ``plan`` shows, as data for its renderers (report/plan_terminal.py, plan_json.py,
plan_html.py): the records, the lines said under them, and the page's title."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class PlanResult:
    """``records``: the --evaluate record, or a search's rows, fastest that fit first; ``single``:
    an --evaluate record (its JSON is one object, a search's a list); ``lines``: what the terminal
    says under the table; ``title`` and ``notes``: the HTML page's title and the lines under it;
    ``compared``: rows the HTML draws beside the records (a what-if's measured baseline);
    ``capacity_gb``: the device's memory, the line the memory bars are drawn against."""

    records: tuple[dict[str, Any], ...]
    single: bool
    lines: tuple[str, ...]
    title: str
    notes: tuple[str, ...]
    capacity_gb: float
    compared: tuple[dict[str, Any], ...] = ()
