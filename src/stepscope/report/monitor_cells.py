"""The per-rank table of a monitor report, as text cells: one definition for the terminal and HTML
renderers."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the report's types only: the CLI does not load the detectors to start
    from ..monitor.summary import RankSummary


RANK_HEADERS: tuple[str, ...] = (
    "rank",
    "steps",
    "left out",
    "median ms",
    "p90 ms",
    "own ms",
    "device ms",
    "GC ms",
    "data %",
    "tokens/s",
    "MFU %",
)
RANK_TITLE = "Per rank (statistics leave out tagged and warm-up steps)"


def _f(x: float | None, spec: str = ",.3f", scale: float = 1.0) -> str:
    return "-" if x is None else format(x * scale, spec)


def rank_cells(s: RankSummary) -> tuple[str, ...]:
    """One rank's row, in ``RANK_HEADERS`` order ("-": not measured)."""
    return (
        str(s.rank),
        str(s.steps),
        str(s.excluded),
        _f(s.median_step_ms),
        _f(s.p90_step_ms),
        _f(s.median_own_ms),
        _f(s.median_device_ms),
        _f(s.gc_pause_ms, ",.1f"),
        _f(s.data_share, ".1f", 100),
        _f(s.tokens_per_s, ",.0f"),
        _f(s.mfu, ".1f", 100),
    )
