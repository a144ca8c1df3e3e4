"""The planner examples in examples/plan run as their README says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plan"


@pytest.mark.slow
def test_calibrating_on_nvidias_h100_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-70b",
                "--hardware",
                "h100",
                "--devices",
                "128",
                "--global-batch",
                "256",
                "--seq-len",
                "8192",
                "--precision",
                "fp8",
                "--set",
                "grad_dtype=bf16",
                "--framework",
                "megatron",
                "--set",
                "param_gather_overlap=true",
                "--calibrate",
                str(EXAMPLES / "nvidia_h100_runs.csv"),
                "--evaluate",
                "tp=4,pp=8,dp=4,vpp=5,mb=1,zero=1",
                "--json",
            ]
        )
        == 0
    )
    cal = json.loads(capsys.readouterr().out)["calibration"]
    assert cal["runs"] == 9 and cal["ignored_columns"] == ["run"]
    # the fit helps on runs it was not fitted to (leave-one-out), as a calibration should
    assert cal["mape_after_leave_one_out"] < cal["mape_before"]


def test_the_sweep_runs_every_record(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--batch", str(EXAMPLES / "sweep.jsonl"), "--json"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(out) == 3 and all("error" not in r and r["step_time_s"] > 0 for r in out)


@pytest.mark.slow
def test_a_row_that_does_not_describe_its_run_stands_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each row's prediction by a fit on the other rows is reported; a step time tripled by mistake
    (line 5) is the one furthest from its prediction, and the terminal names it first."""
    lines = (EXAMPLES / "nvidia_h100_runs.csv").read_text(encoding="utf-8").splitlines()
    prefix, step_time = lines[4].rsplit(",", 1)
    lines[4] = f"{prefix},{float(step_time) * 3}"
    bad = tmp_path / "runs.csv"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = [
        "plan",
        "--model",
        "llama3-70b",
        "--hardware",
        "h100",
        "--devices",
        "128",
        "--global-batch",
        "256",
        "--seq-len",
        "8192",
        "--calibrate",
        str(bad),
        "--evaluate",
        "tp=4,pp=8,dp=4,mb=1",
    ]
    assert main([*args, "--json"]) == 0
    per_run = json.loads(capsys.readouterr().out)["calibration"]["per_run"]
    assert [r["line"] for r in per_run] == list(range(2, 11))  # CSV lines, the header being line 1
    worst = max(per_run, key=lambda r: abs(r["predicted_loo_s"] / r["measured_s"] - 1))
    assert worst["line"] == 5 and worst["predicted_loo_s"] < worst["measured_s"] / 2
    assert main(args) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("furthest left out: line 5 ") == 1


def test_factors_that_move_between_leave_one_out_fits_are_shown() -> None:
    from stepscope.report.plan_lines import what_if_lines

    cal = {
        "runs": 9,
        "gemm_scale": 1.12,
        "attn_scale": 1.0,
        "comm_scale": 1.0,
        "inter_scale": 1.0,
        "mape_before": 0.17,
        "mape_after_leave_one_out": 0.11,
        "leave_one_out_range": {"gemm_scale": [1.06, 1.19], "attn_scale": [1.0, 1.0], "layer_overhead_s": [0.0, 2e-4]},
    }
    lines = what_if_lines({"calibration": cal})
    # only the factors whose fits differ; the host wait in microseconds
    assert lines[1] == "leave-one-out fits ranged: GEMM x1.06-1.19, host wait 0-200 us"


def test_runs_the_model_itself_predicts_calibrate_to_the_priors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Step times taken from the planner's own predictions: every leave-one-out fit is the priors
    (scales 1, no host wait), so the ranges collapse and nothing is flagged."""
    job = ["--model", "llama3-8b", "--hardware", "h100", "--devices", "16", "--global-batch", "64", "--seq-len", "4096"]
    rows = ["model,hardware,devices,global_batch,seq_len,strategy,step_time_s"]
    for strategy in ("tp=1,dp=16,mb=1", "tp=2,dp=8,mb=2", "tp=4,dp=4,mb=1", "tp=2,pp=2,dp=4,mb=1"):
        assert main(["plan", *job, "--evaluate", strategy, "--json"]) == 0
        step = json.loads(capsys.readouterr().out)["step_time_s"]
        rows.append(f'llama3-8b,h100,16,64,4096,"{strategy}",{step!r}')
    runs = tmp_path / "runs.csv"
    runs.write_text("\n".join(rows) + "\n", encoding="utf-8")
    args = ["plan", *job, "--calibrate", str(runs), "--evaluate", "tp=8,dp=2,mb=1"]
    assert main([*args, "--json"]) == 0
    cal = json.loads(capsys.readouterr().out)["calibration"]
    assert cal["mape_before"] == pytest.approx(0, abs=1e-9) and cal["mape_after_leave_one_out"] == pytest.approx(
        0, abs=1e-9
    )
    assert {k: cal[k] for k in ("gemm_scale", "attn_scale", "comm_scale", "inter_scale", "layer_overhead_s")} == {
        "gemm_scale": 1.0,
        "attn_scale": 1.0,
        "comm_scale": 1.0,
        "inter_scale": 1.0,
        "layer_overhead_s": 0.0,
    }
    assert all(lo == hi for lo, hi in cal["leave_one_out_range"].values())
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "ranged" not in out and "furthest left out" not in out


def test_a_row_missing_a_cell_names_its_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs.csv"
    runs.write_text(
        "model,hardware,devices,global_batch,seq_len,strategy,step_time_s\n"
        'llama3-8b,,8,16,4096,"dp=8",3.0\nllama3-8b,h100,8,16,4096,"dp=8",3.0\n',
        encoding="utf-8",
    )
    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-8b",
                "--hardware",
                "h100",
                "--devices",
                "8",
                "--global-batch",
                "16",
                "--seq-len",
                "4096",
                "--calibrate",
                str(runs),
                "--evaluate",
                "dp=8",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "line 2:" in err and "row: hardware)" in err
