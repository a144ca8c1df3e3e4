"""fp8 weight casts once per step (Transformer Engine's cache under Megatron-core) or every
micro-batch (torchao): the difference by hand."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.cli import main
from stepscope.planner.cost import evaluate
from stepscope.planner.record import job_from_record
from stepscope.planner.strategy import parse_strategy


def test_cached_weights_are_cast_once_per_step_not_per_micro_batch() -> None:
    """Llama-3-8B on 8 H100, dp 8, mb 1, 64 sequences: 8 micro-batches per replica. Each cast of
    the linear weights moves 8 B per element (tensorwise: read bf16, write fp8 row- and
    column-major, the amax scan): 32 layers x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336)
    = 6,979,321,856 elements at 3.35 TB/s. Recasting in each of the 8 micro-batches costs 7 casts
    more than casting once."""
    rec = {
        "model": "llama3-8b",
        "hardware": "h100",
        "devices": 8,
        "global_batch": 64,
        "seq_len": 4096,
        "precision": "fp8",
    }
    s = parse_strategy("tp=1,pp=1,dp=8,mb=1,zero=1")
    cached = job_from_record(rec)
    recast = job_from_record({**rec, "fp8_weight_cache": False})
    assert cached.framework.fp8.weight_cache and not recast.framework.fp8.weight_cache
    one_cast_s = 8 * 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336) / 3.35e12
    a, b = evaluate(cached, s), evaluate(recast, s)
    assert float(b["compute_s"][0] - a["compute_s"][0]) == pytest.approx(7 * one_cast_s, rel=1e-9)
    # bf16 has no casts: the flag changes nothing
    bf = cached.replaced(precision="bf16")
    assert np.array_equal(evaluate(bf, s)["step_s"], evaluate(bf.replaced(fp8_weight_cache=False), s)["step_s"])


def test_the_cli_flag_recasts(capsys: pytest.CaptureFixture[str]) -> None:
    base = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--global-batch",
        "64",
        "--seq-len",
        "4096",
        "--precision",
        "fp8",
        "--evaluate",
        "tp=1,pp=1,dp=8,mb=1,zero=1",
        "--json",
    ]
    import json

    assert main(base) == 0
    cached = json.loads(capsys.readouterr().out)["step_time_s"]
    assert main([*base, "--set", "fp8_weight_cache=false"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time_s"] > cached
