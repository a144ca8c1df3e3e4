"""The planner on a user's own measured strategy table: a 17B hybrid MoE model on 64 TPU v7x chips.

    python benchmarks/bench_seed.py [--dir benchmarks/data/seed_alm17b] [--json]

Data (benchmarks/data/seed_alm17b, ATTRIBUTION.md there): 14 strategies of JAX/MaxText on 64 TPU
v7x chips (128 TensorCores as JAX devices), global batch 5,120 x 4,096 tokens, each with its
measured step time, and the step breakdown of the best run (README.md); ``config.json`` is a
reconstruction of the architecture.

Mapping of a row (JAX devices = TensorCores, 2 per chip) to the planner's 64 chips:
- every chip is data-parallel: MaxText shards the batch over its data, fsdp and expert mesh axes,
  so ``dp = 64`` chips, of which ``ep`` form an expert-parallel group (the planner's ``ep | dp``;
  the row's ``ep`` kept as it is);
- ``fsdp > 1``: ZeRO-3 (MaxText's FSDP) over a shard group of ``fsdp / 2`` chips (``hsdp``; a
  group of all 64 chips is plain ``zero=3``); ``fsdp = 1``: no sharding of the dense weights
  (``zero=0``; the row's ``dp`` axis of TensorCores is then the halved one);
- micro-batch per chip = 2 x ``per_device_batch`` (two TensorCores a chip), ``ga`` = ``grad_accum``
  (64 x 2 x per_device_batch x grad_accum = 5,120 in every row);
- ``remat`` is MaxText's policy by name (``save_dot_ctx_ex_mlp`` and ``minimal_with_ctx`` are the
  table's short names of save_dot_with_context_except_mlp and minimal_with_context).

Reported: per row measured and predicted step time and their ratio; over the 14 rows the
Spearman correlation of predicted and measured step, whether the row predicted fastest is within
10% of the fastest measured, the median |error| of the step; uncalibrated and leaving one row out
(the planner's calibration, calibrate.fit, on the other 13 rows, predicting the row); the
issue's targets (LOO Spearman >= 0.8, predicted best within 10% of the measured best, median
error <= 15%, the uncalibrated step of the best configuration within 2x); and the predicted
parts of the best row beside the measured breakdown.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from stepscope.planner import calibrate as cal  # noqa: E402
from stepscope.planner.compute import flops  # noqa: E402
from stepscope.planner.cost import evaluate  # noqa: E402
from stepscope.planner.job import Job  # noqa: E402
from stepscope.planner.op_profile import class_seconds, profile_scales  # noqa: E402
from stepscope.planner.plans import framework_of, strategy_of  # noqa: E402
from stepscope.planner.rates import efficiencies  # noqa: E402
from stepscope.planner.record import job_from_record  # noqa: E402
from stepscope.planner.work import memory_bound_bytes, moe_permutation_bytes  # noqa: E402

CHIPS, CORES_PER_CHIP, GLOBAL_BATCH, SEQ = 64, 2, 5120, 4096
# the team's profile of the best run (README.md: XPlane + named scopes, 11.68 s), seconds per step
# on a device, as op_profile.py takes them from an analyze report: the GLA kernel; the grouped
# GEMMs (forward + backward-dlhs, backward-drhs); the exposed collectives (async collective stall,
# all-gather, all-reduce: the breakdown is serial and sums to the step)
PROFILED_RUN = "ci-prof-run115"
PROFILE_S = {"linear_attention": 2.868, "grouped_gemm": 1.909 + 0.668}
PROFILE_EXPOSED_COMM_S = 1.356 + 0.404 + 0.393
PROFILE_STEP_S = 11.68  # the rest of the breakdown is compute


def strategy_text(r: dict[str, str]) -> str:
    """The row's strategy in the planner's terms (module docstring)."""
    fsdp, ep = int(r["fsdp"]), int(r["ep"])
    shard = fsdp // CORES_PER_CHIP
    if fsdp > 1:
        zero = "zero=3" + (f",hsdp={shard}" if shard < CHIPS else "")
    else:
        zero = "zero=0"
    mb = CORES_PER_CHIP * int(r["per_device_batch"])
    return f"dp={CHIPS},ep={ep},{zero},mb={mb},ga={int(r['grad_accum'])},remat={r['remat']}"


def step_s(job: Job, s: dict[str, np.ndarray]) -> np.ndarray:
    return evaluate(job, s, keys=("step_s",))["step_s"]


def load(data: Path) -> tuple[list[dict[str, str]], list[cal.Run]]:
    with open(data / "measured.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    job = job_from_record(
        {
            "model": str(data / "config.json"),
            "hardware": "tpu-v7x",
            "devices": CHIPS,
            "global_batch": GLOBAL_BATCH,
            "seq_len": SEQ,
            "framework": "maxtext",
        }
    )
    fw = framework_of("maxtext")
    runs = []
    for r in rows:
        st = strategy_of(job, fw, strategy_text(r)).arrays()
        strategy = {k: int(v[0]) for k, v in st.items()}
        runs.append(cal.Run(job, strategy, float(r["step_time_s"]), step_s, r["run"]))
    return rows, runs


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks from 0, ties sharing the mean of their ranks (Spearman's definition)."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=np.float64)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    return (np.bincount(inverse, weights=ranks) / counts)[inverse]


def summary(measured: np.ndarray, predicted: np.ndarray) -> dict[str, Any]:
    spearman = float(np.corrcoef(_ranks(measured), _ranks(predicted))[0, 1])
    picked = int(np.argmin(predicted))
    best_gap = float(measured[picked] / measured.min() - 1)
    return {
        "spearman": round(spearman, 3),
        "predicted_best_row": picked,
        "predicted_best_measured_over_best": round(best_gap, 4),
        "predicted_best_within_10pct": bool(best_gap <= 0.10),
        "median_abs_error": round(float(np.median(np.abs(predicted / measured - 1))), 4),
    }


def from_profile(
    rows: list[dict[str, str]], runs: list[cal.Run]
) -> tuple[np.ndarray, dict[str, float], dict[str, Any]]:
    """Every row predicted by the planner calibrated on the profile of one run only (op_profile.py:
    the op classes and the exposed communication of PROFILED_RUN), and the scales it set."""
    k = next(i for i, r in enumerate(rows) if r["run"] == PROFILED_RUN)
    job = runs[k].job
    traced = strategy_of(job, framework_of("maxtext"), strategy_text(rows[k]))
    changes, info = profile_scales(
        job, traced, PROFILE_S, PROFILE_EXPOSED_COMM_S, PROFILE_STEP_S - PROFILE_EXPOSED_COMM_S
    )
    pred = np.array([float(r.predict(r.job.calibrated(**changes), _one(r))[0]) for r in runs])
    return pred, changes, {"scales": {n: round(v, 4) for n, v in changes.items()}, **info}


def profile_and_runs(runs: list[cal.Run], scales: dict[str, float]) -> np.ndarray:
    """Each row predicted by the calibration on the other rows holding what the profile measured
    (``plan --calibrate --from-analysis --baseline``: the runs take the profile's scales, the fit
    fits the rest)."""
    pinned = [dataclasses.replace(r, job=r.job.calibrated(**scales)) for r in runs]
    errs = cal.errors(pinned)
    out = []
    for k, r in enumerate(pinned):
        rest = [j for j in range(len(pinned)) if j != k]
        f = cal.fit([pinned[j] for j in rest], errs[rest], frozenset(scales))
        out.append(cal.predict_one(r, f))
    return np.array(out)


def _one(run: cal.Run) -> dict[str, np.ndarray]:
    return {k: np.array([v]) for k, v in run.strategy.items()}


def best_row_parts(run: cal.Run) -> dict[str, float]:
    """The best row's predicted compute by op class, seconds per step on a device, with the
    recompute factor applied: the routed-expert grouped GEMMs and the linear attention as
    op_profile.class_seconds takes them from the cost model (compute less compute without the
    class), softmax attention, the elementwise bytes and the MoE permutations recounted from the
    flop and byte counts, the other GEMMs the rest; beside its communication terms."""
    job, s = run.job, {k: np.array([v]) for k, v in run.strategy.items()}
    res = evaluate(job, s)
    m, fl = job.model, flops(job)
    peak, dev = job.hw.peak_flops("bf16"), job.devices
    gemm_eff, attn_eff, _ = efficiencies(job)
    rf = float(res["hfu"][0] / res["mfu"][0])
    ep = float(run.strategy["ep"])
    moe_layers = m.n_layers - m.first_dense_layers
    expert_flops = 6.0 * moe_layers * m.experts_per_token * 3 * m.d_model * m.d_ff_expert * fl.tokens
    classes = class_seconds(job, s)
    expert_s, lin_s = classes["grouped_gemm"], classes["linear_attention"]
    _, dk, hv, dv = m.linear_attn or (0, 0, 0, 0)
    linear_flops = 6.0 * m.linear_layers * hv * (2 * dk * dv + m.LINEAR_CHUNK * (dk + dv)) * fl.tokens
    one = np.array([1.0])
    elem = float(memory_bound_bytes(job, fl.tokens, one, one, fl.score_bytes, np.array([ep]), one)[0])
    perm = float(moe_permutation_bytes(job, fl.tokens, np.array([ep]), one)[0])
    hbm = job.hw.hbm_bytes_per_s
    soft_s = (fl.attention - linear_flops) / attn_eff / peak / dev * rf
    elem_s = (elem - perm) / hbm / dev * rf
    perm_s = perm / hbm / dev * rf
    other_gemm_s = float(res["compute_s"][0]) - expert_s - lin_s - soft_s - elem_s - perm_s
    return {
        "grouped_gemm_experts": expert_s,
        "other_gemm_and_loss": other_gemm_s,
        "linear_attention_gla": lin_s,
        "softmax_attention_mla": soft_s,
        "elementwise": elem_s,
        "moe_permutation": perm_s,
        "compute_total": float(res["compute_s"][0]),
        "recompute_factor": rf,
        "gemm_eff": float(gemm_eff),
        "attn_eff": float(attn_eff),
        # the experts' FLOPs over what their time buys at the GEMM ceiling (shape and Megablox tiles)
        "expert_gemm_shape_eff": float(expert_flops * rf / (expert_s * gemm_eff * peak * dev)),
        "dp_exposed": float(res["dp_s"][0]),
        "dp_hidden": float(res["hidden_dp_s"][0]),
        "ep_exposed": float(res["ep_s"][0]),
        "ep_hidden": float(res["hidden_ep_s"][0]),
        "step": float(res["step_s"][0]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(ROOT / "benchmarks" / "data" / "seed_alm17b"))
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    ap.add_argument(
        "--without", default="", help="runs to leave out of the table, comma-separated (e.g. a run of older code)"
    )
    a = ap.parse_args()
    rows, runs = load(Path(a.dir))
    left_out = {x for x in a.without.split(",") if x}
    keep = [k for k, r in enumerate(rows) if r["run"] not in left_out]
    rows, runs = [rows[k] for k in keep], [runs[k] for k in keep]
    measured = np.array([r.measured for r in runs])
    prior = cal.Fit(1.0, 1.0, 1.0, 1.0)
    uncal = np.array([cal.predict_one(r, prior) for r in runs])
    errs = cal.errors(runs)
    loo, fits = [], []
    for k, r in enumerate(runs):
        f = cal.fit([x for j, x in enumerate(runs) if j != k], errs[[j for j in range(len(runs)) if j != k]])
        fits.append(f)
        loo.append(cal.predict_one(r, f))
    loo_a = np.array(loo)
    best = int(np.argmin(measured))
    s_un, s_loo = summary(measured, uncal), summary(measured, loo_a)
    profiled = [k for k, r in enumerate(rows) if r["run"] == PROFILED_RUN]
    prof, scales, prof_out = from_profile(rows, runs) if profiled else (np.full(len(runs), np.nan), {}, {})
    if profiled:  # held out: every other row; and those of another strategy than the profiled run's
        same = {k for k, r in enumerate(rows) if strategy_text(r) == strategy_text(rows[profiled[0]])}
        for name, keep_rows in (
            ("rows_other_than_the_profiled_run", [k for k in range(len(rows)) if k not in profiled]),
            ("rows_of_other_strategies", [k for k in range(len(rows)) if k not in same]),
        ):
            prof_out[name] = {"rows": len(keep_rows), **summary(measured[keep_rows], prof[keep_rows])}
        prof_out["best_config_ratio"] = round(float(prof[best] / measured[best]), 3)
        both = profile_and_runs(runs, scales)
        others = [k for k in range(len(rows)) if k not in same]
        prof_out["and_the_other_runs_leave_one_out"] = {
            "all_rows": summary(measured, both),
            "rows_of_other_strategies": {"rows": len(others), **summary(measured[others], both[others])},
            "predicted_s": [round(float(x), 3) for x in both],
        }
    targets = {
        "loo_spearman_ge_0.8": s_loo["spearman"] >= 0.8,
        "loo_predicted_best_within_10pct": s_loo["predicted_best_within_10pct"],
        "loo_median_error_le_15pct": s_loo["median_abs_error"] <= 0.15,
        "uncalibrated_best_config_within_2x": bool(0.5 <= uncal[best] / measured[best] <= 2.0),
    }
    out = {
        "rows": [
            {
                "run": r["run"],
                "strategy": strategy_text(r),
                "measured_s": float(measured[k]),
                "predicted_s": round(float(uncal[k]), 3),
                "ratio": round(float(uncal[k] / measured[k]), 3),
                "loo_s": round(float(loo_a[k]), 3),
                "loo_ratio": round(float(loo_a[k] / measured[k]), 3),
                "profile_s": round(float(prof[k]), 3),
                "profile_ratio": round(float(prof[k] / measured[k]), 3),
                "loo_fit": {
                    "gemm": round(fits[k].gemm_scale, 3),
                    "attn": round(fits[k].attn_scale, 3),
                    "comm": round(fits[k].comm_scale, 3),
                    "host_wait_ms": round(fits[k].layer_overhead_s * 1e3, 2),
                    "linear_attn": round(fits[k].linear_attn_scale, 4),
                    "expert": round(fits[k].expert_scale, 3),
                    "ep": round(fits[k].ep_scale, 2),
                },
            }
            for k, r in enumerate(rows)
        ],
        "uncalibrated": s_un,
        "leave_one_out": s_loo,
        "targets_met": targets,
        "from_profile_of_one_run": prof_out,
        "best_row_parts_s": {k: round(v, 4) for k, v in best_row_parts(runs[best]).items()},
    }
    if a.json:
        print(json.dumps(out))
        return
    print(
        f"{'run':16} {'strategy (planner)':62} {'meas s':>7} {'pred s':>7} {'ratio':>6} {'LOO s':>7} {'ratio':>6}"
        f" {'prof s':>7} {'ratio':>6}"
    )
    for r in out["rows"]:
        print(
            f"{r['run']:16} {r['strategy']:62} {r['measured_s']:7.3f} {r['predicted_s']:7.3f} {r['ratio']:6.3f}"
            f" {r['loo_s']:7.3f} {r['loo_ratio']:6.3f} {r['profile_s']:7.3f} {r['profile_ratio']:6.3f}"
        )
    for name in ("uncalibrated", "leave_one_out"):
        print(name, json.dumps(out[name]))
    print("targets", json.dumps(targets))
    print(f"from the profile of {PROFILED_RUN} only", json.dumps(prof_out))
    print("LOO fits", json.dumps([r["loo_fit"] for r in out["rows"]]))
    print("best row parts (s)", json.dumps(out["best_row_parts_s"]))


if __name__ == "__main__":
    main()
