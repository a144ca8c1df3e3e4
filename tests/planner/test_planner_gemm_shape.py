"""Planner: GEMM efficiency by the whole shape of each GEMM (rates.gemm_rate, linear_shape), MoE
experts as one grouped GEMM, and each GEMM kernel's fixed time (Hardware.gemm_kernel_us), against
values computed by hand."""

from __future__ import annotations

import dataclasses

import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.planner.cost import evaluate
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware, model
from stepscope.planner.strategy import parse_strategy
from stepscope.planner.work import gemm_kernels_per_layer

from ..gemm_by_hand import H100_KERNEL_S, linear_shape


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("llama3-8b", 4.0),  # fused q/k/v, o, fused gate-and-up, down
        ("mixtral-8x7b", 5.0),  # q/k/v, o; router, grouped fc1 and fc2
        # 61 layers of MLA (q down, q up, kv down, kv up, o); 3 dense MLPs (2); 58 MoE layers: router,
        # grouped fc1, fc2 and the shared expert's 2
        ("deepseek-v3", (61 * 5 + 3 * 2 + 58 * 5) / 61),
        # 12 softmax-attention layers (2) and 36 linear-attention ones (in and out projections, 2);
        # every layer MoE with a shared expert (5)
        ("qwen3-next-80b-a3b", (12 * 2 + 36 * 2 + 48 * 5) / 48),
    ],
)
def test_gemm_kernels_per_layer(name: str, expected: float) -> None:
    assert gemm_kernels_per_layer(make_job(model(name), hardware("h100"), 8, 8, 8, 4096)) == pytest.approx(expected)


def test_separate_projections_launch_more_kernels() -> None:
    job = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 8, 4096, fused_projections=False)
    assert gemm_kernels_per_layer(job) == 4 + 3  # q, k, v, o; gate, up, down


TINY_MOE = {
    "hidden_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 512,
}


def test_experts_run_as_one_grouped_gemm_per_projection() -> None:
    """8 experts of 1024 x 512 (gated), top-2, over ep = 1 or 2 ranks, one sequence of 4096 tokens
    per micro-batch, GEMMs at a set efficiency (no kernel floor): each local expert gets 4096 x 2
    / 8 = 1024 tokens; ep = 2 halves the local experts (4) and doubles each one's tokens (all 8192
    tokens of the two ranks, 2048 per expert), so the grouped GEMMs' shapes change: fc1 (gate and
    up fused, 1024 in, 1024 out) and fc2 (512 in, 1024 out) as groups x tokens tall. The expert
    FLOPs per device (6 x 2 x 3 x 1024 x 512 per token and layer) are the same."""
    m = from_config_dict(TINY_MOE)
    job = make_job(m, hardware("h100"), 2, 8, 2, 4096, gemm_eff=0.5, attn_eff=0.3)
    one = evaluate(job, parse_strategy("dp=2,ep=1,mb=1"))
    two = evaluate(job, parse_strategy("dp=2,ep=2,mb=1"))
    flops = 6.0 * 2 * 3 * 1024 * 512 * 4 * 4096  # per device: one sequence each

    def expert_s(groups: int, tokens: int) -> float:
        return flops * (
            2 / 3 / linear_shape(tokens, 1024, 1024, groups) + 1 / 3 / linear_shape(tokens, 512, 1024, groups)
        )

    expected = (expert_s(4, 2048) - expert_s(8, 1024)) / 0.5 / 989.4e12
    # ep = 2 also moves the tokens (its own terms, not compute) and permutes them (memory-bound,
    # off with a set efficiency): compute differs by the grouped GEMMs alone
    assert two["compute_s"][0] - one["compute_s"][0] == pytest.approx(expected, rel=1e-6)


def test_kernel_floor_counts_every_gemm_of_every_micro_batch() -> None:
    """Llama 3 8B on one H100, 4 sequences of 1024 in micro-batches of 1: per micro-batch 32
    layers x 4 forward GEMM kernels x 3 (with the backward's) + the output layer's 3 = 387
    kernels, 4 micro-batches, 5.3 us each; full recompute replays the layers' forward kernels
    (32 x 4 more per micro-batch). A device with no measured floor charges none."""
    job = make_job(model("llama3-8b"), hardware("h100"), 1, 8, 4, 1024)
    with_floor = evaluate(job, parse_strategy("dp=1,mb=1"))
    bare = dataclasses.replace(job, hw=dataclasses.replace(job.hw, gemm_kernel_us=None))
    without = evaluate(bare, parse_strategy("dp=1,mb=1"))
    assert with_floor["compute_s"][0] - without["compute_s"][0] == pytest.approx(4 * 387 * H100_KERNEL_S)
    full = evaluate(job, parse_strategy("dp=1,mb=1,recompute=full"))
    full_bare = evaluate(bare, parse_strategy("dp=1,mb=1,recompute=full"))
    assert full["compute_s"][0] - full_bare["compute_s"][0] == pytest.approx(4 * (387 + 32 * 4) * H100_KERNEL_S)
