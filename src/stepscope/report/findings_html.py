"""The advisor's findings in the HTML report, before the tables (trace strings escaped)."""

from __future__ import annotations

from html import escape

from ..advisor.finding import Finding
from .findings_terminal import evidence_text, saving_text


def section(findings: tuple[Finding, ...], ranks: int) -> str:
    if not findings:
        return (
            "<h2>Findings</h2><p>None: no rule's threshold is crossed (no input wait, host-bound or "
            "synchronization idle, exposed communication or copies, or roofline gap large enough to act on).</p>"
        )
    cards = [_card(i, f, ranks) for i, f in enumerate(findings, 1)]
    return f"<h2>Findings</h2><p>Largest estimated saving first.</p>{''.join(cards)}"


def _card(i: int, f: Finding, ranks: int) -> str:
    where = "" if ranks <= 1 else f" <span class='ranks'>ranks {escape(', '.join(map(str, f.ranks)))}</span>"
    evidence = escape(evidence_text(f))
    actions = "".join(
        f"<li><b>{escape(a.stack)}</b>: {escape(a.change)}"
        + (f" (<span class='ref'>{escape(a.reference)}</span>)" if a.reference else "")
        + "</li>"
        for a in f.actions
    )
    return (
        f"<div class='finding' id='finding-{i}'><h3>{i}. {escape(f.title)}{where}</h3>"
        f"<p><b>{escape(saving_text(f))}</b>; confidence {escape(f.confidence)}; category {escape(f.category)}</p>"
        f"<p>Why: {escape(f.cause)}</p><p class='evidence'>Evidence: {evidence}</p><ul>{actions}</ul></div>"
    )
