"""benchmarks/published_reports.py and its table (benchmarks/holdout/technical_reports.csv): how a
row's unknowns expand into --batch records, and the table's derived numbers redone by hand."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _rows() -> dict[str, dict[str, str]]:
    with (BENCH / "holdout" / "technical_reports.csv").open(encoding="utf-8") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def test_unknowns_expand_to_every_combination(bench_module: Callable[[str], Any]) -> None:
    m = bench_module("published_reports")
    assert m.choices("") == [{}]
    got = m.choices("vpp=1|2; tp_overlap=none|full")
    assert got == [{"vpp": "1", "tp_overlap": "none"}, {"vpp": "1", "tp_overlap": "full"},
                   {"vpp": "2", "tp_overlap": "none"}, {"vpp": "2", "tp_overlap": "full"}]


def test_strategy_keys_replace_the_stated_value_and_others_go_to_the_record(bench_module: Callable[[str], Any]) -> None:
    m = bench_module("published_reports")
    row = {"model": "llama3-8b", "hardware": "h100", "devices": "16", "devices_per_node": "8", "global_batch": "32",
           "seq_len": "4096", "precision": "fp8", "strategy": "tp=2,vpp=1,pp=2,dp=4", "unknowns": "vpp=2;fp8_recipe=rowwise"}
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
