"""plan --from-analysis: a what-if shows where the model's baseline differs from the traced step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traces"


def test_a_what_if_sets_the_model_baseline_against_the_traced_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--from-analysis: the baseline's compute, exposed communication and idle, as the trace's median
    step has them beside the model's (whose three parts add up to its step), so the gap shows where."""
    report = tmp_path / "r.json"
    assert main(["analyze", str(EXAMPLES / "a100_nccl_rank0.json.gz"), "--json", str(report), "-q"]) == 0
    steps = json.loads(report.read_text(encoding="utf-8"))["ranks"][0]["steps"]
    med = sorted(steps, key=lambda s: s["step_time_ns"])[len(steps) // 2]
    capsys.readouterr()
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "a100-40gb",
        "--devices",
        "8",
        "--global-batch",
        "8",
        "--seq-len",
        "2048",
        "--evaluate",
        "tp=2,dp=4,mb=1",
        "--baseline",
        "dp=8,mb=1",
        "--from-analysis",
        str(report),
    ]
    assert main([*args, "--json"]) == 0
    w = json.loads(capsys.readouterr().out)["what_if"]
    parts = w["baseline_parts_s"]
    assert parts["measured"] == pytest.approx(
        {
            "compute": med["compute_ns"] * 1e-9,
            "exposed_comm": med["exposed_comm_ns"] * 1e-9,
            "idle": med["idle_ns"] * 1e-9,
        }
    )
    assert sum(parts["model"].values()) == pytest.approx(w["predicted_baseline_step_time_s"])
    assert main(args) == 0
    assert "baseline, traced vs model: compute" in capsys.readouterr().out


def test_the_traced_host_bound_idle_becomes_a_host_wait(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The median step's host-bound idle is spread over the baseline's 32 layers x 1 micro-batch; the
    what-if with 2 micro-batches (dp 4 of 8 sequences, mb 1) waits twice as long."""
    report = tmp_path / "r.json"
    assert main(["analyze", str(EXAMPLES / "a100_nccl_rank0.json.gz"), "--json", str(report), "-q"]) == 0
    steps = json.loads(report.read_text(encoding="utf-8"))["ranks"][0]["steps"]
    host_s = sorted(steps, key=lambda s: s["step_time_ns"])[len(steps) // 2]["idle_causes"]["host_bound_ns"] * 1e-9
    assert host_s > 0
    capsys.readouterr()
    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-8b",
                "--hardware",
                "a100-40gb",
                "--devices",
                "8",
                "--global-batch",
                "8",
                "--seq-len",
                "2048",
                "--evaluate",
                "tp=2,dp=4,mb=1",
                "--baseline",
                "dp=8,mb=1",
                "--from-analysis",
                str(report),
                "--json",
            ]
        )
        == 0
    )
    rec = json.loads(capsys.readouterr().out)
    assert rec["calibration"]["measured_layer_overhead_s"] == pytest.approx(host_s / 32)
    assert rec["time_s"]["host"] == pytest.approx(2 * host_s)
    assert rec["what_if"]["baseline_parts_s"]["model"]["idle"] == pytest.approx(host_s)  # no pipeline: no bubble
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "a100-40gb",
        "--devices",
        "8",
        "--global-batch",
        "8",
        "--seq-len",
        "2048",
        "--evaluate",
        "tp=2,dp=4,mb=1",
    ]
    assert main([*args, "--baseline", "dp=8,mb=1", "--from-analysis", str(report)]) == 0
    assert "host s" in capsys.readouterr().out  # the table's column, shown when a row waits on the host
    assert main(args) == 0
    assert "host s" not in capsys.readouterr().out


def test_the_host_wait_is_the_idle_the_model_does_not_already_explain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a ZeRO-1 gather done tensor by tensor (1 us per tensor and rank), the baseline dp 8
    already spends (32 layers x 6 tensors + 2) x 8 ranks x 1 us = 1.552 ms on the host: only the
    traced host-bound idle beyond that is spread over its 32 layers x 1 micro-batch."""
    report = tmp_path / "r.json"
    assert main(["analyze", str(EXAMPLES / "a100_nccl_rank0.json.gz"), "--json", str(report), "-q"]) == 0
    steps = json.loads(report.read_text(encoding="utf-8"))["ranks"][0]["steps"]
    host_s = sorted(steps, key=lambda s: s["step_time_ns"])[len(steps) // 2]["idle_causes"]["host_bound_ns"] * 1e-9
    gather_s = (32 * 6 + 2) * 8 * 1e-6
    assert host_s > gather_s  # (the case is one where the subtraction shows)
    capsys.readouterr()
    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-8b",
                "--hardware",
                "a100-40gb",
                "--devices",
                "8",
                "--global-batch",
                "8",
                "--seq-len",
                "2048",
                "--evaluate",
                "tp=2,dp=4,mb=1,zero=1",
                "--baseline",
                "dp=8,mb=1,zero=1",
                "--from-analysis",
                str(report),
                "--set",
                "zero_gather_copy_us=1",
                "--json",
            ]
        )
        == 0
    )
    rec = json.loads(capsys.readouterr().out)
    assert rec["calibration"]["measured_layer_overhead_s"] == pytest.approx((host_s - gather_s) / 32)
    # the baseline's modeled host time is then the traced idle again, not the idle plus the gather
    assert rec["what_if"]["baseline_parts_s"]["model"]["idle"] == pytest.approx(host_s)


@pytest.mark.parametrize("host_bound", [-1, 2e9, "many", True, float("nan")])
def test_a_damaged_host_bound_idle_is_ignored(host_bound: object) -> None:
    from stepscope.planner.from_trace import from_report

    step = {
        "step_time_ns": 1e9,
        "compute_ns": 5e8,
        "exposed_comm_ns": 0,
        "idle_ns": 5e8,
        "idle_causes": {"host_bound_ns": host_bound},
    }
    doc = {"ranks": [{"rank": 0, "step_stats": {"median_ns": 1e9}, "steps": [step]}]}
    assert from_report(doc).host_bound_s is None
    ok = {**step, "idle_causes": {"host_bound_ns": 4e8}}
    assert from_report(
        {"ranks": [{"rank": 0, "step_stats": {"median_ns": 1e9}, "steps": [ok]}]}
    ).host_bound_s == pytest.approx(0.4)
    cpu_only = {**ok, "window_source": "cpu"}  # a rank without device work: nothing waited on the host
    assert (
        from_report({"ranks": [{"rank": 0, "step_stats": {"median_ns": 1e9}, "steps": [cpu_only]}]}).host_bound_s
        is None
    )


def test_a_search_says_it_does_not_carry_the_host_wait(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.json"
    assert main(["analyze", str(EXAMPLES / "a100_nccl_rank0.json.gz"), "--json", str(report), "-q"]) == 0
    capsys.readouterr()
    base = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "a100-40gb",
        "--devices",
        "8",
        "--global-batch",
        "8",
        "--seq-len",
        "2048",
        "--from-analysis",
        str(report),
    ]
    assert main([*base, "--top", "2"]) == 0
    assert "a search does not" in " ".join(capsys.readouterr().out.split())  # the terminal wraps long lines
    assert main([*base, "--evaluate", "tp=2,dp=4,mb=1", "--baseline", "dp=8,mb=1"]) == 0
    assert "a search does not" not in " ".join(capsys.readouterr().out.split())
