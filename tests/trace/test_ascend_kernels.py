"""Ascend ``kernel_details.csv``: read by column name through version drift, joined to the
timeline's tasks, and costed by the roofline from each task's own shapes. The real file is
msprof-analyze's sample; its timeline is rebuilt here from the file's own rows (the sample comes
without one), and the FLOPs are checked by hand and against the cores' own counters
(``aic_cube_fops``), which stepscope does not read."""

from __future__ import annotations

import csv
import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

import stepscope
from stepscope.analysis.api import analyze
from stepscope.analysis.config import AnalyzeConfig
from stepscope.trace.ascend_kernels import read_kernel_details

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures/ascend/kernel_details.csv"
US = 1000


def _sample_rows() -> list[dict[str, str]]:
    with SAMPLE.open(newline="") as f:
        return list(csv.DictReader(f))


def _profile(root: Path, details: str | None, tasks: list[dict[str, Any]], step_us: tuple[str, float]) -> Path:
    """A profiling directory: a timeline with one ProfilerStep and ``tasks`` on NPU 0."""
    out = root / "host_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_labels", "pid": 2, "tid": 0, "args": {"labels": "NPU 0"}},
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": step_us[0], "dur": step_us[1]},
    ]
    (out / "trace_view.json").write_text(json.dumps(ev + tasks))
    if details is not None:
        (out / "kernel_details.csv").write_text(details)
    return out.parent


def _task(name: str, stream: int, ts: str, dur: float, task_type: str = "Other") -> dict[str, Any]:
    return {"ph": "X", "name": name, "pid": 2, "tid": stream, "ts": ts, "dur": dur, "args": {"Task Type": task_type}}


