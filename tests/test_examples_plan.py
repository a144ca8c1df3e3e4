"""The planner examples in examples/plan run as their README says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "plan"


def test_calibrating_on_nvidias_h100_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "llama3-70b", "--hardware", "h100", "--devices", "128", "--global-batch", "256",
                 "--seq-len", "8192", "--precision", "fp8", "--grad-dtype", "bf16", "--framework", "megatron",
                 "--overlap-param-gather", "--calibrate", str(EXAMPLES / "nvidia_h100_runs.csv"), "--evaluate",
                 "tp=4,pp=8,dp=4,vpp=5,mb=1,zero=1", "--json"]) == 0
    cal = json.loads(capsys.readouterr().out)["calibration"]
    assert cal["runs"] == 9 and cal["ignored_columns"] == ["run"]
    # the fit helps on runs it was not fitted to (leave-one-out), as a calibration should
    assert cal["mape_after_leave_one_out"] < cal["mape_before"]


def test_the_sweep_runs_every_record(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--batch", str(EXAMPLES / "sweep.jsonl"), "--json"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(out) == 3 and all("error" not in r and r["step_time_s"] > 0 for r in out)
