"""Hidden (residual-branch) dropout keeps a 1-byte mask per h-wide element after attention and
after the MLP (Korthikanti et al. 2022, two of the 34 sbh bytes): 2 B per token and h per layer."""

from __future__ import annotations

import pytest

from stepscope.catalog.model_flops import ModelShape
from stepscope.planner.cost import evaluate
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy

M = ModelShape(d_model=64, n_layers=6, n_heads=4, n_kv_heads=4, head_dim=16, d_ff=256, vocab=100, gated_mlp=False)
S, H, L = 1024, 64, 6


def _extra_gb(strategy: str) -> float:
    job = make_job(M, hardware("h100"), 4, 4, 16, S)
    s = parse_strategy(strategy)
    off, on = (float(evaluate(job.replaced(hidden_dropout=x), s)["activations_gb"][0]) for x in (False, True))
    return on - off


@pytest.mark.parametrize(
    ("strategy", "extra_bytes"),
    [
        ("dp=4,mb=1", 2 * S * 1 * H * L),  # every layer's two masks, one micro-batch, no TP
        ("dp=4,mb=2", 2 * S * 2 * H * L),
        ("tp=2,dp=2,mb=1", 2 * S * H * L / 2),  # sequence parallelism shards them over TP
        ("tp=2,dp=2,mb=1,sp=0", 2 * S * H * L),  # without it they are whole on every TP rank
        ("dp=4,mb=1,recompute=full", 2 * S * H),  # only the layer being recomputed holds its masks
    ],
)
def test_masks_by_hand(strategy: str, extra_bytes: float) -> None:
    assert _extra_gb(strategy) == pytest.approx(extra_bytes / 1e9)


def test_step_time_unchanged() -> None:
    job = make_job(M, hardware("h100"), 4, 4, 16, S)
    s = parse_strategy("dp=4,mb=1")
    assert evaluate(job, s)["step_s"][0] == evaluate(job.replaced(hidden_dropout=True), s)["step_s"][0]
