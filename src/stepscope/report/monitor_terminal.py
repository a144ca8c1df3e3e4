"""Terminal renderer of a monitor report: anomalies in words first, then the worst ranks and one
row per rank; ``stepscope monitor watch`` redraws the same view."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..textsafe import printable
from .base import Renderer
from .fit import Col, print_table
from .fmt import esc
from .monitor_cells import RANK_HEADERS, RANK_TITLE, rank_cells

if TYPE_CHECKING:  # rich is loaded when a report is printed, not to write files
    from rich.console import Console

if TYPE_CHECKING:  # the report's types only: the CLI does not load the detectors to start
    from ..monitor.summary import MonitorReport


def _anomalies(r: MonitorReport, con: Console) -> None:
    if not r.anomalies:
        con.print("No anomalies.", highlight=False)
        return
    rows = [
        (
            str(i),
            a.kind,
            str(a.rank),
            f"{a.first_step}-{a.last_step}",
            str(a.flagged_at_step),
            f"{a.excess_ratio:+.0%}",
            a.cause,
        )
        for i, a in enumerate(r.anomalies, 1)
    ]
    cols = (
        Col("#"),
        Col("kind", left=True),
        Col("rank"),
        Col("steps"),
        Col("flagged at"),
        Col("excess"),
        Col("cause", left=True),
    )
    print_table(con, f"Anomalies ({len(r.anomalies)})", cols, rows)
    for i, a in enumerate(r.anomalies, 1):
        con.print(f"{i}. {esc(printable(a.message))}", markup=True, highlight=False)


#: which columns a narrow terminal drops first (higher first), by header
_DROP = {"left out": 3, "own ms": 2, "device ms": 4, "GC ms": 2, "data %": 3, "tokens/s": 4, "MFU %": 4}


def _ranks(r: MonitorReport, con: Console) -> None:
    cols = tuple(Col(h, drop=_DROP.get(h, 0)) for h in RANK_HEADERS)
    print_table(con, RANK_TITLE, cols, [rank_cells(s) for s in r.ranks])


def render(r: MonitorReport, options: Mapping[str, Any]) -> None:
    from rich.console import Console

    con: Console = options.get("console") or Console()
    con.print(
        f"[bold]{esc(r.run_dir)}[/]: {r.steps_recorded:,} step records, {len(r.ranks)} of {r.world_size} ranks, level {r.level}"
        + (f", [red]{r.dropped_records:,} records dropped[/]" if r.dropped_records else ""),
        markup=True,
        highlight=False,
    )
    _anomalies(r, con)
    if r.worst_ranks:
        worst = ", ".join(
            f"rank {w['rank']} {float(str(w['own_over_peers_ratio'])):+.1%} ({w['cause']})" for w in r.worst_ranks
        )
        con.print(f"Worst ranks (own time over peers' median, last steps): {esc(worst)}", markup=True, highlight=False)
    _ranks(r, con)
    for c in r.captures:
        state = "analyzed: " + str(c["findings"]) if c.get("findings") else f"{len(c.get('traces', []))} trace(s)"
        con.print(
            f"capture {esc(str(c['id']))}: steps {c['start_step']}+{c['steps']} on ranks {c['ranks']}, {esc(state)}",
            markup=True,
            highlight=False,
        )
    for n in (*r.notes, *r.warnings):
        con.print(f"note: {esc(n)}", markup=True, highlight=False)
    return None


RENDERER = Renderer(name="terminal", subject="monitor", extensions=(), render=render, description="the terminal report")
