"""Where the planner's calibrated errors come from: each validation row's leave-one-source-out
error beside its strategy and the shares of its predicted step, and how strongly each feature
ranks with the errors.

    python benchmarks/planner_residuals.py [--csv benchmarks/data/published_runs.csv] [--rows OUT.csv]

Each row is predicted by the factors fitted on the other sources (as ``bench_planner.py``'s
``calibrated_mape_loso``), and its signed error (predicted / measured - 1 of the row's throughput)
is set against: tp, pp, dp, micro-batch, micro-batches per step, sequence length, hidden size,
devices, tokens per device, and the compute, TP, DP and bubble shares of the predicted step. A
feature whose Spearman correlation with the errors is strong points at a term the model gets wrong
in a systematic way; none strong says the rest is per-run noise the model cannot see (or terms
that differ per source, which calibrating on one's own runs removes). Printed with and without
the nanotron source, whose three largest misses dominate the mean.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_planner import ROOT, _spearman, validation_runs

from stepscope.planner.calibrate import _select, errors, predict_one
from stepscope.planner.cost import evaluate

FEATURES = (
    "tp",
    "pp",
    "dp",
    "mb",
    "micro_batches",
    "seq_len",
    "hidden",
    "devices",
    "tokens_per_device",
    "compute_share",
    "tp_share",
    "dp_share",
    "bubble_share",
)


def rows(csv_path: Path) -> list[dict]:
    runs = validation_runs(csv_path)
    errs = errors(runs)
    out = []
    for grp in sorted({r.group for r in runs}):
        f = _select(errs, [k for k, r in enumerate(runs) if r.group != grp])
        for r in (r for r in runs if r.group == grp):
            s = {k: np.array([v]) for k, v in r.strategy.items()}
            res = {k: float(v[0]) for k, v in evaluate(f.apply(r.job), s).items() if k != "bottleneck"}
            step = res["step_s"]
            out.append(
                {
                    "source": grp,
                    "error": round(predict_one(r, f) / r.measured - 1, 4),
                    "tp": r.strategy["tp"],
                    "pp": r.strategy["pp"],
                    "dp": r.strategy["dp"],
                    "mb": r.strategy["mb"],
                    "micro_batches": res["grad_accum"],
                    "seq_len": r.job.seq_len,
                    "hidden": r.job.model.d_model,
                    "devices": r.job.devices,
                    "tokens_per_device": r.job.global_batch * r.job.seq_len / r.job.devices,
                    "compute_share": round(res["compute_s"] / step, 4),
                    "tp_share": round(res["tp_s"] / step, 4),
                    "dp_share": round(res["dp_s"] / step, 4),
                    "bubble_share": round(res["bubble_s"] / step, 4),
                }
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", default=str(ROOT / "benchmarks" / "data" / "published_runs.csv"))
    ap.add_argument("--rows", metavar="OUT.csv", help="also write every row's error and features")
    a = ap.parse_args()
    table = rows(Path(a.csv))
    if a.rows:
        with open(a.rows, "w", encoding="utf-8", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(table[0]))
            w.writeheader()
            w.writerows(table)
    for name, subset in (("all", table), ("without nanotron", [t for t in table if "nanotron" not in t["source"]])):
        e = np.array([t["error"] for t in subset])
        corr = {k: _spearman(np.array([float(t[k]) for t in subset]), e) for k in FEATURES}
        print(
            json.dumps(
                {
                    "rows": name,
                    "n": len(subset),
                    "mape": round(float(np.abs(e).mean()), 3),
                    "mean_signed": round(float(e.mean()), 3),
                    "spearman_with_error": {k: None if v is None else round(v, 3) for k, v in corr.items()},
                }
            )
        )


if __name__ == "__main__":
    main()
