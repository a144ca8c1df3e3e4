"""Planner accuracy on held-out published runs (benchmarks/holdout/): data the planner was not tuned on.

    python benchmarks/bench_holdout.py [--rows OUT.csv] [--recipes] [--choice] [--validation benchmarks/data/published_runs.csv]

Each usable row of ``holdout/nvidia_perf_tables.csv`` becomes a ``stepscope plan --batch`` record
under the rules in ``holdout/README.md``, and one ``stepscope plan --batch FILE --json`` process
predicts them all (the public interface, as a user's sweep would run it). Reported: MAPE of
tokens/s per GPU and mean signed error (+ = predicted faster), overall and by system and by dense
vs MoE; Spearman rank correlation within each (table, system) group of 3+ rows; how many measured
runs the memory model says do not fit; the naive "6 x active params x tokens at 40% MFU" estimate
beside it; leave-one-run-out calibration within the dense and the MoE runs (what calibrating on
one's own runs gives). With the validation CSV present, also the prediction after calibrating on all of it
(four scales fitted on the 117 published rows, applied unchanged to these rows): the figure a
user who calibrated on public data gets on new runs.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HOLDOUT = ROOT / "benchmarks" / "holdout"
sys.path.insert(0, str(ROOT / "benchmarks"))


def records(rows: list[dict], recipes: bool = False, pipeline_split: bool = False) -> list[dict]:
    """The --batch record of each row (holdout/README.md, "Rules"); ``recipes``: with the two
    settings read from the recipes after the first run (README, "Second run"); ``pipeline_split``:
    Llama 3.1 405B with the embedding and the loss counted as pipeline layers, as Megatron-Bridge's
    recipe for it sets (llama31_405b.py: account_for_embedding/loss_in_pipeline_split=True; post-hoc,
    added in session 12 after these rows were predicted)."""
    out = []
    for r in rows:
        tp, pp, cp = int(r["tp"]), int(r["pp"]), int(r["cp"])
        dp = int(r["devices"]) // (tp * pp * cp)
        strategy = (
            f"tp={tp},pp={pp},cp={cp},dp={dp},vpp={r['vp']},ep={r['ep']},mb={r['micro_batch']},"
            f"zero={3 if r['fsdp'] == '1' else 1},tp_overlap={'full' if tp > 1 else 'none'}"
        )
        model = r["model"] if not r["model"].endswith(".json") else str(HOLDOUT / r["model"])
        system = r["system"].removeprefix("DGX-").lower()  # h100, b200, gb200
        # DGX H100/B200: 8 GPUs a node; GB200 NVL72: 64 GPUs of a rack's NVLink domain (the set-2 rule)
        per_node = min(int(r["devices"]), 64) if system == "gb200" else 8
        out.append(
            {
                "model": model,
                "hardware": system,
                "devices": int(r["devices"]),
                "devices_per_node": per_node,
                "global_batch": int(r["global_batch"]),
                "seq_len": int(r["seq_len"]),
                "precision": "bf16" if r["precision"] == "BF16" else "fp8",
                "param_gather_overlap": True,
                # NeMo / Megatron-Bridge attend through Transformer Engine: cuDNN's fused attention on
                # Hopper (data/frameworks.yaml megatron; measured only there, the rest keep the prior)
                "attention_kernel": "cudnn",
                "strategy": strategy,
            }
        )
        if recipes:
            if out[-1]["precision"] == "fp8":
                out[-1]["grad_dtype"] = "bf16"
            if "deepseek" in r["model"]:
                out[-1]["strategy"] += ",recompute=mla_up_proj"
            if "gpt-oss" in r["model"]:  # gpt_oss_workload_base_configs.py: recompute_modules=["layernorm", "moe_act"]
                out[-1]["strategy"] += ",recompute=layernorm_moe_act"
            if "Megatron-Bridge" in r["source"]:  # its performance recipes' _benchmark_common: cross_entropy_impl="te"
                out[-1]["loss"] = "te"
            if (
                "llama3-70b" in r["model"] and system == "gb200" and r["fsdp"] == "1"
            ):  # llama3_workload_base_configs.py:
                out[-1]["strategy"] += ",offload_layers=40"  # cpu_offloading_num_layers=40 (the Grace CPU holds them)
            if "qwen3-235b" in r["model"] and system == "h100":  # qwen3_workload_base_configs.py: moe_a2a_overlap=True,
                out[-1]["strategy"] = (
                    out[-1]["strategy"].replace("tp_overlap=full", "tp_overlap=none") + ",ep_overlap=1"
                )  # tp_comm_overlap=False
        if pipeline_split and "405b" in r["model"]:
            out[-1]["pipeline_split_embedding"] = True
    return out


def run_batch(recs: list[dict]) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "holdout.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
        cmd = [
            sys.executable,
            "-c",
            "import sys; from stepscope.cli import main; sys.exit(main())",
            "plan",
            "--batch",
            str(path),
            "--json",
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def jobs(recs: list[dict]) -> list[tuple[Any, dict[str, np.ndarray]]]:
    """Each record's job and strategy, as `plan --batch` parses them (built once, used by every section)."""
    from stepscope.planner.record import job_from_record
    from stepscope.planner.strategy import parse_strategy

    return [(job_from_record(r), parse_strategy(r["strategy"])) for r in recs]


