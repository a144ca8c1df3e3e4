"""How low can calibration take the validation error? Floors for the leave-one-source-out figure.

    python benchmarks/calibration_bounds.py [--csv benchmarks/data/published_runs.csv]

The calibration fits five factors (``calibrate._grid``: GEMM, attention, link and inter-node
scales and a host wait) to measured runs. Two in-sample fits bound what any calibration with these
factors can reach on the validation set; neither is a figure to report as accuracy, since each
is fitted on the very rows it is scored on:

1. ``global``: one set of factors fitted to every row (the grid point with the least summed
   |log error|, ties to the priors: ``calibrate._best`` without a pull). Leave-one-source-out
   fits each source on the others, so it is rarely below this: if this floor is above the 10%
   target, calibration alone cannot meet the target and only the model's terms can.
2. ``per_source``: each source its own best factors (its rows' least summed |log error|): what is
   left is spread within a source that no choice of the five factors removes.

Both are MAPE of the row's throughput metric, as in bench_planner.py.

A third line is an honest out-of-sample figure beside them (``--by-device``): leave-one-source-out
with each held-out source fitted on the other sources of the same device, when there are any
(else on all others), against the usual fit on all others (BENCHMARKS.md session 26, item 6).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_planner import ROOT, validation_runs

from stepscope.planner import calibrate as c


def _ape(run: c.Run, f: c.Fit) -> float:
    return abs(c.predict_one(run, f) / run.measured - 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", default=str(ROOT / "benchmarks" / "data" / "published_runs.csv"))
    ap.add_argument(
        "--by-device", action="store_true", help="also leave-one-source-out fitted on the same device's other sources"
    )
    a = ap.parse_args()
    runs = validation_runs(Path(a.csv))
    errs = c.errors(runs)  # (runs x grid) |log error|
    prior = c.Fit(1.0, 1.0, 1.0, 1.0, 0.0)
    best = c._best(errs.sum(axis=0))  # the unpulled fit: ties go to the priors
    out: dict = {
        "rows": len(runs),
        "priors_mape": round(float(np.mean([_ape(r, prior) for r in runs])), 4),
        "global_mape": round(float(np.mean([_ape(r, best) for r in runs])), 4),
        "global_fit": {k: round(v, 4) for k, v in vars(best).items() if k != "prior_pull"},
    }
    per_source, every = {}, []
    for grp in sorted({r.group for r in runs}):
        idx = [k for k, r in enumerate(runs) if r.group == grp]
        f = c._best(errs[idx].sum(axis=0))
        apes = [_ape(runs[k], f) for k in idx]
        every += apes
        per_source[grp] = {
            "rows": len(idx),
            "priors_mape": round(float(np.mean([_ape(runs[k], prior) for k in idx])), 4),
            "global_mape": round(float(np.mean([_ape(runs[k], best) for k in idx])), 4),
            "own_fit_mape": round(float(np.mean(apes)), 4),
        }
    out["per_source_mape"] = round(float(np.mean(every)), 4)
    print(json.dumps(out))
    for grp, v in per_source.items():
        print(json.dumps({"source": grp, **v}))
    if a.by_device:
        import dataclasses

        def loso(rs: list[c.Run], by_family: bool) -> float:
            res = c.cross_validate(rs, by_family=by_family, errs=errs)
            return round(sum(float(v["mape"]) * int(v["rows"]) for v in res.values()) / len(rs), 4)

        by_device = [dataclasses.replace(r, family=r.job.hw.name) for r in runs]
        print(json.dumps({"loso_all_others": loso(runs, False), "loso_same_device": loso(by_device, True)}))


if __name__ == "__main__":
    main()
