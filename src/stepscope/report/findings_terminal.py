"""The advisor's findings on the terminal, first thing in the report: for each, what the trace shows,
why, what to change, and the saving per step estimated from the trace."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..advisor.finding import Finding
from .fmt import esc

if TYPE_CHECKING:  # rich is loaded when a report is printed, not to write files
    from rich.console import Console

#: actions shown per finding on the terminal (all are in the JSON and HTML reports)
_ACTIONS_SHOWN = 3


def evidence_text(f: Finding) -> str:
    """The evidence in readable units: ``_ns`` figures in ms (in us under 0.1 ms), ``_ratio`` ones
    in percent."""
    parts = []
    for k, v in f.evidence.items():
        if k.endswith("_ns"):
            t = f"{v / 1e3:,.1f} us" if abs(v) < 100_000 else f"{v / 1e6:,.3f} ms"
            parts.append(f"{k[:-3].replace('_', ' ')} {t}")
        elif k.endswith("_ratio"):
            parts.append(f"{k[:-6].replace('_', ' ')} {v:.1%}")
        else:
            parts.append(f"{k.replace('_', ' ')} {v:,.4g}")
    return ", ".join(parts)


def saving_text(f: Finding) -> str:
    if f.saving_method == "none":
        return "no saving estimated"
    s = f.saving
    return (
        f"saves about {s.mid_ns / 1e6:.1f} ms per step ({f.saving_ratio:.0%}; "
        f"{s.low_ns / 1e6:.1f}-{s.high_ns / 1e6:.1f} ms, {f.saving_method})"
    )


def render(findings: tuple[Finding, ...], con: Console, ranks: int) -> None:
    if not findings:
        con.print(
            "[bold]Findings:[/] none. No rule's threshold is crossed: no input wait, host-bound or "
            "synchronization idle, exposed communication or copies, or roofline gap large enough to act on.",
            markup=True,
            highlight=False,
        )
        con.print()
        return
    con.print(f"[bold]Findings[/] ({len(findings)}, largest estimated saving first)", markup=True, highlight=False)
    for i, f in enumerate(findings, 1):
        where = "" if ranks <= 1 else f" [ranks {_ranks(f.ranks)}]"
        con.print(f"{i}. [bold]{esc(f.title)}[/]{where}", markup=True, highlight=False)
        con.print(f"   {esc(saving_text(f))}; confidence {f.confidence}", markup=True, highlight=False)
        con.print(f"   evidence: {esc(evidence_text(f))}", markup=True, highlight=False)
        con.print(f"   why: {esc(f.cause)}", markup=True, highlight=False)
        for a in f.actions[:_ACTIONS_SHOWN]:
            con.print(f"   {esc(a.stack)}: {esc(a.change)}", markup=True, highlight=False)
    con.print()


def _ranks(ranks: tuple[int, ...]) -> str:
    return ", ".join(map(str, ranks[:8])) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")
