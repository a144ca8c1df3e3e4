"""Sequence parallelism's backward re-gathers (the sp_regather setting, planner/tp_overlap.py): Megatron and
nanotron save the column-parallel layers' input shards and all-gather them again in backward for
the weight gradients, 2 per dense layer and micro-batch, under the input-gradient GEMM when the
framework overlaps TP communication, exposed when it does not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stepscope.catalog.model_flops import ModelShape
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy

JOB = [
    "plan",
    "--model",
    "llama3-8b",
    "--hardware",
    "h100",
    "--devices",
    "8",
    "--global-batch",
    "32",
    "--seq-len",
    "4096",
]


HW = hardware("h100")
SMALL = ModelShape(
    d_model=1024, n_layers=4, n_heads=8, n_kv_heads=8, head_dim=128, d_ff=4096, vocab=1000, gated_mlp=False
)


def _pair(**job_kw: Any) -> tuple[Job, dict[str, Any], dict[str, Any]]:
    """tp = 2 on 2 devices, 2 micro-batches of one 1024-token sequence, no overlap mechanism:
    the job, its result without the re-gathers and with them."""
    job = make_job(SMALL, HW, 2, 8, 2, 1024, **job_kw)
    s = parse_strategy("tp=2,mb=1,tp_overlap=none")
    return job, evaluate(job, s), evaluate(job.replaced(sp_regather=True), s)


def _all_gather_s(nbytes: float, bw_bytes_per_s: float) -> float:
    """One ring all-gather over 2 ranks in a node: half the buffer moves, one 10 us step."""
    return 0.5 * nbytes / bw_bytes_per_s + 10e-6


def test_exposed_without_an_overlap_mechanism() -> None:
    """tp = 2 on 2 devices, 4 layers, 2 micro-batches of one 1024-token sequence, h = 1024: each
    re-gather moves the 1024 x 1024 x 2 B input; 2 per layer -> 16 all-gathers more per step,
    nothing hidden, nothing else changed."""
    job, base, more = _pair()
    c = _all_gather_s(1024 * 1024 * 2, HW.intra_node_busbw_gbps["all_gather"] * 1e9)
    assert float(more["tp_s"][0] - base["tp_s"][0]) == pytest.approx(16 * c, rel=1e-9)
    assert float(more["step_s"][0] - base["step_s"][0]) == pytest.approx(16 * c, rel=1e-9)
    assert float(more["total_gb"][0]) == float(
        base["total_gb"][0]
    )  # a time term: the memory side is sp_saves_gathered's
    # without tensor parallelism there is nothing to gather
    one = parse_strategy("tp=1,mb=1")
    assert float(evaluate(job.replaced(devices=1).replaced(sp_regather=True), one)["step_s"][0]) == float(
        evaluate(job.replaced(devices=1), one)["step_s"][0]
    )


def test_hidden_under_the_input_gradient_gemm() -> None:
    """Megatron's mechanism (bwd) with h = 8192, tp = 2: q/k/v's forward GEMM, 2 x 4096 x 8192 x
    24576 / 2 FLOP, runs about 1 ms at any plausible H100 rate, the re-gather of 4096 x 8192 x 2 B
    about 0.15 ms: all 16 hide, the step does not change, the hidden TP time grows by 16 of them."""
    hw = hardware("h100")
    m = ModelShape(
        d_model=8192, n_layers=4, n_heads=64, n_kv_heads=64, head_dim=128, d_ff=28672, vocab=1000, gated_mlp=True
    )
    job = make_job(m, hw, 2, 8, 2, 4096)
    s = parse_strategy("tp=2,mb=1,tp_overlap=bwd")
    base, more = evaluate(job, s), evaluate(job.replaced(sp_regather=True), s)
    c = _all_gather_s(4096 * 8192 * 2, hw.intra_node_busbw_gbps["all_gather"] * 1e9)
    assert c < 0.3e-3
    assert float(more["step_s"][0]) == pytest.approx(float(base["step_s"][0]), rel=1e-12)
    assert float(more["hidden_tp_s"][0] - base["hidden_tp_s"][0]) == pytest.approx(16 * c, rel=1e-9)


def test_fp8_gathers_the_saved_fp8_shards() -> None:
    """Tensorwise fp8 that saves its cast inputs (Transformer Engine) re-gathers 1 B per element."""
    _, base, more = _pair(precision="fp8", fp8_saved_inputs="fp8")
    c = _all_gather_s(1024 * 1024 * 1, HW.intra_node_busbw_gbps["all_gather"] * 1e9)
    assert float(more["tp_s"][0] - base["tp_s"][0]) == pytest.approx(16 * c, rel=1e-9)


def test_presets(run_json: Callable[..., Any]) -> None:
    for fw, on in (("megatron", True), ("nanotron", True), ("torchtitan", False), ("maxtext", False)):
        r = run_json(*JOB, "--framework", fw, "--evaluate", "tp=2,dp=4,mb=1", "--json")
        assert r["settings"].get("sp_regather", False) is on, fw
    assert (
        run_json(*JOB, "--set", "sp_regather=true", "--evaluate", "tp=2,dp=4,mb=1", "--json")["settings"]["sp_regather"]
        is True
    )


def test_kept_inputs_and_regathers_exclude_each_other(
    run_json: Callable[..., Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from stepscope.cli import main

    assert main([*JOB, "--set", "sp_saves_gathered=true", "--set", "sp_regather=true", "--evaluate", "tp=2,dp=4"]) == 2
    assert "not both" in capsys.readouterr().err
    # asked for, kept inputs win over the megatron preset's re-gathers
    r = run_json(
        *JOB, "--framework", "megatron", "--set", "sp_saves_gathered=true", "--evaluate", "tp=2,dp=4,mb=1", "--json"
    )
    assert r["settings"].get("sp_saves_gathered") is True and "sp_regather" not in r["settings"]


def test_a_pipeline_stage_gathers_for_its_own_layers() -> None:
    """pp = 2 over 4 devices (tp = 2): each stage runs 2 of the 4 layers, 2 micro-batches, so it
    pays 2 layers x 2 gathers x 2 micro-batches = 8 re-gathers, half of the unpipelined 16."""
    job = make_job(SMALL, HW, 4, 8, 2, 1024)
    s = parse_strategy("tp=2,pp=2,mb=1,tp_overlap=none")
    base, more = evaluate(job, s), evaluate(job.replaced(sp_regather=True), s)
    c = _all_gather_s(1024 * 1024 * 2, HW.intra_node_busbw_gbps["all_gather"] * 1e9)
    assert float(more["tp_s"][0] - base["tp_s"][0]) == pytest.approx(8 * c, rel=1e-9)
