"""Planner: a ZeRO-1/2 weight all-gather done tensor by tensor on the host (nanotron's), against
values computed by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.cli import main
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.rates import weight_tensors_per_layer
from stepscope.planner.record import job_from_record
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy

# a Llama-style block: gated MLP, no biases
TINY = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
}


def test_tensors_per_layer_are_counted_by_how_the_framework_registers_them() -> None:
    m = from_config_dict(TINY)
    # 2 norms + qkv, o + gate_up, down
    assert weight_tensors_per_layer(m, fused_projections=True) == 6
    # 2 norms + q, k, v, o + gate, up, down
    assert weight_tensors_per_layer(m, fused_projections=False) == 9
    moe = from_config_dict(TINY | {"num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 512})
    # 2 norms + q, k, v, o + 4 experts x (gate, up, down) + the router
    assert weight_tensors_per_layer(moe, fused_projections=False) == 2 + 4 + 4 * 3 + 1


def _job(**kw: object) -> Job:
    return make_job(from_config_dict(TINY), hardware("h100"), 16, 8, 64, 2048, **kw)


def test_the_gather_adds_host_time_per_tensor_and_rank_outside_the_overlap_window() -> None:
    """10 us per pair; dp = 4 (tp 2, pp 2): a stage holds 4 layers of 6 tensors and the embedding
    or the head (2 more): 26 tensors x 4 ranks x 10 us = 1.04 ms of host time, added to the step
    once: nothing hides under it and it does not widen the window the transfers hide in (every
    other part unchanged)."""
    s = parse_strategy("tp=2,pp=2,dp=4,zero=1,mb=1")
    base = evaluate(_job(), s)
    with_gather = evaluate(_job(zero_gather_copy_us=10), s)
    assert with_gather["host_s"][0] - base["host_s"][0] == pytest.approx((4 * 6 + 2) * 4 * 10e-6)
    assert with_gather["step_s"][0] - base["step_s"][0] == pytest.approx((4 * 6 + 2) * 4 * 10e-6)
    for key in ("compute_s", "dp_s", "tp_s", "bubble_s", "optimizer_s", "hidden_dp_s", "hidden_tp_s"):
        assert with_gather[key][0] == base[key][0]


def test_a_gather_longer_than_everything_else_is_named_the_bottleneck() -> None:
    """At 1 ms per (tensor, rank) the gather (26 x 4 x 1 ms = 104 ms) outlasts every other
    non-compute part of this small job: the bottleneck is the host."""
    from stepscope.planner.bottleneck import BOTTLENECKS

    r = evaluate(_job(zero_gather_copy_us=1000), parse_strategy("tp=2,pp=2,dp=4,zero=1,mb=1"))
    assert r["host_s"][0] == pytest.approx(26 * 4 * 1e-3)
    assert BOTTLENECKS[int(r["bottleneck"][0])] == "host"


@pytest.mark.parametrize(
    "strategy", ["tp=2,pp=2,dp=4,zero=0,mb=1", "tp=2,pp=2,dp=4,zero=3,mb=1", "tp=8,pp=2,dp=1,zero=1,mb=1"]
)
def test_no_gather_no_host_time(strategy: str) -> None:
    """ZeRO-0 gathers nothing, ZeRO-3/FSDP gathers flat per layer (its own term), one replica
    (dp 1) has nothing to gather."""
    s = parse_strategy(strategy)
    assert evaluate(_job(zero_gather_copy_us=10), s)["step_s"][0] == evaluate(_job(), s)["step_s"][0]


def test_nanotron_preset_sets_it_and_a_record_key_overrides_it() -> None:
    rec = {"model": "llama3-8b", "hardware": "h100", "devices": 16, "global_batch": 64, "seq_len": 2048}
    assert job_from_record(rec | {"framework": "nanotron"}).framework.zero.gather_copy_s == pytest.approx(10e-6)
    assert job_from_record(
        rec | {"framework": "nanotron", "zero_gather_copy_us": 25}
    ).framework.zero.gather_copy_s == pytest.approx(25e-6)
    assert job_from_record(rec).framework.zero.gather_copy_s == 0.0


def test_cli_flag_reaches_the_prediction_and_bad_values_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "64",
        "--global-batch",
        "128",
        "--seq-len",
        "2048",
        "--evaluate",
        "tp=1,pp=1,dp=64,zero=1,mb=2",
        "--json",
    ]
    assert main(args) == 0
    base = json.loads(capsys.readouterr().out)
    assert main([*args, "--set", "zero_gather_copy_us=10"]) == 0
    out = json.loads(capsys.readouterr().out)
    # Llama 3 8B: 32 layers x 6 tensors + 2 (embedding, head) on the one stage, 64 ranks
    assert out["step_time_s"] - base["step_time_s"] == pytest.approx((32 * 6 + 2) * 64 * 10e-6, rel=1e-6)
    assert out["settings"]["zero_gather_copy_us"] == pytest.approx(10)
    assert main([*args, "--set", "zero_gather_copy_us=-1"]) == 2
    err = capsys.readouterr().err
    assert "zero_gather_copy_us must be a finite number >= 0" in err and len(err.strip().splitlines()) == 1
    assert np.isfinite(out["mfu"])
