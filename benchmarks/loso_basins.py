"""How firmly the calibration's leave-one-source-out fits are determined: per fold, the best fit at
each communication scale and what each would give the held-out source.

    python benchmarks/loso_basins.py [--csv benchmarks/data/published_runs.csv]

For every source held out, the other sources' summed |log error| plus the prior pull the fit
chose (calibrate._select) is evaluated over the whole grid; for each communication scale on the
grid between 0.6 and 1.6 the best grid point with that scale is reported with its objective above
the fold's minimum (``excess``, in summed |log error| over the training runs) and the held-out
source's mean |log error| at that point. A small excess with a large change of held-out error is a
fold whose figure depends on a near-tie (BENCHMARKS.md, session 23). One JSON line per fold and
scale, then one line per scale: how many folds' held-out error is lowest at it.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import numpy as np
from bench_planner import ROOT, validation_runs

from stepscope.planner import calibrate as cal


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", type=Path, default=ROOT / "benchmarks" / "data" / "published_runs.csv")
    args = ap.parse_args()
    runs = validation_runs(args.csv)
    errs = cal.errors(runs)  # (runs x grid) |log error|
    groups = [r.group for r in runs]
    g, a, comm, inter, host = cal._grid()
    scales = [float(x) for x in cal.COMM_GRID if 0.6 <= x <= 1.6]
    best_at: Counter[float] = Counter()
    for grp in sorted(set(groups)):
        test = [k for k, x in enumerate(groups) if x == grp]
        train = [k for k, x in enumerate(groups) if x != grp]
        chosen = cal._select(errs, train)
        total = chosen.prior_pull * cal._prior_dist()
        for k in train:  # row by row: no copy of the (runs x grid) block
            total = total + errs[k]
        if chosen.layer_overhead_s == 0:
            total = np.where(host > 0, np.inf, total)
        floor = float(total.min())
        held = {}
        for s in scales:
            k = int(np.argmin(np.where(np.isclose(comm, s), total, np.inf)))
            held[s] = float(errs[test, k].mean())
            print(
                json.dumps(
                    {
                        "source": grp,
                        "comm_scale": round(s, 3),
                        "gemm_scale": round(float(g[k]), 3),
                        "attn_scale": round(float(a[k]), 3),
                        "inter_scale": round(float(inter[k]), 3),
                        "excess": round(float(total[k]) - floor, 3),
                        "held_out_mean_abs_log_error": round(held[s], 4),
                        "chosen": bool(np.isclose(chosen.comm_scale, s)),
                    }
                )
            )
        best_at[min(held, key=lambda s: held[s])] += 1
    for s in scales:
        print(json.dumps({"comm_scale": round(s, 3), "folds_best_held_out": best_at[s]}))


if __name__ == "__main__":
    main()
