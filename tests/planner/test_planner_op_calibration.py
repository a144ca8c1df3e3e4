"""Op classes the priors know least: linear-attention kernels at their own prior rate, and a
calibration that recovers a planted per-class factor from runs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from stepscope.catalog.model_flops import ModelShape
from stepscope.planner import calibrate as cal
from stepscope.planner.calibrate_ops import op_classes, refine
from stepscope.planner.cost import evaluate
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy
from stepscope.planner.vocab import LINEAR_ATTN_EFF

# 4 layers, 3 of them gated linear attention with 4 heads of 64 x 64
HYBRID = ModelShape(
    d_model=256, n_layers=4, n_heads=4, n_kv_heads=4, head_dim=64, d_ff=1024, vocab=1000, gated_mlp=True,
    linear_layers=3, linear_attn=(4, 64, 4, 64),
)  # fmt: skip
SEQ, BATCH = 2048, 16


def _job() -> cal.Job:
    return make_job(HYBRID, hardware("h100"), 1, 8, BATCH, SEQ)


def test_linear_attention_runs_at_its_own_prior_rate() -> None:
    """3 layers x 4 heads x 6 x (2 x 64 x 64 + 64 x (64 + 64)) = 1,179,648 FLOPs a token; x 16 x
    2,048 tokens on one device at LINEAR_ATTN_EFF x the bf16 peak, no recompute: halving the
    kernels' rate adds exactly that time once more."""
    job, s = _job(), parse_strategy("dp=1,mb=1")
    flops = 3 * 4 * 6 * (2 * 64 * 64 + 64 * (64 + 64)) * BATCH * SEQ
    assert HYBRID.linear_attention_flops_per_token() * BATCH * SEQ == flops
    at_prior = flops / (LINEAR_ATTN_EFF * job.hw.peak_flops("bf16"))
    base = evaluate(job, s)["compute_s"][0]
    slower = evaluate(job.calibrated(linear_attn_scale=0.5), s)["compute_s"][0]
    assert float(slower - base) == pytest.approx(at_prior, rel=1e-9)


def _runs(truth: dict[str, float]) -> list[cal.Run]:
    """Runs whose 'measured' step is the model's own at the planted factors (a recovery test: the
    expected factor is the one planted, not the fit's output)."""
    job = _job()
    out = []
    for batch, text in ((16, "dp=1,mb=1"), (16, "dp=1,mb=2,recompute=full"), (32, "dp=1,mb=4"), (8, "dp=1,mb=8")):
        j = dataclasses.replace(job, batch=dataclasses.replace(job.batch, global_batch=batch))
        s = {k: int(v[0]) for k, v in parse_strategy(text).items()}
        arrays = {k: np.array([v]) for k, v in s.items()}
        measured = float(evaluate(j.calibrated(**truth), arrays)["step_s"][0])
        out.append(cal.Run(j, s, measured, lambda jj, ss: evaluate(jj, ss, keys=("step_s",))["step_s"], "g"))
    return out


def test_the_fit_recovers_a_planted_linear_attention_factor() -> None:
    runs = _runs({"linear_attn_scale": 0.25})
    assert op_classes(runs) == ["linear_attn_scale"]
    f = refine(runs, cal.Fit(1.0, 1.0, 1.0, 1.0))
    assert f.linear_attn_scale == pytest.approx(0.25)
    assert all(abs(cal.predict_one(r, f) / r.measured - 1) < 1e-6 for r in runs)


def test_without_the_op_class_nothing_changes() -> None:
    dense = dataclasses.replace(HYBRID, linear_layers=0, linear_attn=None)
    runs = [dataclasses.replace(r, job=dataclasses.replace(r.job, model=dense)) for r in _runs({})]
    f = cal.Fit(1.1, 1.0, 1.0, 1.0)
    assert op_classes(runs) == [] and refine(runs, f) is f


def test_runs_of_several_models_fit_no_op_class() -> None:
    runs = _runs({})
    other = dataclasses.replace(HYBRID, n_layers=8, linear_layers=6)
    mixed = [*runs[:2], *(dataclasses.replace(r, job=dataclasses.replace(r.job, model=other)) for r in runs[2:])]
    assert op_classes(runs) == ["linear_attn_scale"] and op_classes(mixed) == []
