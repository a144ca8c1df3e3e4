"""--dp-overlap: the share of the data-parallel traffic hidden behind compute, by hand on one node,
through the CLI and the batch records, and against a trace's measured share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main
from stepscope.planner.cost import evaluate
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware, model
from stepscope.planner.strategy import parse_strategy

JOB = ["--model", "llama3-8b", "--hardware", "h100", "--devices", "8", "--global-batch", "8", "--seq-len", "2048"]


def _dp(overlap: float) -> dict[str, float]:
    res = evaluate(
        make_job(model("llama3-8b"), hardware("h100"), 8, 8, 8, 2048, dp_overlap=overlap),
        parse_strategy("dp=8,zero=0,mb=1"),
    )
    return {k: float(res[k][0]) for k in ("dp_s", "grads_gb", "compute_s")}


def test_no_overlap_exposes_the_whole_all_reduce_by_hand() -> None:
    """ZeRO-0 on 8 GPUs of one node: a ring all-reduce of the fp32 gradients, 2 x 7/8 of their bytes
    at the node's measured all-reduce bus bandwidth (436 GB/s) plus 2 x 7 ring steps of 10 us."""
    r = _dp(0.0)
    grad_bytes = r["grads_gb"] * 1e9  # ZeRO-0: every rank holds all the fp32 gradients
    assert r["dp_s"] == pytest.approx(2 * 7 / 8 * grad_bytes / 436e9 + 2 * 7 * 10e-6)


def test_a_share_hides_that_much_up_to_the_last_backward() -> None:
    """Half the all-reduce hides, never more than the last micro-batch's backward (2/3 of its compute)."""
    raw, half = _dp(0.0)["dp_s"], _dp(0.5)
    assert half["dp_s"] == pytest.approx(raw - 0.5 * min(raw, half["compute_s"] * 2 / 3))
    assert _dp(1.0)["dp_s"] == pytest.approx(max(raw - min(raw, half["compute_s"] * 2 / 3), 0.0))


def test_the_flag_and_the_batch_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", *JOB, "--evaluate", "dp=8,zero=0,mb=1", "--set", "dp_overlap=0", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["settings"]["dp_overlap"] == 0.0 and rec["time_s"]["dp"] == pytest.approx(_dp(0.0)["dp_s"])
    assert main(["plan", *JOB, "--evaluate", "dp=8,zero=0,mb=1"]) == 0
    assert "DP/FSDP" not in capsys.readouterr().out  # the prior is not an assumption worth a word
    assert main(["plan", *JOB, "--evaluate", "dp=8,zero=0,mb=1", "--set", "dp_overlap=0"]) == 0
    assert "DP/FSDP traffic not hidden" in " ".join(capsys.readouterr().out.split())
    batch = tmp_path / "b.jsonl"
    batch.write_text(
        json.dumps(
            {
                "model": "llama3-8b",
                "hardware": "h100",
                "devices": 8,
                "global_batch": 8,
                "seq_len": 2048,
                "strategy": "dp=8,zero=0,mb=1",
                "dp_overlap": 0.5,
            }
        )
        + "\n",
        encoding="utf-8",
    )
    assert main(["plan", "--batch", str(batch), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "ignored_keys" not in out and out["time_s"]["dp"] == pytest.approx(_dp(0.5)["dp_s"])
    for bad in ("-0.1", "1.5", "nan"):
        assert main(["plan", *JOB, "--evaluate", "dp=8", "--set", f"dp_overlap={bad}"]) == 2
        assert "dp_overlap must be a number >= 0 and <= 1 (share)" in capsys.readouterr().err


def test_the_flag_wins_over_a_traced_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace that hid 60% of its collectives: the what-if takes 0.6 unless --dp-overlap says otherwise."""
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps(
            {
                "ranks": [
                    {
                        "rank": 0,
                        "hardware": {"name": "H100-SXM", "peak_tflops": 989.4},
                        "step_stats": {"median_ns": 100_000_000},
                        "collectives": {"all_reduce": {"comm_ns": 10_000_000, "overlapped_ns": 6_000_000}},
                    }
                ]
            }
        )
    )
    what_if = [
        "--evaluate",
        "dp=8,zero=0,mb=1",
        "--baseline",
        "dp=8,zero=1,mb=1",
        "--from-analysis",
        str(report),
        "--json",
    ]
    assert main(["plan", *JOB, *what_if]) == 0
    assert json.loads(capsys.readouterr().out)["calibration"]["measured_dp_overlap"] == pytest.approx(0.6)
    assert main(["plan", *JOB, *what_if, "--set", "dp_overlap=0"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert "measured_dp_overlap" not in rec["calibration"] and rec["settings"]["dp_overlap"] == 0.0
