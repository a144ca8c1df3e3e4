"""Number formatting shared by the renderers, and escaping of trace strings for rich markup."""

from __future__ import annotations

import re

from ..analysis.results import RankAnalysis
from ..analysis.roofline.mfu_diagnosis import Check
from ..analysis.summary import RankSummary
from ..textsafe import printable

_RICH_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def esc(text: str) -> str:
    """``text`` printed as itself by rich: control characters shown escaped (``textsafe``), and a
    bracket that would open a markup tag (``[red]``, ``[/]``) backslash-escaped, as
    ``rich.markup.escape`` does, without the extra backslash it appends to a text ending in one
    (these texts are never followed by a tag)."""
    return _RICH_TAG.sub(lambda m: f"{m.group(1)}{m.group(1)}\\{m.group(2)}", printable(text))


def ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f}"


def pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def us(ns: float) -> str:
    return f"{ns / 1e3:,.1f}"


#: the per-rank table's columns (mean per step, ms), shared by the terminal and Markdown reports
RANK_MEAN_COLUMNS = ("rank", "steps", "step", "compute", "exposed comm", "exposed memcpy", "idle", "data loader")


def rank_mean_cells(r: RankSummary) -> list[str]:
    """One rank's row under ``RANK_MEAN_COLUMNS``."""
    means = (r.mean_step_time_ns, r.mean_compute_ns, r.mean_exposed_comm_ns, r.mean_exposed_memcpy_ns)
    return [str(r.rank), str(r.steps), *map(ms, means), ms(r.mean_idle_ns), ms(r.mean_dataloader_ns)]


def detail_ranks(ranks: tuple[RankAnalysis, ...], limit: int) -> tuple[list[RankAnalysis], int]:
    """The ranks to show in detail: all if few, else the ``limit`` slowest by median step time
    (ties by rank), in rank order; and how many were left out."""
    if len(ranks) <= limit:
        return list(ranks), 0
    slow = sorted(ranks, key=lambda r: (-r.step_stats.median_ns, r.rank))[:limit]
    return sorted(slow, key=lambda r: r.rank), len(ranks) - limit


def check_text(c: Check) -> str:
    """An MFU diagnosis check (``analysis/roofline/mfu_diagnosis.Check``) in words and ms:
    "device idle waiting for the host to launch: 76.2% of the step (167.0 ms per step; more than
    10% is worth a change): <hint>"."""
    if c.figure == "mfu":
        value = f"{c.value:.0%}"
    elif c.per_step_ns is not None:
        value = f"{c.value:.1%} of the step ({c.per_step_ns / 1e6:,.1f} ms per step)"
    else:
        value = f"{c.value:.1%}"
    limit = f"{'over' if c.higher_is_bad else 'under'} {c.threshold:.0%} calls for a look"
    return f"{c.label or c.figure}: {value}; {limit}" + ("" if c.ok else f": {c.hint}")
