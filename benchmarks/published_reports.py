"""Planner predictions for training runs that technical reports describe, against what they report.

    python benchmarks/published_reports.py [--rows OUT.csv]

``holdout/technical_reports.csv`` holds runs whose layout a model's technical report states
(DeepSeek-V3 on 2,048 H800s, Llama 3 405B on 8K-16K H100s, Nemotron-4 340B on 128 and 6,144
H100s), with the report's measured throughput; a ``settings`` column carries framework settings
(``key=value;...``) into the record.
None of these rows is in ``benchmarks/data/published_runs.csv`` and none was used to set a
planner constant. What a report leaves unstated is listed in the row's ``unknowns`` column as
``key=a|b|c`` choices (``;`` between keys); every combination is predicted and the script prints
the range, so a row is a check that the measured value falls inside what the unknowns allow, and
how wide that is. Each combination runs through one ``stepscope plan --batch --json`` process
(the public interface). Rules: holdout/README.md, "Technical reports".
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_holdout import run_batch  # noqa: E402

from stepscope.planner.search import STRATEGY_DEFAULTS  # noqa: E402

TABLE = ROOT / "benchmarks" / "holdout" / "technical_reports.csv"
RECORD_FIELDS = ("model", "hardware", "devices", "devices_per_node", "global_batch", "seq_len", "precision")
INTS = ("devices", "devices_per_node", "global_batch", "seq_len")


def choices(unknowns: str) -> list[dict[str, str]]:
    """``"a=1|2;b=x|y"`` -> every combination as {key: value}; "" -> one empty combination."""
    keys, values = [], []
    for part in filter(None, (p.strip() for p in unknowns.split(";"))):
        key, _, alts = part.partition("=")
        keys.append(key.strip())
        values.append([a.strip() for a in alts.split("|")])
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def settings(text: str) -> dict:
    """``"a=true;b=cudnn"`` -> {"a": True, "b": "cudnn"}: framework settings for the --batch record."""
    out: dict = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, _, value = part.partition("=")
        out[key.strip()] = {"true": True, "false": False}.get(value.strip(), value.strip())
    return out


def records(row: dict[str, str]) -> list[tuple[dict[str, str], dict]]:
    """(the unknowns' values, the --batch record) for each combination of the row's unknowns:
    a value goes into the strategy string when it is a strategy key, else into the record."""
    out = []
    for combo in choices(row["unknowns"]):
        rec: dict = {k: int(row[k]) if k in INTS else row[k] for k in RECORD_FIELDS}
        if rec["model"].endswith(".json"):
            rec["model"] = str(TABLE.parent / rec["model"])
        rec.update(settings(row.get("settings", "")))
        strategy = row["strategy"]
        for key, value in combo.items():
            if key in STRATEGY_DEFAULTS:  # a strategy key (as --evaluate reads it); the rest are record settings
                strategy = ",".join(p for p in strategy.split(",") if not p.startswith(key + "=")) + f",{key}={value}"
            else:
                rec[key] = value
        rec["strategy"] = strategy
        out.append((combo, rec))
    return out


def best_layout(rec: dict) -> tuple[float, str]:
    """The planner's fastest fitting layout for the record's job (the row's framework settings, TP
    overlap mechanism and EP overlap; the default schedules plus the row's own): (step seconds,
    strategy)."""
    from stepscope.planner.record import job_from_record
    from stepscope.planner.records import records as render_records
    from stepscope.planner.search import search
    from stepscope.planner.strategy import parse_strategy
    from stepscope.planner.vocab import SCHEDULES, TP_OVERLAP

    s = parse_strategy(rec["strategy"])
    scheds = sorted({"1f1b", "zb-h1", "zb-v", SCHEDULES[int(s["sched"][0])]})
    job = job_from_record({k: v for k, v in rec.items() if k != "strategy"})
    overlap = {"tp_overlap": TP_OVERLAP[int(s["tp_overlap"][0])], "ep_overlap": bool(s["ep_overlap"][0])}
    plan = search(job.with_settings(**overlap), top=1, where="sched=" + "|".join(scheds))
    best = render_records(plan.strategies, plan.results)[0]
    return float(best["step_time_s"]), ",".join(f"{k}={v}" for k, v in best["strategy"].items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=Path, help="write every combination's prediction to this CSV")
    ap.add_argument(
        "--search",
        action="store_true",
        help="also search each job: how much faster the planner's best layout is than the stated one, by its own model",
    )
    args = ap.parse_args()
    rows = list(csv.DictReader(TABLE.open(encoding="utf-8")))
    jobs = [(row, combo, rec) for row in rows for combo, rec in records(row)]
    results = run_batch([rec for _, _, rec in jobs])
    table = []
    for (row, combo, rec), res in zip(jobs, results):
        metric = row["measured_metric"]
        pred, measured = float(res[metric]), float(row["measured_value"])
        table.append(
            {
                "id": row["id"],
                **{k: combo.get(k, "") for k in ("vpp", "tp_overlap", "fp8_recipe")},
                "measured": measured,
                "predicted": round(pred, 1),
                "error": round(pred / measured - 1, 4),
                "memory_gb": round(float(res["memory_gb"]["total"]), 1),
                "fits": res["fits"],
            }
        )
        if args.search:
            best_s, best = best_layout(rec)
            table[-1].update(
                stated_step_s=round(float(res["step_time_s"]), 3),
                best_step_s=round(best_s, 3),
                best_gain=round(float(res["step_time_s"]) / best_s - 1, 4),
                best=best,
            )
    for row in rows:
        mine = [t for t in table if t["id"] == row["id"]]
        errs = sorted(t["error"] for t in mine)
        print(
            json.dumps(
                {
                    "id": row["id"],
                    "model": row["model"],
                    "devices": int(row["devices"]),
                    "metric": row["measured_metric"],
                    "measured": float(row["measured_value"]),
                    "combinations": len(mine),
                    "predicted_min": min(t["predicted"] for t in mine),
                    "predicted_max": max(t["predicted"] for t in mine),
                    "error_min": errs[0],
                    "error_max": errs[-1],
                    "measured_inside": errs[0] <= 0 <= errs[-1],
                    "fits": sorted({t["fits"] for t in mine}),
                    "memory_gb": sorted({t["memory_gb"] for t in mine}),
                    **({"best_gain": sorted({t["best_gain"] for t in mine})} if args.search else {}),
                }
            )
        )
    if args.rows:
        with args.rows.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(table[0]))
            w.writeheader()
            w.writerows(table)


if __name__ == "__main__":
    main()