def _sample_profile(root: Path) -> Path:
    """The sample's NPU tasks (those with a stream; the HCCL rows have none) as a timeline, each at
    its own start and duration; one step around them all."""
    rows = [r for r in _sample_rows() if r["Stream ID"] != "N/A"]
    tasks = [_task(r["Name"], int(r["Stream ID"]), r["Start Time(us)"], float(r["Duration(us)"])) for r in rows]
    t0 = min(Decimal(r["Start Time(us)"]) for r in rows)
    t1 = max(Decimal(r["Start Time(us)"]) + Decimal(r["Duration(us)"]) for r in rows)
    d = _profile(root, None, tasks, (str(t0 - 1), float(t1 - t0 + 2)))
    shutil.copy(SAMPLE, d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    return d


def test_sample_tasks_get_their_core_and_shapes(tmp_path: Path) -> None:
    rows = [r for r in _sample_rows() if r["Stream ID"] != "N/A"]
    t = stepscope.load(_sample_profile(tmp_path)).events
    dev = t.filter(pc.equal(pc.cast(t["kind"], "string"), "kernel"))
    assert dev.num_rows == len(rows) == 572
    # the timeline said "Other" for every task: the CSV's Accelerator Core replaces it
    want = sorted(r["Accelerator Core"] for r in rows)
    assert sorted(pc.cast(dev["cat"], "string").to_pylist()) == want
    by_name = dict(zip(dev["name"].to_pylist(), dev["input_dims"].to_pylist(), strict=True))
    assert json.loads(by_name["MatMul91"]) == [[4096, 12288], [4608, 12288]]
    assert json.loads(by_name["ZerosLike46"]) == [[544404480]]


def test_sample_matmul_flops_by_hand_and_by_the_cores_counters(tmp_path: Path) -> None:
    """``MatMul91``: A[4096, 12288] x B[4608, 12288]^T (k = 12288 is the shared dim): 2*m*n*k
    FLOPs. Over all MatMul / BatchMatMul tasks the shape FLOPs are within 10% of the cube units'
    own count (``aic_cube_fops``), which also counts the padding of partial tiles, so it is the
    larger."""
    rep = analyze(stepscope.load(_sample_profile(tmp_path)), AnalyzeConfig(hardware="Ascend-910B1")).ranks[0]
    roof = rep.roofline
    assert roof is not None
    mm = [g for g in roof.groups if g.name == "MatMul" and g.signature == "MatMul[[4096,12288],[4608,12288]]"]
    assert len(mm) == 1 and mm[0].count == 2
    assert mm[0].flops == 2 * (2 * 4096 * 4608 * 12288)
    assert mm[0].dur_ns == round((Decimal("1478.18") + Decimal("1470.9")) * US)
    ours = sum(g.flops for g in roof.groups if g.name in ("MatMul", "BatchMatMul"))
    cube = sum(float(r["aic_cube_fops"]) for r in _sample_rows() if "MatMul" in r["Type"])
    assert 0.90 * cube <= ours <= cube


def test_task_shapes_do_not_replace_an_aten_operators(tmp_path: Path) -> None:
    """A task launched by an ATen operator with recorded shapes keeps the operator's cost; the
    CSV's (here deliberately different) shapes are not used for it."""
    tasks = [_task("MatMul1", 3, "100.0", 40)]
    ev_op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": "10.0", "dur": 20}
    ev_op["args"] = {"Input Dims": [[64, 64], [64, 64]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}
    flow = [
        {"ph": "s", "cat": "async_npu", "name": "async_npu", "id": 5, "pid": 1, "tid": 1, "ts": "10.0"},
        {"ph": "f", "bp": "e", "cat": "async_npu", "name": "async_npu", "id": 5, "pid": 2, "tid": 3, "ts": "100.0"},
    ]
    details = _details_csv([("MatMul1", 3, "100.0", "40", "AI_CORE", '"1024,1024;1024,1024"', "FLOAT16;FLOAT16")])
    d = _profile(tmp_path, details, [*tasks, ev_op, *flow], ("0.0", 400))
    roof = analyze(stepscope.load(d)).ranks[0].roofline
    assert roof is not None
    assert [(g.name, g.flops) for g in roof.groups] == [("aten::mm", 2 * 64**3)]


def _details_csv(rows: list[tuple[str, int, str, str, str, str, str]], newer: bool = False) -> str:
    """A kernel_details.csv in the older (``Step Id``, ``Block Dim``) or newer (``Device_id``,
    ``Step ID``, ``Block Num``) header."""
    head = "Device_id,Step ID,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us)"
    head += ",Wait Time(us),Block Num,Mix Block Num,Input Shapes,Input Data Types,Input Formats"
    if not newer:
        head = head.replace("Device_id,", "").replace("Step ID", "Step Id").replace("Block Num", "Block Dim")
    lines = [head]
    for name, stream, ts, dur, core, shapes, types in rows:
        pre = "0,1" if newer else "1"
        lines.append(f"{pre},4294967295,1,{stream},{name},{name},{core},{ts},{dur},0,20,0,{shapes},{types},ND;ND")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("newer", [False, True])
def test_header_drift_and_coarser_start_times(tmp_path: Path, newer: bool) -> None:
    """Either header reads; a CSV start written with fewer decimals than the timeline's (0.4 us
    away) still matches; one 0.6 us away (past the 0.5 us tolerance) does not; N/A shapes stay
    unset; a scalar input is an empty shape."""
    tasks = [_task("Add1", 3, "100.4004", 10), _task("Mul2", 3, "200.0", 10), _task("Cast3", 4, "300.0", 5)]
    details = _details_csv(
        [
            ("Add1", 3, "100.0", "10", "AI_VECTOR_CORE", '"8,16;"', "BF16;FLOAT"),
            ("Mul2", 3, "200.6", "10", "AI_VECTOR_CORE", '"8,16"', "FLOAT16"),
            ("Cast3", 4, "300.0", "5", "AI_CPU", "N/A", "N/A"),
        ],
        newer=newer,
    )
    t = stepscope.load(_profile(tmp_path, details, tasks, ("0.0", 400))).events
    dev = t.filter(pc.equal(pc.cast(t["kind"], "string"), "kernel"))
    got = {
        n: (c, d, ty)
        for n, c, d, ty in zip(*(dev[k].to_pylist() for k in ("name", "cat", "input_dims", "input_types")))
    }
    assert got["Add1"] == ("AI_VECTOR_CORE", "[[8,16],[]]", '["BF16","FLOAT"]')
    assert got["Mul2"] == ("Other", None, None)
    assert got["Cast3"] == ("AI_CPU", None, None)


def test_unusable_or_foreign_details_warn_and_change_nothing(tmp_path: Path) -> None:
    tasks = [_task("Add1", 3, "100.0", 10)]
    d = _profile(tmp_path / "a", "Name,Type\nAdd1,Add\n", tasks, ("0.0", 400))
    ds = stepscope.load(d)
    assert any("kernel_details.csv has no Accelerator Core" in w for w in ds.warnings)
    assert ds.events["input_dims"].null_count == ds.events.num_rows
    other_run = _details_csv([("Add1", 3, "900.0", "10", "AI_VECTOR_CORE", '"8"', "FLOAT")])
    ds = stepscope.load(_profile(tmp_path / "b", other_run, tasks, ("0.0", 400)))
    assert any("0 of its 1 NPU tasks match" in w for w in ds.warnings)


def test_reader_refuses_nothing_it_cannot_parse(tmp_path: Path) -> None:
    out = tmp_path / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "kernel_details.csv").write_bytes(
        b'Stream ID,Accelerator Core,Start Time(us),Input Shapes,Input Data Types\n"unterminated'
    )
    table, warning = read_kernel_details(str(out / "trace_view.json"))
    assert table is None and warning is not None and "kernel_details.csv" in warning


def _number(v: str) -> float:
    try:
        return float(v)
    except ValueError:  # N/A
        return 0.0


def test_the_cores_counts_are_the_measured_roofline(tmp_path: Path) -> None:
    """With ``aic_metrics`` the cube units count their operations (``aic_cube_fops``,
    ``aiv_cube_fops``): the roofline's measured table holds them per CANN type, over the tasks' own
    time, summed here from the CSV. Vector-only operators (no cube work) are not in it."""
    rows = [r for r in _sample_rows() if r["Type"] == "MatMul"]
    fops = sum(_number(r[k]) for r in rows for k in ("aic_cube_fops", "aiv_cube_fops"))
    dur_ns = sum(round(Decimal(r["Duration(us)"]) * US) for r in rows)
    roof = analyze(stepscope.load(_sample_profile(tmp_path)), AnalyzeConfig(hardware="Ascend-910B1")).ranks[0].roofline
    assert roof is not None
    (g,) = [g for g in roof.measured if g.name == "MatMul"]
    assert (g.count, g.dtype, g.source) == (len(rows), "fp16", "counters") == (9, "fp16", "counters")
    assert g.flops == pytest.approx(fops) and g.dur_ns == dur_ns
    assert g.achieved_tflops == pytest.approx(fops / (dur_ns / 1e9) / 1e12)
    assert "ApplyAdamW" not in {m.name for m in roof.measured}
