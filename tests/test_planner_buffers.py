"""Communication buffers under ZeRO-3 / FSDP: two gathered layers' weights and one layer's whole
gradients, counted by hand on a tiny model."""

from __future__ import annotations

import pytest

from stepscope.analysis.model_flops import from_config_dict
from stepscope.planner.cost import Job, evaluate
from stepscope.planner.search import hardware, parse_strategy

TINY = {"hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16, "intermediate_size": 4096,
        "vocab_size": 32000, "hidden_act": "silu"}
LAYER = 4 * 1024 * 1024 + 3 * 1024 * 4096  # q, k, v, o (MHA) + SwiGLU's three matrices


def job_from_record(**kw: object) -> Job:
    return Job(from_config_dict(TINY), hardware("h100"), 8, 8, 16, 2048, **kw)  # type: ignore[arg-type]


def _buffers_gb(job: Job, strategy: str) -> float:
    return float(evaluate(job, parse_strategy(strategy))["buffers_gb"][0])


def test_zero1_holds_only_the_communicators_buffers() -> None:
    assert _buffers_gb(job_from_record(), "tp=2,dp=4,zero=1") == pytest.approx(1.0)


def test_fsdp_holds_two_gathered_layers_and_one_layers_gradients() -> None:
    # tp=2: a layer's parameters on this device are LAYER / 2; bf16 weights of two layers (2 x 2 B),
    # the layer's bf16 gradients (2 B) and their fp32 copy for the reduce-scatter (4 B): 10 B each
    assert _buffers_gb(job_from_record(), "tp=2,dp=4,zero=3") == pytest.approx(1.0 + 10 * LAYER / 2 / 1e9)
    # reduced in bf16: no fp32 copy, 6 B
    assert _buffers_gb(job_from_record(grad_bytes=2), "tp=2,dp=4,zero=3") == pytest.approx(1.0 + 6 * LAYER / 2 / 1e9)
    # weights kept gathered are counted under weights: only the gradient part (6 B) remains
    assert _buffers_gb(job_from_record(), "tp=2,dp=4,zero=3,keep_params=1") == pytest.approx(1.0 + 6 * LAYER / 2 / 1e9)


def test_the_total_includes_them() -> None:
    r = evaluate(job_from_record(), parse_strategy("tp=2,dp=4,zero=3"))
    parts = sum(float(r[k][0]) for k in ("weights_gb", "grads_gb", "optimizer_gb", "activations_gb", "buffers_gb", "reserve_gb"))
    assert float(r["total_gb"][0]) == pytest.approx(parts)
