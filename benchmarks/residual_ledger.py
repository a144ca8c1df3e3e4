"""Where the planner's remaining validation error is: a ledger of the residuals by source and by row.

    python benchmarks/bench_planner.py --rows ROWS.csv
    python benchmarks/residual_ledger.py ROWS.csv [--column loso_error] [--target 0.10] [--top 8]

A MAPE over n rows is (sum of the rows' |error|) / n, so reaching a target t needs the summed
|error| to fall by (MAPE - t) x n: the ledger states that in "points" (one point = an |error| of
0.01 on one row) and shows who holds them. Per source: its rows, its points and share of all of
them, its mean signed error (a bias every row shares: a device's peak, an unstated framework
setting) and its MAPE once that bias is taken out (the scatter no single factor can remove).
Per row, the largest: its |error| and the MAPE if that row alone, then it and every larger one,
were predicted exactly (a bound on what fixing it is worth, not a claim that it can be fixed).
The gap is also given in units of the MAPE's standard error clustered by source
(compare_rows.clustered_se), the precision these rows allow.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from compare_rows import clustered_se


def ledger(rows: list[dict[str, str]], column: str = "loso_error", target: float = 0.10, top: int = 8) -> list[dict]:
    """The ledger's records (module docstring), overall first, then per source, then the largest rows."""
    err = np.array([float(r[column]) for r in rows])
    ab = np.abs(err)
    sources = [r["source"] for r in rows]
    n = len(rows)
    mape = float(ab.mean())
    se = clustered_se(ab, sources)
    out: list[dict] = [
        {
            "column": column,
            "rows": n,
            "mape": round(mape, 4),
            "se_sources": round(se, 4),
            "target": target,
            "points": round(100 * float(ab.sum()), 1),
            "points_over_target": round(100 * (mape - target) * n, 1),
            "gap_in_se": round((mape - target) / se, 2) if se > 0 else None,
        }
    ]
    by: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(sources):
        by[s].append(i)
    total = float(ab.sum())
    for s, idx in sorted(by.items(), key=lambda kv: -float(ab[kv[1]].sum())):
        e = err[idx]
        worst = idx[int(np.argmax(ab[idx]))]
        out.append(
            {
                "source": s,
                "rows": len(idx),
                "points": round(100 * float(ab[idx].sum()), 1),
                "share": round(float(ab[idx].sum()) / total, 3) if total > 0 else 0.0,
                "mean_signed": round(float(e.mean()), 4),
                "mape": round(float(ab[idx].mean()), 4),
                "mape_without_bias": round(float(np.abs(e - e.mean()).mean()), 4),
                "largest_row": rows[worst].get("row"),
                "largest_error": round(float(err[worst]), 4),
            }
        )
    order = np.argsort(-ab, kind="stable")[:top]
    removed = np.cumsum(ab[order])
    for k, i in enumerate(order):
        r = rows[i]
        out.append(
            {
                "row": r.get("row"),
                "source": r["source"],
                "model": r.get("model", ""),
                "devices": r.get("devices", ""),
                "error": round(float(err[i]), 4),
                "mape_if_exact": round((total - float(ab[i])) / n, 4),
                "mape_if_exact_with_larger": round((total - float(removed[k])) / n, 4),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", type=Path, help="a bench_planner.py --rows CSV")
    ap.add_argument("--column", default="loso_error", help="error column: loso_error (default) or error (uncalibrated)")
    ap.add_argument("--target", type=float, default=0.10)
    ap.add_argument("--top", type=int, default=8)
    ns = ap.parse_args()
    with open(ns.rows, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for rec in ledger(rows, ns.column, ns.target, ns.top):
        print(json.dumps(rec))


if __name__ == "__main__":
    main()
