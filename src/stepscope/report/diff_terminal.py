"""Terminal renderer of a diff: the verdict in one line, the breakdown deltas (which add up to the
step delta), then the kernel categories and kernels that changed most, and the findings that came
or went."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..diff.compare import Change, RunDiff
from ..textsafe import printable
from .base import Renderer
from .fit import Col, print_table
from .fmt import esc
from .names import readable

if TYPE_CHECKING:  # rich is loaded when a report is printed, not to write files
    from rich.console import Console

_SHOWN = 10


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def _changes(title: str, rows: tuple[Change, ...], con: Console) -> None:
    moved = [c for c in rows if c.kind != "same"][:_SHOWN]
    if not moved:
        return
    cols = (Col("name", name=True), Col("A ms"), Col("B ms"), Col("delta ms"), Col("change", left=True))
    cells = [
        (printable(readable(c.name)), _ms(c.a_ns), _ms(c.b_ns), f"{c.delta_ns / 1e6:+,.3f}", c.kind) for c in moved
    ]
    print_table(con, title, cols, cells)


def render(d: RunDiff, options: Mapping[str, Any]) -> None:
    from rich.console import Console

    con: Console = options.get("console") or Console()
    con.print(f"[bold]{d.verdict.upper()}[/]: {esc(d.reason)}", markup=True, highlight=False)
    con.print(f"A: {esc(d.a)}\nB: {esc(d.b)}", markup=True, highlight=False)
    rows = [
        (k.removesuffix("_ns").replace("_", " "), _ms(a), _ms(b), f"{(b - a) / 1e6:+,.3f}")
        for k, (a, b) in d.components.items()
    ]
    rows.append(("step", _ms(d.a_mean_ns), _ms(d.b_mean_ns), f"{(d.b_mean_ns - d.a_mean_ns) / 1e6:+,.3f}"))
    cols = (Col("part", left=True), Col("A"), Col("B"), Col("delta"))
    print_table(con, "Mean per step (ms); the deltas add up to the step's", cols, rows)
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
