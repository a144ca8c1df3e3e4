"""fp8 GEMMs that gain nothing: the output layer (kept in bf16 by torchtitan's float8 configs and
outside Megatron's Transformer Engine layers) and, with the fp8_gain_thresholds setting, the linears whose
per-device shape fails torchao's H100 thresholds (rates.fp8_gains)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from stepscope.catalog.model_flops import ModelShape
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.rates import fp8_gains
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy
from stepscope.planner.work import gemm_seconds_at_peak


@pytest.mark.parametrize(
    ("recipe", "in_dim", "out_dim", "gains"),
    [
        ("rowwise", 4096, 128, False),  # Llama 3 8B's wk at TP 8: 128 outputs <= 1024
        ("rowwise", 8192, 3584, True),  # Llama 3 70B's w1 at TP 8
        ("rowwise", 1792, 4096, False),  # Llama 3 8B's w2 at TP 8: 1792 inputs <= 2048
        ("rowwise", 4096, 1792, False),  # 8B's w1 at TP 8: inputs <= 4096 and outputs <= 2048
        ("rowwise", 4097, 1792, True),
        ("tensorwise", 512, 4096, False),  # 8B's wo at TP 8: outputs <= 4096 and inputs <= 1024
        ("tensorwise", 4096, 128, True),
        ("tensorwise", 1025, 4096, True),
    ],
)
def test_torchao_thresholds(recipe: str, in_dim: int, out_dim: int, gains: bool) -> None:
    assert bool(fp8_gains(recipe, in_dim, out_dim)) is gains


# h = 2048, 16 MHA heads of 128, a gated MLP of 4096, vocabulary 1000, projections fused. Under
# TP 1, rowwise: qkv (2048 in, 6144 out), o (2048, 2048) and gate-up (2048, 8192) have <= 2048
# inputs, down (4096, 2048) <= 4096 inputs with <= 2048 outputs: all fail. Tensorwise fails only
# linears with <= 1024 inputs: none
M = ModelShape(d_model=2048, n_layers=2, n_heads=16, n_kv_heads=16, head_dim=128, d_ff=4096, vocab=1000, gated_mlp=True)


def _job(recipe: str, thresholds: bool) -> Job:
    return make_job(
        M, hardware("h100"), 1, 1, 4, 1024, precision="fp8", fp8_recipe=recipe, fp8_gain_thresholds=thresholds
    )


def test_bf16_part_of_the_gemm_time() -> None:
    tp, one = np.array([1.0]), np.array([1.0])
    m_tok = np.array([1024.0])
    total, logits, plain = gemm_seconds_at_peak(_job("rowwise", False), 1e12, 4096.0, m_tok, tp, one, one)
    assert plain[0] == pytest.approx(logits[0])  # without thresholds only the output layer
    _, _, rowwise = gemm_seconds_at_peak(_job("rowwise", True), 1e12, 4096.0, m_tok, tp, one, one)
    assert rowwise[0] == pytest.approx(total[0])  # every linear fails rowwise's thresholds
    _, _, tensorwise = gemm_seconds_at_peak(_job("tensorwise", True), 1e12, 4096.0, m_tok, tp, one, one)
    assert tensorwise[0] == pytest.approx(logits[0])  # every linear passes tensorwise's


def test_no_gain_makes_fp8_slower_than_bf16() -> None:
    """Linears that gain nothing still pay their casts: rowwise fp8 with thresholds is slower than
    bf16 on this model (every linear fails), and slower than rowwise fp8 without them."""
    s = parse_strategy("dp=1,mb=1")
    bf16 = float(evaluate(_job("rowwise", True).replaced(precision="bf16"), s)["compute_s"][0])
    with_thresholds = float(evaluate(_job("rowwise", True), s)["compute_s"][0])
    without = float(evaluate(_job("rowwise", False), s)["compute_s"][0])
    assert with_thresholds > bf16 and with_thresholds > without


def test_flag_and_preset(run_json: Callable[..., Any]) -> None:
    args = [
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
        "8192",
        "--precision",
        "fp8",
        "--set",
        "fp8_recipe=rowwise",
        "--evaluate",
        "tp=8,mb=2,recompute=full",
        "--json",
    ]
    plain = run_json(*args)
    flagged = run_json(*args, "--set", "fp8_gain_thresholds=true")
    preset = run_json(*args, "--framework", "torchtitan")
    assert "fp8_gain_thresholds" not in plain["settings"] and flagged["settings"]["fp8_gain_thresholds"] is True
    assert preset["settings"]["fp8_gain_thresholds"] is True
    # every Llama 3 8B linear at TP 8 fails rowwise's thresholds: slower than without them
    assert flagged["step_time_s"] > plain["step_time_s"]


def test_tp_overlap_gemms_take_the_same_rates() -> None:
    """The GEMMs TP collectives hide under run at the same rates: with rowwise thresholds every
    linear of this model stays at the bf16 time; with tensorwise every one takes the factor."""
    from stepscope.planner.work import tp_gemm_seconds_at_peak

    tp, m_tok = np.array([1.0]), np.array([1024.0])
    bf16 = tp_gemm_seconds_at_peak(_job("rowwise", True), m_tok, tp)
    rowwise = tp_gemm_seconds_at_peak(_job("rowwise", True), m_tok, tp, 0.6)
    tensorwise = tp_gemm_seconds_at_peak(_job("tensorwise", True), m_tok, tp, 0.6)
    unfiltered = tp_gemm_seconds_at_peak(_job("rowwise", False), m_tok, tp, 0.6)
    for b, r, t, u in zip(bf16, rowwise, tensorwise, unfiltered, strict=True):
        assert r[0] == pytest.approx(b[0]) and t[0] == pytest.approx(0.6 * b[0]) and u[0] == pytest.approx(0.6 * b[0])
