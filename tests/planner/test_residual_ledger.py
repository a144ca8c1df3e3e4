"""benchmarks/residual_ledger.py: who holds the validation error. Hand-computed on five rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

# source a: +0.30, +0.10, -0.20 (|e| sum 0.60, mean signed +0.0667); source b: +0.05, +0.15 (0.20, +0.10)
ROWS = [("1", "a", 0.30), ("2", "a", 0.10), ("3", "a", -0.20), ("4", "b", 0.05), ("5", "b", 0.15)]


def _rows() -> list[dict[str, str]]:
    return [
        {"row": k, "source": s, "model": "m", "devices": "8", "loso_error": str(e), "error": str(-e)}
        for k, s, e in ROWS
    ]


def test_overall_and_points_by_hand(bench_module: Callable[[str], Any]) -> None:
    """MAPE 0.80 / 5 = 0.16; 80 points; to reach 0.10 the five rows must shed (0.16 - 0.10) x 5 = 0.30,
    30 points. Clustered SE: |e| 0.3, 0.1, 0.2, 0.05, 0.15 less 0.16, summed by source
    (0.14 - 0.06 + 0.04 = 0.12; -0.11 - 0.01 = -0.12): sqrt(2 x 0.0144) / 5."""
    out = bench_module("residual_ledger").ledger(_rows(), target=0.10)
    whole = out[0]
    se = np.sqrt(2 * 0.12**2) / 5
    assert whole["mape"] == pytest.approx(0.16) and whole["points"] == pytest.approx(80.0)
    assert whole["points_over_target"] == pytest.approx(30.0)
    assert whole["se_sources"] == pytest.approx(se, abs=1e-4)
    assert whole["gap_in_se"] == pytest.approx(0.06 / se, abs=0.01)


def test_sources_bias_and_scatter_by_hand(bench_module: Callable[[str], Any]) -> None:
    """Source a first (60 of 80 points, share 0.75): mean signed 0.2 / 3; without it the errors are
    0.2333, 0.0333, -0.2667, MAPE 0.5333 / 3. Source b: mean +0.10, deviations -0.05, +0.05."""
    out = bench_module("residual_ledger").ledger(_rows())
    a, b = out[1], out[2]
    assert a["source"] == "a" and b["source"] == "b"
    assert a["points"] == pytest.approx(60.0) and a["share"] == pytest.approx(0.75)
    assert a["mean_signed"] == pytest.approx(0.2 / 3, abs=1e-4)
    assert a["mape_without_bias"] == pytest.approx((0.7 / 3 + 0.1 / 3 + 0.8 / 3) / 3, abs=1e-4)
    assert a["largest_row"] == "1" and a["largest_error"] == pytest.approx(0.30)
    assert b["mean_signed"] == pytest.approx(0.10) and b["mape_without_bias"] == pytest.approx(0.05)


def test_largest_rows_and_what_fixing_them_bounds(bench_module: Callable[[str], Any]) -> None:
    """Largest |e| first: row 1 (0.30): (0.80 - 0.30) / 5 = 0.10; then row 3 (0.20): with row 1 too,
    (0.80 - 0.50) / 5 = 0.06, alone (0.80 - 0.20) / 5 = 0.12. The uncalibrated column is the same
    numbers with signs flipped, so the same ledger but for the signs."""
    rl = bench_module("residual_ledger")
    out = rl.ledger(_rows(), top=2)
    first, second = out[-2], out[-1]
    assert first["row"] == "1" and first["mape_if_exact"] == pytest.approx(0.10)
    assert second["row"] == "3" and second["mape_if_exact"] == pytest.approx(0.12)
    assert second["mape_if_exact_with_larger"] == pytest.approx(0.06)
    flipped = rl.ledger(_rows(), column="error", top=2)
    assert flipped[0]["mape"] == pytest.approx(0.16) and flipped[1]["mean_signed"] == pytest.approx(-0.2 / 3, abs=1e-4)
