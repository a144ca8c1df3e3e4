"""plan --evaluate's sensitivity: the step's increase when one term is 10% worse, against the
term's share of the step measured independently (the step with that term made free)."""

from __future__ import annotations

import json

import pytest

from stepscope.cli import main
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.search import hardware, model
from stepscope.planner.sensitivity import sensitivity
from stepscope.planner.strategy import parse_strategy


def _step(job: Job, strategy: str) -> float:
    return float(evaluate(job, parse_strategy(strategy))["step_s"][0])


def test_a_term_10_percent_worse_adds_a_tenth_of_its_share() -> None:
    job = make_job(model("llama3-8b"), hardware("h100"), 1, 1, 4, 4096)  # one device: no communication
    strat = "mb=1"
    base = _step(job, strat)
    sens = sensitivity(job, parse_strategy(strat))
    # the GEMM (non-attention work) and attention shares, from the step with the term made ~free
    gemm_part = base - _step(job.replaced(gemm_scale=1e12), strat)
    attn_part = base - _step(job.replaced(attn_scale=1e12), strat)
    assert sens["gemm"] == pytest.approx(0.1 * gemm_part / base, rel=1e-6)
    assert sens["attention"] == pytest.approx(0.1 * attn_part / base, rel=1e-6)
    assert sens["communication"] == 0.0 and sens["inter_node"] == 0.0


def test_communication_that_is_exposed_shows(capsys: pytest.CaptureFixture[str]) -> None:
    # 16 devices on 2 nodes, FSDP: the traffic crosses nodes and part of it is exposed
    job = make_job(model("llama3-8b"), hardware("h100"), 16, 8, 32, 4096)
    sens = sensitivity(job, parse_strategy("dp=16,zero=3,mb=2"))
    assert sens["communication"] > 0 and 0 < sens["inter_node"] <= sens["communication"]
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "16",
        "--global-batch",
        "32",
        "--seq-len",
        "4096",
        "--evaluate",
        "dp=16,zero=3,mb=2",
    ]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sensitivity"] == pytest.approx(sens)
    assert main(args) == 0
    assert f"10% worse: GEMMs {sens['gemm']:+.1%} step" in capsys.readouterr().out
