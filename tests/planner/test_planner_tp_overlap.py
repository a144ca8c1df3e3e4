"""Planner: TP communication hides no longer than the GEMM it is fused with (planner/tp_overlap.py),
against values computed by hand on a small model."""

from __future__ import annotations

import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.errors import ConfigError
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy

from ..gemm_by_hand import linear_shape

TINY = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
}


def _by_hand() -> tuple[float, float, float, float, float]:
    """One TP collective and the four GEMM groups' forward times, tp = 4, one sequence of 2048
    tokens per micro-batch, GEMMs at 50% of the H100's 989.4 TFLOP/s times their shape factor."""
    m_tok, h, f, tp = 2048, 1024, 4096, 4
    rate = 0.5 * 989.4e12
    # an all-gather or reduce-scatter of s*b*h*2 B over 4 ranks in a node: 3/4 of it at the H100
    # node's measured 249.8 GB/s, plus 3 steps of 10 us
    c = 3 / 4 * (m_tok * h * 2) / 249.8e9 + 3 * 10e-6
    # each linear at its shape efficiency (gemm_by_hand.linear_shape): inputs x outputs per device
    qkv = 2 * m_tok * h * (3 * h) / tp / linear_shape(m_tok, h, 3 * h / tp) / rate  # fused q, k, v (MHA): 1024 x 768
    o = 2 * m_tok * h * h / tp / linear_shape(m_tok, h / tp, h) / rate  # 256 x 1024
    up = 2 * m_tok * h * 2 * f / tp / linear_shape(m_tok, h, 2 * f / tp) / rate  # gate + up fused: 1024 x 2048
    down = 2 * m_tok * f * h / tp / linear_shape(m_tok, f / tp, h) / rate  # 1024 x 1024
    return c, qkv, o, up, down


def job_from_record() -> Job:
    return make_job(from_config_dict(TINY), hardware("h100"), 4, 8, 4, 2048, gemm_eff=0.5)


def test_full_overlap_is_capped_by_each_fused_gemm() -> None:
    """Here the output projection (5 us) is far shorter than a collective (43 us), so its two
    collectives (the forward reduce-scatter under it, the backward all-gather under its
    input-gradient GEMM only: the weight gradient takes the gathered tensor transposed, which
    PyTorch's fusion pass does not match) hide only (tp-1)/tp of it each; 8 layers, 4
    micro-batches (4 sequences, mb 1)."""
    c, qkv, o, up, down = _by_hand()
    s = 3 / 4
    attn = min(s * c, s * qkv) + min(s * c, s * o) + min(s * c, s * o) + min(s * c, s * qkv)
    mlp = min(s * c, s * up) + min(s * c, s * down) + min(s * c, s * down) + min(s * c, s * up)
    assert s * o < s * c  # the capped regime
    off = evaluate(job_from_record(), parse_strategy("tp=4,mb=1"))
    on = evaluate(job_from_record(), parse_strategy("tp=4,mb=1,tp_overlap=full"))
    assert off["tp_s"][0] == pytest.approx(8 * c * 8 * 4)  # 8 collectives, 8 layers, 4 micro-batches
    hidden = (attn + mlp) * 8 * 4
    assert hidden < off["compute_s"][0]
    assert off["tp_s"][0] - on["tp_s"][0] == pytest.approx(hidden)
    assert hidden < 3 / 4 * off["tp_s"][0]  # less than the uncapped (tp-1)/tp


def test_megatron_backward_overlap_is_capped_by_the_weight_gradient_gemms() -> None:
    """bwd: the two input-gradient reduce-scatters under the q/k/v and up weight-gradient GEMMs."""
    c, qkv, _, up, _ = _by_hand()
    off = evaluate(job_from_record(), parse_strategy("tp=4,mb=1"))
    bwd = evaluate(job_from_record(), parse_strategy("tp=4,mb=1,tp_overlap=bwd"))
    assert off["tp_s"][0] - bwd["tp_s"][0] == pytest.approx((min(c, qkv) + min(c, up)) * 8 * 4)


def test_megatron_backward_overlap_without_sequence_parallelism_hides_whole_all_reduces() -> None:
    """sp=0: a layer's TP traffic is 4 all-reduces (2c each) instead of 8 collectives; Megatron's
    asynchronous input-gradient all-reduce of the q/k/v and up projections runs under their
    weight-gradient GEMMs. With h = 8192 those GEMMs outlast a whole all-reduce, so the two hide
    4c per layer, twice what the reduce-scatters hide with sequence parallelism."""
    m_tok, h, f, tp = 2048, 8192, 16384, 4
    rate = 0.5 * 989.4e12
    c = 3 / 4 * (m_tok * h * 2) / 249.8e9 + 3 * 10e-6
    qkv = 2 * m_tok * h * (3 * h) / tp / linear_shape(m_tok, h, 3 * h / tp) / rate
    up = 2 * m_tok * h * 2 * f / tp / linear_shape(m_tok, h, 2 * f / tp) / rate
    assert qkv > 2 * c and up > 2 * c  # the uncapped regime
    big = {**TINY, "hidden_size": h, "num_attention_heads": 64, "intermediate_size": f}
    job = make_job(from_config_dict(big), hardware("h100"), 4, 8, 4, 2048, gemm_eff=0.5)
    off = evaluate(job, parse_strategy("tp=4,mb=1,sp=0"))
    bwd = evaluate(job, parse_strategy("tp=4,mb=1,sp=0,tp_overlap=bwd"))
    with_sp = evaluate(job, parse_strategy("tp=4,mb=1,tp_overlap=bwd"))
    assert off["tp_s"][0] == pytest.approx(8 * c * 8 * 4)  # 4 all-reduces = 8c, 8 layers, 4 micro-batches
    assert off["tp_s"][0] - bwd["tp_s"][0] == pytest.approx((2 * c + 2 * c) * 8 * 4)  # half the traffic
    assert off["tp_s"][0] - with_sp["tp_s"][0] == pytest.approx((c + c) * 8 * 4)
    with pytest.raises(ConfigError, match="needs sequence parallelism"):
        parse_strategy("tp=4,sp=0,tp_overlap=bwd+shard")
