"""Optimizer states per parameter (``--optimizer-bytes``): memory and the optimizer step by hand."""

from __future__ import annotations

import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.cli import main
from stepscope.planner.cost import evaluate
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy

TINY = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
}
H = 1024


def test_states_and_step_by_hand() -> None:
    """tp 2, pp 2, ZeRO-1 over dp 2: the end stage holds 4 layers / 2 + the embedding / 2
    (test_planner's p_dev). Moments in bf16: 4 + 2 + 2 = 8 B per parameter, sharded over 2; the
    optimizer step moves the states and a 4-byte gradient: 12 B against the default's 16."""
    job = make_job(from_config_dict(TINY), hardware("h100"), 8, 8, 16, 2048)
    s = parse_strategy("tp=2,pp=2,dp=2,zero=1,mb=2")
    p_dev = 4 * (4 * H * H + 3 * H * 4096) / 2 + 32000 * H / 2
    default, bf16_moments = evaluate(job, s), evaluate(job.replaced(optimizer_bytes=8.0), s)
    assert default["optimizer_gb"][0] == pytest.approx(12 * p_dev / 2 / 1e9)
    assert bf16_moments["optimizer_gb"][0] == pytest.approx(8 * p_dev / 2 / 1e9)
    assert bf16_moments["optimizer_s"][0] == pytest.approx(default["optimizer_s"][0] * 12 / 16)
    assert (
        bf16_moments["weights_gb"][0] == default["weights_gb"][0]
        and bf16_moments["grads_gb"][0] == default["grads_gb"][0]
    )


def test_the_flag_is_checked_and_said(capsys: pytest.CaptureFixture[str]) -> None:
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
        "2048",
        "--evaluate",
        "tp=1,dp=8,zero=1,mb=2",
    ]
    assert main([*args, "--set", "optimizer_bytes=8"]) == 0
    assert "optimizer states 8 B per parameter" in capsys.readouterr().out
    for bad in ("0", "nan", "100"):
        assert main([*args, "--set", f"optimizer_bytes={bad}"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "optimizer_bytes must be a number > 0 and <= 64" in err[0]
