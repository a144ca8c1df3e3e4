"""benchmarks/compare_rows.py: the paired comparison the planner's model changes are judged by
(BENCHMARKS.md). Hand-computed on four rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest


def test_clustered_standard_error_by_hand(bench_module: Callable[[str], Any]) -> None:
    """Values 1, 2, 3, 4 in sources a, a, b, b: mean 2.5, deviations -1.5, -0.5, 0.5, 1.5, summed by
    source -2 and 2: sqrt(4 + 4) / 4."""
    cr = bench_module("compare_rows")
    assert cr.clustered_se(np.array([1.0, 2.0, 3.0, 4.0]), ["a", "a", "b", "b"]) == pytest.approx(np.sqrt(8) / 4)
    # one row per source: the usual standard error without the n - 1 correction, sqrt(sum dev^2) / n
    assert cr.clustered_se(np.array([1.0, 3.0]), ["a", "b"]) == pytest.approx(np.sqrt(2) / 2)


def test_paired_difference_of_absolute_errors_by_hand(bench_module: Callable[[str], Any]) -> None:
    """|errors| before 0.1, 0.2, 0.3, 0.4 and after 0.1, 0.1, 0.3, 0.2 (signs do not matter): the
    paired differences 0, -0.1, 0, -0.2 have mean -0.075; two rows changed."""
    cr = bench_module("compare_rows")
    before = {
        k: {"source": s, "error": str(e), "loso_error": str(e)}
        for k, (s, e) in enumerate([("a", 0.1), ("a", -0.2), ("b", 0.3), ("b", 0.4)], 1)
    }
    after = {
        k: {"source": s, "error": str(e), "loso_error": str(e)}
        for k, (s, e) in enumerate([("a", 0.1), ("a", 0.1), ("b", -0.3), ("b", 0.2)], 1)
    }
    lines = cr.compare(before, after)
    whole = next(x for x in lines if x["column"] == "error" and "source" not in x)
    assert whole["a"]["mean"] == pytest.approx(0.25) and whole["b"]["mean"] == pytest.approx(0.175)
    assert whole["b_minus_a"]["mean"] == pytest.approx(-0.075) and whole["rows_changed"] == 2
    per_a = next(x for x in lines if x["column"] == "error" and x.get("source") == "a")
    assert per_a["a"] == pytest.approx(0.15) and per_a["b"] == pytest.approx(0.1)
