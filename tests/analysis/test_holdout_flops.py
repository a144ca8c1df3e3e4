"""The model FLOP count against NVIDIA's own, read from their published performance tables.

Each row of benchmarks/holdout/nvidia_perf_tables.csv gives tokens/s and model TFLOP/s per GPU of
one measured run, so their ratio is the FLOPs per token of the source's formula: an independent
count of the same model. NeMo 24.07 counted attention over the whole sequence (no causal halving);
Megatron-Bridge's tables of 2025-26 halve it for the causal mask. Left out: GPT-OSS-120B (the
source's count is 17% below ours and below the 6 x active-parameter term alone, so it leaves out
more than attention) and DeepSeek-V3 (MLA and the MTP module counted differently, 2%)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from stepscope.planner.search import model

HOLDOUT = Path(__file__).resolve().parents[2] / "benchmarks" / "holdout"
ROWS = [
    r
    for r in csv.DictReader((HOLDOUT / "nvidia_perf_tables.csv").read_text(encoding="utf-8").splitlines())
    if r["use"] == "yes" and "gpt-oss" not in r["model"] and "deepseek" not in r["model"]
]


def test_rows_cover_dense_and_moe() -> None:
    assert len(ROWS) >= 20
    assert any("qwen3" in r["model"] for r in ROWS) and any("llama" in r["model"] for r in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_flops_per_token_match_the_published_count(row: dict[str, str]) -> None:
    path = row["model"] if not row["model"].endswith(".json") else str(HOLDOUT / row["model"])
    m = model(path)
    published = float(row["model_tflops_per_gpu"]) * 1e12 / float(row["tokens_per_s_per_gpu"])
    ours = m.flops_per_token(int(row["seq_len"]), causal=row["source"].startswith("Megatron-Bridge"))
    # the tables round TFLOP/s to 3 significant digits (0.07% at 736) and tokens/s to 4-5
    assert ours == pytest.approx(published, rel=0.01)


def test_every_held_out_run_is_a_valid_batch_record() -> None:
    """The benchmark's records go through the --batch parser and the cost model without error
    (guards benchmarks/bench_holdout.py against the interface drifting under it)."""
    import sys

    import numpy as np

    from stepscope.planner.cost import evaluate
    from stepscope.planner.record import job_from_record
    from stepscope.planner.strategy import parse_strategy

    sys.path.insert(0, str(HOLDOUT.parent))
    try:
        from bench_holdout import records
    finally:
        sys.path.remove(str(HOLDOUT.parent))
    rows = [
        r
        for r in csv.DictReader((HOLDOUT / "nvidia_perf_tables.csv").read_text(encoding="utf-8").splitlines())
        if r["use"] == "yes"
    ]
    for recipes in (False, True):
        for rec in records(rows, recipes):
            res = evaluate(job_from_record(rec), parse_strategy(rec["strategy"]))
            assert np.isfinite(res["tokens_per_s_per_device"]).all() and (res["tokens_per_s_per_device"] > 0).all(), rec


def test_every_korthikanti_run_is_a_valid_batch_record() -> None:
    """The same for the third set (benchmarks/bench_holdout_recompute.py), and its 49-layer twin
    of the 22B model differs from the 48-layer one by one layer's parameters and nothing else."""
    import sys

    import numpy as np

    from stepscope.planner.cost import evaluate
    from stepscope.planner.record import job_from_record
    from stepscope.planner.strategy import parse_strategy

    sys.path.insert(0, str(HOLDOUT.parent))
    try:
        from bench_holdout_recompute import record
    finally:
        sys.path.remove(str(HOLDOUT.parent))
    rows = list(csv.DictReader((HOLDOUT / "korthikanti_2022.csv").read_text(encoding="utf-8").splitlines()))
    assert len(rows) == 14
    for r in rows:
        rec = record(r)
        res = evaluate(job_from_record(rec), parse_strategy(rec["strategy"]))
        assert np.isfinite(res["step_s"]).all() and (res["step_s"] > 0).all(), rec
    a, b = (
        model(str(HOLDOUT / "models/korthikanti-gpt-22b.json")),
        model(str(HOLDOUT / "models/korthikanti-gpt-22b-49l.json")),
    )
    per_layer = 4 * 6144 * 6144 + 2 * 6144 * 4 * 6144  # q, k, v, o + up, down (GPT: no gate)
    assert b.n_layers - a.n_layers == 1 and b.matmul_params_per_token() - a.matmul_params_per_token() == per_layer


def test_the_recipes_view_changes_only_what_it_names() -> None:
    """The pre-registered records carry none of the settings read from NVIDIA's recipes afterwards;
    the --recipes view gives each to the rows its recipe names, and to no other (BENCHMARKS.md,
    "Held out: NVIDIA's performance tables")."""
    import sys

    sys.path.insert(0, str(HOLDOUT.parent))
    try:
        from bench_holdout import records
    finally:
        sys.path.remove(str(HOLDOUT.parent))
    rows = [
        r
        for r in csv.DictReader((HOLDOUT / "nvidia_perf_tables.csv").read_text(encoding="utf-8").splitlines())
        if r["use"] == "yes"
    ]
    rules = records(rows)
    assert not any(
        "recompute" in r["strategy"] or "offload" in r["strategy"] or "ep_overlap" in r["strategy"] or "loss" in r
        for r in rules
    )
    view = {row["id"]: rec for row, rec in zip(rows, records(rows, recipes=True), strict=True)}
    assert {i for i, r in view.items() if "offload_layers=40" in r["strategy"]} == {"g2", "h1"}
    assert {i for i, r in view.items() if "ep_overlap=1" in r["strategy"]} == {"b6"} and "tp_overlap=none" in view[
        "b6"
    ]["strategy"]
    assert {i for i, r in view.items() if "recompute=mla_up_proj" in r["strategy"]} == {
        row["id"] for row in rows if "deepseek" in row["model"]
    }
    assert {i for i, r in view.items() if r.get("loss") == "te"} == {
        row["id"] for row in rows if row["source"].startswith("Megatron-Bridge")
    }