def naive(job: Any) -> float:
    return 0.4 * job.hw.peak_flops(job.precision) / (6 * job.model.matmul_params_per_token())


def calibrated(js: list[tuple[Any, dict[str, np.ndarray]]], validation: Path) -> list[float]:
    """Each record predicted with the four scales fitted on every validation row."""
    from bench_planner import validation_runs

    from stepscope.planner.calibrate import fit, predict_tokens

    f = fit(validation_runs(validation))
    print(
        json.dumps(
            {
                "calibration_fit_on_validation": {
                    k: round(v, 6 if k == "layer_overhead_s" else 3) for k, v in vars(f).items()
                }
            }
        )
    )
    return [float(predict_tokens(f.apply(job), s)[0]) for job, s in js]


def choice(rows: list[dict], js: list[tuple[Any, dict[str, np.ndarray]]], framework: str | None = None) -> None:
    """Where each tuned layout ranks in the planner's own search of the same job (TP overlap on, as
    the recipes run): NVIDIA picked these layouts for throughput, so a planner that ranks well puts
    them near its top. Prints each row's predicted tokens/s for NVIDIA's layout and for the planner's
    best that fits, how many fitting configurations the planner rates faster, and a summary.
    ``framework``: search only that framework's recompute policies and schedules (as
    ``plan --framework`` does)."""
    from stepscope.planner import frameworks
    from stepscope.planner.cost import evaluate
    from stepscope.planner.recompute import RECOMPUTE
    from stepscope.planner.search import space
    from stepscope.planner.where import mask, parse_where

    allowed = parse_where(frameworks.where(frameworks.by_name(framework), "")) if framework else []
    gains: dict[str, list[float]] = {"dense": [], "MoE": []}
    for r, (job, s) in zip(rows, js):
        theirs = float(evaluate(job, s)["tokens_per_s_per_device"][0])
        sp = space(job.with_settings(tp_overlap="full"))
        if allowed:
            keep = mask(sp, allowed)
            sp = {k: v[keep] for k, v in sp.items()}
        res = evaluate(job, sp)
        tok = np.where(res["fits"].astype(bool), res["tokens_per_s_per_device"], 0.0)
        best = int(np.argmax(tok))
        kind = "MoE" if job.model.n_experts else "dense"
        gains[kind].append(float(tok[best]) / theirs - 1)
        print(
            json.dumps(
                {
                    "choice": r["id"],
                    "model": Path(r["model"]).stem,
                    "nvidia_layout_predicted": round(theirs, 1),
                    "planner_best_predicted": round(float(tok[best]), 1),
                    "planner_gain": round(float(tok[best]) / theirs - 1, 3),
                    "rated_faster": int(np.count_nonzero(tok > theirs)),
                    "fitting": int(np.count_nonzero(tok)),
                    "planner_best": ",".join(
                        f"{k}={int(sp[k][best])}" for k in ("tp", "pp", "vpp", "dp", "cp", "ep", "mb", "zero")
                    )
                    + f",recompute={RECOMPUTE[int(sp['recompute'][best])]}",
                }
            )
        )
    for kind, g in gains.items():
        print(
            json.dumps(
                {
                    "choice_summary": kind,
                    "rows": len(g),
                    "median_planner_gain": round(float(np.median(g)), 3),
                    "within_10pct": sum(x <= 0.10 for x in g),
                }
            )
        )


def own_runs(rows: list[dict], js: list[tuple[Any, dict[str, np.ndarray]]]) -> None:
    """What calibrating on one's own runs gives on these: within each kind (dense, MoE), each run
    predicted by the calibration fitted on the kind's other runs (leave-one-run-out: the four scales
    and, where an inner leave-one-out selects it, the host wait, whose range over the folds is shown)."""
    import dataclasses

    from stepscope.planner.calibrate import Run, cross_validate, predict_tokens

    runs = [
        Run(
            job,
            {k: int(v[0]) for k, v in s.items()},
            float(r["tokens_per_s_per_gpu"]),
            predict_tokens,
            "MoE" if job.model.n_experts else "dense",
        )
        for r, (job, s) in zip(rows, js)
    ]
    for kind in ("dense", "MoE"):
        mine = [dataclasses.replace(x, group=str(i)) for i, x in enumerate(runs) if x.group == kind]
        if len(mine) >= 3:
            cv = cross_validate(mine).values()
            ape = [float(v["mape"]) for v in cv]
            wait_us = [float(v["layer_overhead_s"]) * 1e6 for v in cv]
            print(
                json.dumps(
                    {
                        "calibrated_own_runs": kind,
                        "rows": len(mine),
                        "mape_leave_one_out": round(float(np.mean(ape)), 3),
                        "host_wait_us_over_folds": [min(wait_us), max(wait_us)],
                    }
                )
            )


