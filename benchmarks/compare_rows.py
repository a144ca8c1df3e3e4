"""Paired comparison of two planner variants on the validation runs: is a change in MAPE more than noise?

    python benchmarks/bench_planner.py --rows A.csv     # before the change
    python benchmarks/bench_planner.py --rows B.csv     # after
    python benchmarks/compare_rows.py A.csv B.csv

For the uncalibrated error (``error``) and the leave-one-source-out calibrated one (``loso_error``)
it prints each variant's MAPE with its standard error, and the paired difference of the absolute
errors, row by row (B - A), with its standard error. Two standard errors are given:

- ``se_rows``: sample standard deviation / sqrt(rows), as if the rows were independent;
- ``se_sources``: clustered by source (the rows of one publication share its unstated settings and
  its hardware's quirks, so their errors move together): sqrt(sum over sources of (sum of the
  source's deviations from the mean)^2) / rows, the usual cluster-robust estimate (Liang-Zeger,
  without small-sample correction). With 10 sources it is itself rough; it is the honest one.

A difference within about two standard errors is not evidence either way. Then per source: rows,
MAPE before and after, for both columns. Rows are matched by their ``row`` number.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

import numpy as np


def _load(path: Path) -> dict[int, dict[str, str]]:
    with open(path, encoding="utf-8") as fh:
        return {int(r["row"]): r for r in csv.DictReader(fh)}


def clustered_se(values: np.ndarray, groups: list[str]) -> float:
    """Cluster-robust standard error of the mean of ``values`` (module docstring)."""
    _, source = np.unique(np.asarray(groups), return_inverse=True)
    sums = np.bincount(source, weights=values - values.mean())  # each source's summed deviations
    return float(np.sqrt(np.sum(sums * sums)) / len(values))


def summary(values: np.ndarray, groups: list[str]) -> dict[str, float]:
    n = len(values)
    return {
        "mean": round(float(values.mean()), 4),
        "se_rows": round(float(values.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0, 4),
        "se_sources": round(clustered_se(values, groups), 4),
    }


def compare(a: dict[int, dict[str, str]], b: dict[int, dict[str, str]]) -> list[dict]:
    rows = sorted(set(a) & set(b))
    groups = [a[k]["source"] for k in rows]
    out = []
    for col in ("error", "loso_error"):
        if col not in a[rows[0]] or col not in b[rows[0]]:
            continue
        ea = np.abs(np.array([float(a[k][col]) for k in rows]))
        eb = np.abs(np.array([float(b[k][col]) for k in rows]))
        out.append(
            {
                "column": col,
                "rows": len(rows),
                "a": summary(ea, groups),
                "b": summary(eb, groups),
                "b_minus_a": summary(eb - ea, groups),
                "rows_changed": int(np.sum(np.abs(eb - ea) > 1e-4)),
            }
        )
        per: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for k, x, y in zip(rows, ea, eb, strict=True):
            per[a[k]["source"]].append((float(x), float(y)))
        for src, v in sorted(per.items()):
            out.append(
                {
                    "column": col,
                    "source": src,
                    "rows": len(v),
                    "a": round(float(np.mean([x for x, _ in v])), 4),
                    "b": round(float(np.mean([y for _, y in v])), 4),
                }
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("a", type=Path, help="rows CSV of the variant before (bench_planner.py --rows)")
    ap.add_argument("b", type=Path, help="rows CSV of the variant after")
    args = ap.parse_args()
    for line in compare(_load(args.a), _load(args.b)):
        print(json.dumps(line))


if __name__ == "__main__":
    main()
