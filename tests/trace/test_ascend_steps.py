"""Ascend ``step_trace_time.csv``: msprof's own step split beside stepscope's.

On the real msprof-analyze timeline the file is written here as torch_npu writes it: the
timeline's own Overlap Analysis lanes clipped to the ProfilerStep range, summed in exact decimal
arithmetic. stepscope's compute (its own union of the compute tasks) must agree with msprof's
Computing, and its idle + exposed copies with msprof's Free, to within a nanosecond per task."""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path

import stepscope
from stepscope.analysis.api import analyze
from stepscope.trace.ascend_steps import read_step_trace

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "fixtures/traces/msprof-analyze/test/ut/advisor/timeline_advice/trace_view.json"
)
OLD_HEADER = "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
OLD_HEADER += "Communication(Not Overlapped and Exclude Receive)"


def _lanes_in_step() -> tuple[dict[str, Decimal], Decimal, int]:
    """(Overlap Analysis lane -> us inside ProfilerStep#1, the step's length in us, NPU tasks)."""
    ev = json.loads(FIXTURE.read_text())
    name = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
    (step,) = [e for e in ev if e.get("ph") == "X" and str(e.get("name")).startswith("ProfilerStep#")]
    s0 = Decimal(step["ts"])
    s1 = s0 + Decimal(str(step["dur"]))
    lanes: dict[str, Decimal] = {}
    for e in ev:
        if e.get("ph") == "X" and name.get(e["pid"]) == "Overlap Analysis":
            a, b = max(Decimal(e["ts"]), s0), min(Decimal(e["ts"]) + Decimal(str(e["dur"])), s1)
            if b > a:
                lanes[e["name"]] = lanes.get(e["name"], Decimal(0)) + (b - a)
    tasks = sum(1 for e in ev if e.get("ph") == "X" and name.get(e["pid"]) == "Ascend Hardware")
    return lanes, s1 - s0, tasks


def _profile(root: Path, csv_text: str) -> Path:
    out = root / "w_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    shutil.copy(FIXTURE, out / "trace_view.json")
    (out / "step_trace_time.csv").write_text(csv_text)
    return out.parent


def test_msprof_split_agrees_with_ours_on_the_real_sample(tmp_path: Path) -> None:
    lanes, stage, tasks = _lanes_in_step()
    row = f"1,{lanes['Computing']},0,0,0,{lanes['Free']},{stage},0,0"
    rep = analyze(stepscope.load(_profile(tmp_path, f"{OLD_HEADER}\n{row}\n"))).ranks[0]
    got = rep.extras["msprof_steps"]
    assert got is not None and got.matched == 1
    (s,) = got.steps
    assert s.computing_ns == round(lanes["Computing"] * 1000) and s.preparing_ns == -1
    assert s.ours_compute_ns is not None and s.ours_idle_ns is not None
    assert abs(s.ours_compute_ns - s.computing_ns) <= tasks
    assert abs(s.ours_idle_ns - s.free_ns) <= tasks
    assert got.compute_diff_ratio is not None and abs(got.compute_diff_ratio) < 1e-4
    # msprof's step is the CPU step's range; ours runs from the first device task: shorter here
    assert s.ours_step_ns is not None and s.ours_step_ns < s.stage_ns


def test_newer_header_and_damaged_rows(tmp_path: Path) -> None:
    """``Device_id`` and ``Preparing`` columns; a row whose step is not a number is left out; a
    value that is not a number is -1; a step we do not have is kept with ours None."""
    head = "Device_id," + OLD_HEADER + ",Preparing"
    rows = ["0,1,100.5,2,0,2,50,200,0,2,12.25", "0,,1,1,1,1,1,1,1,1,1", "0,7,abc,0,0,0,0,0,5,0,0"]
    out = tmp_path / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "step_trace_time.csv").write_text("\n".join([head, *rows]) + "\n")
    cols, warning = read_step_trace(str(out / "trace_view.json"))
    assert warning is None and cols is not None
    assert cols["step"] == [1, 7]
    assert cols["computing_ns"] == [100_500, -1] and cols["preparing_ns"] == [12_250, 0]
    assert cols["bubble_ns"] == [0, 5_000] and cols["free_ns"] == [50_000, 0]
    rep = analyze(stepscope.load(_profile(tmp_path / "p", "\n".join([head, *rows]) + "\n"))).ranks[0]
    got = rep.extras["msprof_steps"]
    assert got is not None and [s.step for s in got.steps] == [1, 7] and got.matched == 1
    assert got.steps[1].ours_compute_ns is None


def test_unusable_file_warns(tmp_path: Path) -> None:
    ds = stepscope.load(_profile(tmp_path, "Name,Type\na,b\n"))
    assert any("step_trace_time.csv has no Step and Computing columns" in w for w in ds.warnings)
    assert analyze(ds).ranks[0].extras.get("msprof_steps") is None


def test_the_split_survives_the_parquet_cache(tmp_path: Path) -> None:
    from stepscope.cli import main

    lanes, stage, _ = _lanes_in_step()
    d = _profile(tmp_path, f"{OLD_HEADER}\n1,{lanes['Computing']},0,0,0,{lanes['Free']},{stage},0,0\n")
    assert main(["convert", str(d), "-o", str(tmp_path / "pq")]) == 0
    (pq,) = (tmp_path / "pq").glob("*.parquet")
    got = analyze(stepscope.load(pq)).ranks[0].extras["msprof_steps"]
    assert got is not None and got.steps[0].computing_ns == round(lanes["Computing"] * 1000)
