"""CUPTI range-profiler counters travel with the file read: a trace converted to Parquet keeps them, so
the measured roofline survives the conversion (the analysis never re-opens a trace file)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from stepscope.analysis.api import analyze
from stepscope.trace.loader import ReadJob, read_one
from stepscope.trace.parquet import write_parquet

from .. import synth

CUPTI = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "traces"
    / "HolisticTraceAnalysis"
    / "tests"
    / "data"
    / "cupti_profiler"
    / "benchmark_result_924719_1679055439_trace.json.gz"
)
_OPS = ("add", "mul", "fma")


def _measured_by_hand() -> tuple[int, float, set[str]]:
    """(ranges, FLOPs = add + mul + 2 fma over the d/f/h counters, kernel names), read with the stdlib."""
    ev = [e for e in json.load(gzip.open(CUPTI))["traceEvents"] if e.get("cat") == "cuda_profiler_range"]
    flops = 0.0
    for e in ev:
        for p in "dfh":
            a, m, f = (
                float(e["args"].get(f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum", 0)) for op in _OPS
            )
            flops += a + m + 2 * f
    return len(ev), flops, {e["name"] for e in ev}


def test_parquet_keeps_the_counters_and_the_measured_roofline(tmp_path: Path) -> None:
    n_ranges, flops, names = _measured_by_hand()
    assert n_ranges == 77
    fr = read_one(ReadJob(str(CUPTI)))
    assert len(fr.counters) == n_ranges
    pq = tmp_path / "cupti.parquet"
    write_parquet(fr, pq)
    assert read_one(ReadJob(str(pq))).counters == fr.counters
    (from_json,) = analyze([str(CUPTI)], workers=1).ranks
    (from_parquet,) = analyze([str(pq)], workers=1).ranks
    assert from_json.roofline is not None and from_parquet.roofline is not None
    measured = from_parquet.roofline.measured
    assert measured == from_json.roofline.measured
    # one group per kernel name (16 here, under the 50 kept), each with all of its name's ranges
    assert {g.name for g in measured} == names and len(names) == 16
    assert sum(g.count for g in measured) == n_ranges
    assert sum(g.flops for g in measured) == pytest.approx(flops)


def test_the_cache_keeps_the_counters(tmp_path: Path) -> None:
    first = read_one(ReadJob(str(CUPTI), cache_dir=str(tmp_path)))
    again = read_one(ReadJob(str(CUPTI), cache_dir=str(tmp_path)))  # from the Parquet cache
    assert len(list(tmp_path.glob("*.parquet"))) == 1
    assert again.counters == first.counters and len(first.counters) == 77


def test_counter_reading_is_one_pass_and_values_of_the_wrong_type_are_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many ``}]`` in the text (lists of objects in args) and one counter event: the reader decodes
    about the file once (it used to re-decode the prefix at each ``}]``: quadratic), and counter
    values that are strings, lists or null count as 0."""
    from stepscope.trace import counters

    ev = [synth.cpu(f"op{i}", i, 0.5, shapes=[{"d": i}]) for i in range(3000)]
    key = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
    args = {
        key.format("ffma"): 10,
        key.format("fadd"): "7",
        key.format("fmul"): [1],
        "dram__bytes_read.sum": None,
        "dram__bytes_write.sum": "12",
    }
    ev.append(
        {"ph": "X", "cat": "cuda_profiler_range", "name": "k", "pid": 0, "tid": 1, "ts": 5, "dur": 2, "args": args}
    )
    p = synth.write(tmp_path / "t.json", ev)
    decoded: list[int] = []
    real = counters._PIECE

    class Counting:
        def decode(self, text: bytes) -> object:
            decoded.append(len(text))
            return real.decode(text)

    monkeypatch.setattr(counters, "_PIECE", Counting())
    got = counters.read_counter_ranges(p)
    assert [(c.name, c.flops, c.dram_bytes) for c in got] == [("k", {"fp32": 20.0}, 0.0)]
    assert sum(decoded) <= 2 * p.stat().st_size