def summary(rows: list[dict], key: str) -> dict:
    m = np.array([r["measured"] for r in rows])
    out: dict = {"rows": len(rows)}
    for name in ("predicted", "naive", "calibrated"):
        if rows and rows[0].get(name) is not None:
            p = np.array([r[name] for r in rows])
            out[f"{name}_mape"] = round(float(np.mean(np.abs(p - m) / m)), 3)
            out[f"{name}_mean_signed"] = round(float(np.mean(p / m - 1)), 3)
    return {key: out}


def main() -> None:
    from bench_planner import _spearman as spearman

    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", default=str(HOLDOUT / "nvidia_perf_tables.csv"))
    ap.add_argument("--validation", default=str(ROOT / "benchmarks" / "data" / "published_runs.csv"))
    ap.add_argument("--rows", metavar="OUT.csv", help="also write each row's measured and predicted values")
    ap.add_argument(
        "--recipes", action="store_true", help="the second run: gradient dtype and recompute as the recipes set them"
    )
    ap.add_argument(
        "--pipeline-split",
        action="store_true",
        help="post-hoc: Llama 3.1 405B with the embedding and the loss counted as pipeline layers, as its recipe sets",
    )
    ap.add_argument(
        "--choice", action="store_true", help="also rank each tuned layout in the planner's own search of its job"
    )
    ap.add_argument(
        "--choice-framework", metavar="NAME", help="with --choice: search only this framework's policies and schedules"
    )
    ap.add_argument(
        "--set",
        choices=("1", "2", "all"),
        default="all",
        help="1: the 28 runs of runs 1-3 (H100, B200); 2: the 16 GB200 runs added after them (README)",
    )
    a = ap.parse_args()
    with open(a.csv, encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["use"] == "yes" and a.set in ("all", r["set"])]
    recs = records(rows, a.recipes, a.pipeline_split)
    preds = run_batch(recs)
    js = jobs(recs)
    cal = calibrated(js, Path(a.validation)) if Path(a.validation).exists() else [None] * len(recs)
    per = []
    for r, rec, (job, _), p, c in zip(rows, recs, js, preds, cal):
        per.append(
            {
                "id": r["id"],
                "set": r["set"],
                "table": f"{r['source'].split()[0]} {r['container']}",
                "system": r["system"],
                "model": Path(r["model"]).stem,
                "moe": job.model.n_experts > 0,
                "strategy": rec["strategy"],
                "measured": float(r["tokens_per_s_per_gpu"]),
                "predicted": round(p["tokens_per_s_per_device"], 1),
                "naive": round(naive(job), 1),
                "calibrated": None if c is None else round(c, 1),
                "fits": p["fits"],
                "memory_gb": round(p["memory_gb"]["total"], 1),
                "bottleneck": p["bottleneck"],
                "error": round(p["tokens_per_s_per_device"] / float(r["tokens_per_s_per_gpu"]) - 1, 3),
            }
        )
    if a.rows:
        with open(a.rows, "w", encoding="utf-8", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(per[0]))
            w.writeheader()
            w.writerows(per)
    print(json.dumps(summary(per, "ALL")))
    for st in sorted({r["set"] for r in per}):
        print(json.dumps(summary([r for r in per if r["set"] == st], f"set {st}")))
    for system in sorted({r["system"] for r in per}):
        print(json.dumps(summary([r for r in per if r["system"] == system], system)))
    for kind, sel in (("dense", False), ("MoE", True)):
        print(json.dumps(summary([r for r in per if r["moe"] == sel], kind)))
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in per:
        groups.setdefault((r["table"], r["system"]), []).append(r)
    for (table, system), g in sorted(groups.items()):
        print(
            json.dumps(
                {
                    "group": f"{table} {system}",
                    "rows": len(g),
                    "spearman": spearman([r["predicted"] for r in g], [r["measured"] for r in g]),
                    "naive_spearman": spearman([r["naive"] for r in g], [r["measured"] for r in g]),
                }
            )
        )
    print(json.dumps({"measured_runs_predicted_not_to_fit": [r["id"] for r in per if not r["fits"]]}))
    for r in per:
        print(
            json.dumps(
                {
                    k: r[k]
                    for k in (
                        "id",
                        "model",
                        "system",
                        "measured",
                        "predicted",
                        "error",
                        "calibrated",
                        "naive",
                        "memory_gb",
                        "bottleneck",
                    )
                }
            )
        )
    own_runs(rows, js)
    if a.choice:
        choice(rows, js, a.choice_framework)


if __name__ == "__main__":
    main()
