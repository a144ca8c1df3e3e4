"""Terminal renderer of a diff: the verdict in one line, the breakdown deltas (which add up to the
step delta), then the kernel categories and kernels that changed most, and the findings that came
or went."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from ..diff.compare import Change, RunDiff
from .base import Renderer
from .fmt import esc
from .names import readable

_SHOWN = 10
_NAME_WIDTH = 60


def _short(name: str) -> str:
    """Long names shortened in the middle (the full names are in the JSON)."""
    if len(name) <= _NAME_WIDTH:
        return name
    half = (_NAME_WIDTH - 1) // 2
    return name[:half] + "…" + name[-half:]


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def _changes(title: str, rows: tuple[Change, ...], con: Console) -> None:
    moved = [c for c in rows if c.kind != "same"][:_SHOWN]
    if not moved:
        return
    t = Table(title=title)
    for col in ("name", "A ms", "B ms", "delta ms", "change"):
        t.add_column(col, justify="left" if col in ("name", "change") else "right", overflow="fold")
    for c in moved:
        t.add_row(esc(_short(readable(c.name))), _ms(c.a_ns), _ms(c.b_ns), f"{c.delta_ns / 1e6:+,.3f}", c.kind)
    con.print(t)


def render(d: RunDiff, options: Mapping[str, Any]) -> None:
    con: Console = options.get("console") or Console()
    con.print(f"[bold]{d.verdict.upper()}[/]: {esc(d.reason)}", markup=True, highlight=False)
    con.print(f"A: {esc(d.a)}\nB: {esc(d.b)}", markup=True, highlight=False)
    t = Table(title="Mean per step (ms); the deltas add up to the step's")
    for col in ("part", "A", "B", "delta"):
        t.add_column(col, justify="left" if col == "part" else "right")
    for k, (a, b) in d.components.items():
        t.add_row(k.removesuffix("_ns").replace("_", " "), _ms(a), _ms(b), f"{(b - a) / 1e6:+,.3f}")
    t.add_row("step", _ms(d.a_mean_ns), _ms(d.b_mean_ns), f"{(d.b_mean_ns - d.a_mean_ns) / 1e6:+,.3f}", style="bold")
    con.print(t)
    _changes("Kernel time by category, per step (ms)", d.categories, con)
    _changes("Framework ops by input shapes, kernel time per step (ms)", d.ops, con)
    _changes("Kernels, per step (ms)", d.kernels, con)
    if d.findings_gone or d.findings_new:
        con.print(
            f"findings gone: {esc(', '.join(d.findings_gone) or 'none')}; new: {esc(', '.join(d.findings_new) or 'none')}",
            markup=True,
            highlight=False,
        )


RENDERER = Renderer(name="terminal", subject="diff", extensions=(), render=render, description="diff on the terminal")
