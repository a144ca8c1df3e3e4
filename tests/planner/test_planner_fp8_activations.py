"""fp8 linear layers under Transformer Engine keep their quantized inputs (1 B per element) for the
weight gradient; torchao keeps the bf16 inputs. The activation memory difference, by hand, for a
dense and an MoE block (rates.stored_per_token)."""

from __future__ import annotations

import pytest

from stepscope.catalog.model_flops import ModelShape, from_config_dict
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


def _act_gb(cfg: dict, saved: str, precision: str = "fp8", policy: str = "none") -> float:
    job = make_job(from_config_dict(cfg), hardware("h100"), 8, 8, 8, 2048, precision=precision, fp8_saved_inputs=saved)
    return float(evaluate(job, parse_strategy(f"dp=8,mb=1,recompute={policy}"))["activations_gb"][0])


@pytest.mark.parametrize("policy", ["none", "selective"])
def test_dense_block(policy: str) -> None:
    """Per token and layer, fp8 instead of bf16 (1 B less each): the first norm's output (h = 1024),
    the second's (1024) and the down projection's input (the gated product, f = 4096); the output
    projection's fp8 copy of the attention output (q = 1024) is 1 B more: 5120 B. 8 layers x 2048
    tokens: 83,886,080 B."""
    assert (_act_gb(TINY, "bf16", policy=policy) - _act_gb(TINY, "fp8", policy=policy)) * 1e9 == pytest.approx(
        8 * 2048 * 5120
    )


def test_moe_block() -> None:
    """4 experts, 2 per token, every layer MoE: the router keeps the second norm's output in bf16;
    each routed copy (1024) and its expert's down-projection input (4096) are fp8: 2 x 5120, plus
    the first norm's output 1024, less the attention output's fp8 copy 1024: 10,240 B per token."""
    moe = {**TINY, "num_local_experts": 4, "num_experts_per_tok": 2}
    assert (_act_gb(moe, "bf16") - _act_gb(moe, "fp8")) * 1e9 == pytest.approx(8 * 2048 * 10240)


def test_only_fp8_runs_change() -> None:
    assert _act_gb(TINY, "bf16", precision="bf16") == _act_gb(TINY, "fp8", precision="bf16")


def test_deepseek_low_precision_storage_by_hand() -> None:
    """fp8_activation_cache (DeepSeek-V3 section 3.3.3) under layernorm_moe_act: h = 256, every
    layer MoE with 2 routed experts and 1 shared of f_e = 128, 4 heads of 64 (attention output 256
    wide): each of the 3 experts' gate and up (2 x 128) at 1 B instead of 2, 768 B; the attention
    output once at 1.5 B instead of bf16 + an fp8 copy, 1.5 x 256 = 384 B; 1,152 B per token and
    layer = 4.5 h."""
    from stepscope.planner.rates import norm_moe_act

    moe = ModelShape(
        d_model=256, n_layers=4, n_heads=4, n_kv_heads=4, head_dim=64, d_ff=1024, vocab=1000, gated_mlp=True,
        n_experts=8, experts_per_token=2, n_shared_experts=1, d_ff_expert=128,
    )  # fmt: skip
    plain = norm_moe_act(moe, fp8_inputs=True)[0]
    cached = norm_moe_act(moe, fp8_inputs=True, fp8_cache=True)[0]
    assert plain - cached == pytest.approx(4.5)
    assert norm_moe_act(moe, fp8_inputs=False, fp8_cache=True) == norm_moe_act(moe)  # bf16 runs: nothing
