"""Terminal renderer of a monitor report: anomalies in words first, then the worst ranks and one
row per rank; ``stepscope monitor watch`` redraws the same view."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console

from ..monitor.summary import MonitorReport
from ..textsafe import printable
from .base import Renderer
from .fit import Col, print_table
from .fmt import esc


def _f(x: float | None, spec: str = ",.3f") -> str:
    return "-" if x is None else format(x, spec)


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


def _ranks(r: MonitorReport, con: Console) -> None:
    rows = [
        (
            str(s.rank),
            str(s.steps),
            str(s.excluded),
            _f(s.median_step_ms),
            _f(s.p90_step_ms),
            _f(s.median_own_ms),
            _f(s.median_device_ms),
            _f(s.gc_pause_ms, ",.1f"),
            _f(None if s.data_share is None else s.data_share * 100, ".1f"),
            _f(s.tokens_per_s, ",.0f"),
            _f(None if s.mfu is None else s.mfu * 100, ".1f"),
        )
        for s in r.ranks
    ]
    cols = (
        Col("rank"),
        Col("steps"),
        Col("left out", drop=3),
        Col("median ms"),
        Col("p90 ms"),
        Col("own ms", drop=2),
        Col("device ms", drop=4),
        Col("GC ms", drop=2),
        Col("data %", drop=3),
        Col("tokens/s", drop=4),
        Col("MFU %", drop=4),
    )
    print_table(con, "Per rank (statistics leave out tagged and warm-up steps)", cols, rows)


def render(r: MonitorReport, options: Mapping[str, Any]) -> None:
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
