"""Markdown summary (``-o summary.md``): the step breakdown and the top kernels of each rank, as
GitHub-flavoured Markdown tables to paste into a pull request or an issue.

Strings from the trace are untrusted: kernel names go in code spans (a fence longer than any
backtick run inside, pipes escaped as ``\\|``), other strings (step names, devices, categories,
paths, warnings) have Markdown's punctuation backslash-escaped, so no string can close a cell,
open a link or emit HTML. Line breaks become spaces (a table row is one line).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..analysis.results import Analysis, RankAnalysis
from ..analysis.summary import RankSummary, RunSummary
from .base import Renderer
from .fmt import RANK_MEAN_COLUMNS, detail_ranks, ms, pct, rank_mean_cells, us
from .names import readable

_PUNCTUATION = re.compile(r"([\\`*_\[\]<>|~&$])")
_TOP_KERNELS = 10
_DETAIL_RANKS = 4


def text(s: str) -> str:
    """``s`` as literal Markdown text, fit for a table cell."""
    return _PUNCTUATION.sub(r"\\\1", " ".join(s.splitlines()))


def code(s: str) -> str:
    """``s`` as an inline code span, fit for a table cell."""
    s = " ".join(s.splitlines()).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _table(head: list[str], align: str, rows: list[list[str]]) -> list[str]:
    """``align``: one letter per column, ``l`` left or ``r`` right."""
    rule = ["---:" if a == "r" else "---" for a in align]
    return [f"| {' | '.join(cells)} |" for cells in (head, rule, *rows)]


def _ranks(summary: RunSummary) -> list[str]:
    rows = [rank_mean_cells(r) for r in summary.ranks]
    return [
        "## Ranks (mean per step, ms)",
        "",
        *_table(list(RANK_MEAN_COLUMNS), "r" * len(RANK_MEAN_COLUMNS), rows),
        "",
    ]


def _steps(r: RankAnalysis, rs: RankSummary) -> list[str]:
    def row(name: str, step: int, compute: int, comm: int, memcpy: int, idle: int) -> list[str]:
        return [name, ms(step), *(f"{ms(v)} ({pct(v, step)})" for v in (compute, comm, memcpy, idle))]

    rows = [
        row(
            text(s.name) + (" (warm-up)" if s.warmup else ""),
            s.step_time_ns,
            s.compute_ns,
            s.exposed_comm_ns,
            s.exposed_memcpy_ns,
            s.idle_ns,
        )
        for s in r.steps
    ]
    if len(r.steps) > 1:
        total = (rs.total_compute_ns, rs.total_exposed_comm_ns, rs.total_exposed_memcpy_ns, rs.total_idle_ns)
        label = "**steady steps**" if rs.warmup_steps else "**all steps**"
        rows.append(row(label, rs.total_step_time_ns, *total))
    head = ["step", "step ms", "compute", "exposed comm", "exposed memcpy", "idle"]
    return [
        "Step breakdown (ms; compute + exposed comm + exposed memcpy + idle = step):",
        "",
        *_table(head, "lrrrrr", rows),
    ]


def _kernels(r: RankAnalysis) -> list[str]:
    if not r.top_kernels:
        return []
    rows = [
        [
            code(readable(k.name)),
            text(k.category),
            str(k.count),
            ms(k.total_ns),
            us(k.mean_ns),
            f"{k.share_of_step_ratio:.1%}",
        ]
        for k in r.top_kernels[:_TOP_KERNELS]
    ]
    head = ["kernel", "category", "count", "total ms", "mean us", "share of step"]
    return ["", f"Top kernels (of {len(r.steps)} steps):", "", *_table(head, "llrrrr", rows)]


def _rank(r: RankAnalysis, rs: RankSummary) -> list[str]:
    device = f" ({text(r.device)})" if r.device else ""
    out = [f"## Rank {r.rank}{device}", ""]
    steps = f"{rs.steps} step{'' if rs.steps == 1 else 's'}"
    warm = f"; {rs.warmup_steps} warm-up step(s) left out" if rs.warmup_steps else ""
    out.append(f"Median step {ms(r.step_stats.median_ns)} ms over {steps} (steps from {text(r.step_source)}{warm}).")
    if rs.median_mfu_ratio is not None:
        out.append(f"MFU (median over steps): {rs.median_mfu_ratio:.1%}.")
    return [*out, "", *_steps(r, rs), *_kernels(r), ""]


def render(a: Analysis, options: Mapping[str, Any]) -> str:
    summary = a.summary
    out = ["# stepscope: step breakdown", "", "Inputs: " + ", ".join(code(p) for p in a.inputs), ""]
    if a.warnings:
        out += [f"- warning: {text(w)}" for w in a.warnings] + [""]
    if len(a.ranks) > 1:
        out += _ranks(summary)
    shown, hidden = detail_ranks(a.ranks, _DETAIL_RANKS)
    for r in shown:
        out += _rank(r, summary.of(r.rank))
    if hidden:
        out += [
            f"Details above for the {len(shown)} ranks with the slowest median step; {hidden} more in the table.",
            "",
        ]
    return "\n".join(out)


RENDERER = Renderer(
    name="markdown",
    subject="analysis",
    extensions=(".md",),
    render=render,
    description="Markdown summary for a pull request or issue",
)
