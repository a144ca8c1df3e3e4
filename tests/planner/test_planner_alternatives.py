"""A configuration that does not fit gets the fastest ones that do with the same layout, changing
the memory knobs only (recompute, ZeRO stage, micro-batch, offload, kept FSDP weights): one knob
if any such fits, else two. Checked against evaluating each variant on its own."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stepscope.cli import main
from stepscope.planner.alternatives import fitting_alternatives
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.recompute import RECOMPUTE
from stepscope.planner.search import hardware, model
from stepscope.planner.strategy import parse_strategy


def _job(batch: int) -> Job:
    return make_job(model("llama3-70b"), hardware("h100"), 64, 8, batch, 8192)


def _one(job: Job, strategy: str) -> tuple[bool, float]:
    r = evaluate(job, parse_strategy(strategy))
    return bool(r["fits"][0]), float(r["step_s"][0])


def test_single_changes_match_evaluating_each_variant() -> None:
    job, base = _job(64), "tp=8,dp=8,mb=1"
    assert not _one(job, base)[0]
    # every single-knob variant, written out: the other policies, higher ZeRO stages, offload
    # (mb=1 has no smaller micro-batch; nothing is kept between forward and backward)
    names = {"layernorm_moe_act": "layernorm"}  # a dense model's name for that policy
    variants = [(f"recompute={names.get(p, p)}", f"{base},recompute={p}") for p in RECOMPUTE if p != "none"]
    variants += [(f"zero={z}", f"{base},zero={z}") for z in (1, 2, 3)] + [("offload=1", f"{base},offload=1")]
    fitting = sorted((step, label) for label, s in variants for fits, step in [_one(job, s)] if fits)
    assert fitting  # the case is one where single changes fit
    alts = fitting_alternatives(job, parse_strategy(base), top=100)
    assert [a["change"] for a in alts] == [label for _, label in fitting]
    base_step = _one(job, base)[1]
    assert [a["step_change"] for a in alts] == pytest.approx([step / base_step - 1 for step, _ in fitting])


def test_two_changes_when_no_single_one_fits() -> None:
    job = _job(512)
    singles = (
        [f"mb=4,recompute={p}" for p in RECOMPUTE if p != "none"]
        + [f"mb=4,zero={z}" for z in (1, 2, 3)]
        + [f"mb={m}" for m in (1, 2)]
        + ["mb=4,offload=1"]
    )
    assert not any(_one(job, f"tp=8,dp=8,{v}")[0] for v in singles)
    alts = fitting_alternatives(job, parse_strategy("tp=8,dp=8,mb=4"))
    assert len(alts) == 3 and all(a["change"].count("=") == 2 for a in alts)
    steps = [a["step_time_s"] for a in alts]
    assert steps == sorted(steps)
    for a in alts:  # each one fits when evaluated on its own
        st = a["strategy"]
        policy = "layernorm_moe_act" if st["recompute"] == "layernorm" else st["recompute"]
        assert _one(job, f"tp=8,dp=8,mb={st['mb']},zero={st['zero']},recompute={policy},offload={st['offload']}")[0]


def test_a_framework_limits_the_policies_tried() -> None:
    """ZeRO-1 on 64 GPUs: several policies fit unrestricted (MaxText's save_* among them); with
    torchtitan's none/op/full only those appear."""
    job, s = _job(64), parse_strategy("tp=8,dp=8,mb=1,zero=1")
    every = {a["strategy"]["recompute"] for a in fitting_alternatives(job, s, top=100)}
    assert every - {"none", "op", "full"}  # the case is one where the restriction matters
    limited = fitting_alternatives(job, s, policies=("none", "op", "full"), top=100)
    assert {a["strategy"]["recompute"] for a in limited} == every & {"none", "op", "full"}
    assert np.isfinite([a["step_time_s"] for a in limited]).all()


def test_the_cli_line_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-70b",
        "--hardware",
        "h100",
        "--devices",
        "64",
        "--global-batch",
        "64",
        "--seq-len",
        "8192",
        "--evaluate",
        "tp=8,dp=8,mb=1",
    ]
    assert main([*args, "--json"]) == 0
    alts = json.loads(capsys.readouterr().out)["fitting_alternatives"]
    assert alts and alts[0]["memory_gb"] < 85.0
    assert main(args) == 0
    assert f"fits with: {alts[0]['change']} (step {alts[0]['step_change']:+.1%}" in " ".join(
        capsys.readouterr().out.split()
    )
    small = [
        "plan",
        "--model",
        "llama3-405b",
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--global-batch",
        "8",
        "--seq-len",
        "8192",
        "--evaluate",
        "tp=8,mb=1",
    ]
    assert main([*small, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fitting_alternatives"] == []
    assert main(small) == 0
    assert "the layout needs more model parallelism" in " ".join(capsys.readouterr().out.split())
    assert main([*args[:-1], "tp=8,dp=8,mb=1,zero=2", "--json"]) == 0  # fits: no alternatives given
    assert "fitting_alternatives" not in json.loads(capsys.readouterr().out)


def test_a_framework_limits_the_zero_stages_tried() -> None:
    """Llama 3 70B, tp 8 x dp 8, ZeRO-0: higher ZeRO stages are among the fixes unrestricted; with
    nanotron's stages (0, 1) no ZeRO-2/3 is offered, and what is offered still fits."""
    job, s = _job(64), parse_strategy("tp=8,dp=8,mb=1,zero=0")
    every = {a["strategy"]["zero"] for a in fitting_alternatives(job, s, top=200)}
    assert every & {2, 3}  # the case is one where the restriction matters
    limited = fitting_alternatives(job, s, zero_stages=(0, 1), top=200)
    assert limited and {a["strategy"]["zero"] for a in limited} <= {0, 1}
