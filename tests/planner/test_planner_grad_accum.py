"""A separate gradient-accumulation kernel (the grad_accum_bytes setting): nanotron's fp32 accumulator adds
every bf16 gradient into its fp32 buffer after each micro-batch's backward, 2 + 4 + 4 B per
parameter of the stage, memory-bound, in the stage's pace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stepscope.catalog.model_flops import ModelShape
from stepscope.cli import main
from stepscope.planner.cost import evaluate
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy

# 6 layers of 4 h^2 + 2 h 256 = 49,152 weights (h = 64), a 100-word vocabulary: 6,400
M = ModelShape(d_model=64, n_layers=6, n_heads=4, n_kv_heads=4, head_dim=16, d_ff=256, vocab=100, gated_mlp=False)
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


def test_the_kernel_adds_its_bytes_per_micro_batch() -> None:
    """One device, mb = 1, 4 sequences: 4 micro-batches over 6 x 49,152 + 6,400 = 301,312
    parameters; 10 B each: 10 x 301,312 x 4 B more through HBM per step, and nothing else (no
    transfer to hide under the longer compute)."""
    hw = hardware("h100")
    job = make_job(M, hw, 1, 1, 4, 1024)
    s = parse_strategy("dp=1,mb=1")
    base, acc = evaluate(job, s), evaluate(job.replaced(grad_accum_bytes=10.0), s)
    extra = 10.0 * 301_312 * 4 / hw.hbm_bytes_per_s
    assert float(acc["compute_s"][0] - base["compute_s"][0]) == pytest.approx(extra, rel=1e-9)
    assert float(acc["step_s"][0] - base["step_s"][0]) == pytest.approx(extra, rel=1e-9)
    assert float(acc["total_gb"][0]) == float(base["total_gb"][0])


def test_preset_flag_and_bad_value(run_json: Callable[..., Any], capsys: pytest.CaptureFixture[str]) -> None:
    plain = run_json(*JOB, "--evaluate", "dp=8,mb=1,zero=1", "--json")
    assert "grad_accum_bytes" not in plain["settings"]
    nanotron = run_json(*JOB, "--framework", "nanotron", "--evaluate", "dp=8,mb=1,zero=1", "--json")
    assert nanotron["settings"]["grad_accum_bytes"] == 10
    given = run_json(
        *JOB, "--framework", "nanotron", "--set", "grad_accum_bytes=0", "--evaluate", "dp=8,mb=1,zero=1", "--json"
    )
    assert "grad_accum_bytes" not in given["settings"]  # the flag wins over the preset
    assert main([*JOB, "--evaluate", "dp=8", "--set", "grad_accum_bytes=-1"]) == 2
    assert "grad_accum_bytes must be a finite number >= 0" in capsys.readouterr().err
