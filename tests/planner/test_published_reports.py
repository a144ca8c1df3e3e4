"""benchmarks/published_reports.py and its table (benchmarks/holdout/technical_reports.csv): how a
row's unknowns expand into --batch records, and the table's derived numbers redone by hand."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _rows() -> dict[str, dict[str, str]]:
    with (BENCH / "holdout" / "technical_reports.csv").open(encoding="utf-8") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def test_unknowns_expand_to_every_combination(bench_module: Callable[[str], Any]) -> None:
    m = bench_module("published_reports")
    assert m.choices("") == [{}]
    got = m.choices("vpp=1|2; tp_overlap=none|full")
    assert got == [
        {"vpp": "1", "tp_overlap": "none"},
        {"vpp": "1", "tp_overlap": "full"},
        {"vpp": "2", "tp_overlap": "none"},
        {"vpp": "2", "tp_overlap": "full"},
    ]


def test_strategy_keys_replace_the_stated_value_and_others_go_to_the_record(bench_module: Callable[[str], Any]) -> None:
    m = bench_module("published_reports")
    row = {
        "model": "llama3-8b",
        "hardware": "h100",
        "devices": "16",
        "devices_per_node": "8",
        "global_batch": "32",
        "seq_len": "4096",
        "precision": "fp8",
        "strategy": "tp=2,vpp=1,pp=2,dp=4",
        "unknowns": "vpp=2;fp8_recipe=rowwise",
    }
    [(combo, rec)] = m.records(row)
    assert combo == {"vpp": "2", "fp8_recipe": "rowwise"}
    assert rec["strategy"] == "tp=2,pp=2,dp=4,vpp=2"  # the stated vpp=1 is gone, not duplicated
    assert rec["fp8_recipe"] == "rowwise" and rec["devices"] == 16 and rec["precision"] == "fp8"


def test_layouts_multiply_to_the_device_counts() -> None:
    for r in _rows().values():
        s = dict(p.split("=") for p in r["strategy"].split(","))
        assert int(s["tp"]) * int(s["pp"]) * int(s.get("cp", 1)) * int(s["dp"]) == int(r["devices"]), r["id"]


def test_deepseek_v3_throughput_is_the_reports_tokens_over_its_gpu_hours() -> None:
    """Table 1: 14.8T tokens, 2,664K H800 GPU hours -> 14.8e12 / (2.664e6 x 3600) = 1,543.3 tokens/s."""
    assert float(_rows()["r1"]["measured_value"]) == 1543


def test_llama3_batches_are_16m_tokens() -> None:
    """Table 4: 16M tokens per batch: 2,048 x 8,192 = 16,777,216 = 128 x 131,072."""
    rows = _rows()
    for rid in ("r2", "r3", "r4"):
        assert int(rows[rid]["global_batch"]) * int(rows[rid]["seq_len"]) == 16_777_216


def test_nemotron_throughputs_are_the_reports_step_times() -> None:
    """Table 2: 2,304 x 4,096 tokens in 8.0 s on 6,144 GPUs = 192.0; the DGXC recipe: 32 x 4,096
    in 4.77 s on 128 = 214.7 tokens/s per GPU."""
    rows = _rows()
    assert float(rows["r5"]["measured_value"]) == round(2304 * 4096 / 8.0 / 6144, 1)
    assert float(rows["r6"]["measured_value"]) == round(32 * 4096 / 4.77 / 128, 1)


def test_nemotron_shape_against_the_recipes_flops_per_sequence() -> None:
    """The DGXC recipe's MFU uses 1.01e16 model FLOPs per 4,096-token sequence: Megatron's formula
    without recompute, 72 s L h^2 (1 + s/(6h) + V/(12 L h)), which counts every head's K and V (no
    GQA) and the full s x s attention. From NeMo's Nemotron4Config340B (h 18,432, 96 layers, FFN
    4h) and V = 256,000 that gives 1.009e16, so the shape matches the recipe. The planner counts
    GQA's 8 K/V groups (head_dim 192) and causal attention: per layer q/k/v 18,432 x (18,432 +
    2 x 8 x 192), out 18,432^2, MLP 2 x 18,432 x 73,728, plus the output layer, 6 x 336.3e9 per
    token, and 6 s h L per token of attention: 8.44e15 per sequence."""
    from stepscope.planner.search import model

    s, h, L, V = 4096, 18432, 96, 256000
    megatron = 72 * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))
    assert megatron == pytest.approx(1.01e16, rel=0.005)
    per_layer = h * (h + 2 * 8 * 192) + h * h + 2 * h * 4 * h
    ours = 6 * (L * per_layer + V * h) * s + 6 * s * h * L * s
    m = model(str(BENCH / "holdout" / "models" / "nemotron-4-340b.json"))
    assert m.flops_per_token(s) * s == pytest.approx(ours, rel=1e-3)
