"""Calibrating on a few runs: does it help, and which fit should a handful of runs get?

    python benchmarks/bench_few_runs.py [--n 2 3 5] [--draws 15] [--csv benchmarks/data/published_runs.csv]

For each validation source with at least n + 2 rows, ``--draws`` random subsets of n rows (fixed
seeds) are the "own runs" a user would calibrate on, and the source's other rows are predicted
with the result. Four fits are compared on those other rows (MAPE of the row's throughput):
the priors alone (no calibration), the unpulled fit (summed |log error|, ties to the priors), the
strongest pull toward the priors (``calibrate.PULLS[-1]``), and what ``plan --calibrate`` does
(``calibrate._select``: with 3 runs or more the host wait and the pull chosen by leaving one run
out; with fewer, the strongest pull). No row predicted is in its fit.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_planner import ROOT, validation_runs

from stepscope.planner import calibrate as c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", default=str(ROOT / "benchmarks" / "data" / "published_runs.csv"))
    ap.add_argument("--n", type=int, nargs="+", default=[2, 3, 5], help="runs calibrated on")
    ap.add_argument("--draws", type=int, default=15, help="random subsets per source")
    a = ap.parse_args()
    runs = validation_runs(Path(a.csv))
    errs = c.errors(runs)
    no_wait = c._grid()[4] > 0
    for n in a.n:
        rng = random.Random(n)
        ape: dict[str, list[float]] = {"priors": [], "unpulled": [], "strongest_pull": [], "plan_calibrate": []}
        for grp in sorted({r.group for r in runs}):
            idx = [k for k, r in enumerate(runs) if r.group == grp]
            if len(idx) < n + 2:
                continue
            for _ in range(a.draws):
                sub = rng.sample(idx, n)
                total = errs[sub].sum(axis=0)
                fits = {
                    "priors": c.Fit(1.0, 1.0, 1.0, 1.0),
                    "unpulled": c._best(np.where(no_wait, np.inf, total)),
                    "strongest_pull": c._best(np.where(no_wait, np.inf, total), c.PULLS[-1]),
                    "plan_calibrate": c._select(errs, sub),
                }
                for name, f in fits.items():
                    ape[name] += [abs(c.predict_one(runs[j], f) / runs[j].measured - 1) for j in idx if j not in sub]
        print(
            json.dumps(
                {
                    "runs_calibrated_on": n,
                    "rows_predicted": len(ape["priors"]),
                    **{f"mape_{k}": round(float(np.mean(v)), 4) for k, v in ape.items()},
                }
            )
        )


if __name__ == "__main__":
    main()
