"""Offloading some layers' activations (strategy key offload_layers: Megatron's
--cpu-offloading-num-layers), by hand on Mixtral-8x7B as tests/test_planner.py's full offload."""

from __future__ import annotations

import json

import pytest

from stepscope.cli import main
from stepscope.planner.cost import evaluate
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware, model
from stepscope.planner.strategy import parse_strategy

S, B, H = 4096, 1, 4096
ACT_LAYER = S * B * H * 59 / 4  # 29.5 h x 2 B per token and layer (see test_expert_tp_and_offload), over tp=4


def test_six_layers_of_each_micro_batch_offloaded_by_hand() -> None:
    """TP 4 x PP 2 x DP 8, 16 layers a stage: the first stage holds 2 micro-batches (1F1B) of 16
    layers, 32 layers' activations; offloading 6 layers of each leaves 32 - 2 x 6 = 20 (the last stage
    10 + its logits, less). The traffic: 6 layers out and back per micro-batch, 32 micro-batches over
    PCIe Gen5's 64 GB/s, 80% of it hidden under what the other transfers left of the compute."""
    job = make_job(model("mixtral-8x7b"), hardware("h100"), 64, 8, 256, 4096)
    some = evaluate(job, parse_strategy("tp=4,pp=2,dp=8,ep=8,zero=1,offload_layers=6"))
    none = evaluate(job, parse_strategy("tp=4,pp=2,dp=8,ep=8,zero=1"))
    assert some["activations_gb"][0] == pytest.approx(20 * ACT_LAYER / 1e9)
    assert none["activations_gb"][0] == pytest.approx(32 * ACT_LAYER / 1e9)
    traffic = 2 * ACT_LAYER * 6 * (256 / 8) / 64e9
    left = (
        some["compute_s"][0]
        + some["host_s"][0]
        - sum(some[f"hidden_{p}_s"][0] for p in ("tp", "ep", "cp", "pp_p2p", "dp"))
    )
    assert some["offload_s"][0] == pytest.approx(traffic - min(0.8 * traffic, left))


def test_more_layers_than_a_stage_is_all_and_the_key_implies_offload(capsys: pytest.CaptureFixture[str]) -> None:
    """offload_layers beyond a stage's layers offloads them all (two layers' worth stay: the same as
    offload=1); offload_layers alone turns offload on; shown back in the strategy."""
    job = make_job(model("mixtral-8x7b"), hardware("h100"), 64, 8, 256, 4096)
    every = evaluate(job, parse_strategy("tp=4,pp=2,dp=8,ep=8,zero=1,offload=1"))
    beyond = evaluate(job, parse_strategy("tp=4,pp=2,dp=8,ep=8,zero=1,offload_layers=40"))
    assert every["activations_gb"][0] == beyond["activations_gb"][0]
    assert int(parse_strategy("offload_layers=3")["offload"][0]) == 1
    args = [
        "plan",
        "--model",
        "mixtral-8x7b",
        "--hardware",
        "h100",
        "--devices",
        "64",
        "--global-batch",
        "256",
        "--seq-len",
        "4096",
        "--evaluate",
        "tp=4,pp=2,dp=8,ep=8,zero=1,cpu_offloading_num_layers=6",
        "--json",
    ]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["strategy"]["offload"] == 1 and out["strategy"]["offload_layers"] == 6
    assert main([*args[:-2], "tp=4,pp=2,dp=8,ep=8,offload_layers=-1"]) == 2
