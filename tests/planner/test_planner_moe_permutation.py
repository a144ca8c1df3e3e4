"""The MoE layers' token permutations (work.moe_permutation_bytes), counted by hand on a tiny
model: h 1024, 8 layers all MoE, 16 experts, top-2. Per token and MoE layer, in h-wide bf16 rows:
permute 3 (read 1, write 2) + its backward 3, unpermute 3 + its backward 5 = 14; with more than
one expert per rank the second permutation and its inverse add 2 x 2 (read + write of both
copies) forward and as much backward = 16."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy
from stepscope.planner.work import memory_bound_bytes, moe_permutation_bytes

TINY_MOE = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
    "num_local_experts": 16,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 512,
}
ROW_B = 2 * 1024  # one h-wide bf16 row
LAYERS, TOKENS = 8, 1000.0


def job(**kw: object) -> Job:
    return make_job(from_config_dict(TINY_MOE), hardware("h100"), 16, 8, 32, 2048, **kw)  # type: ignore[arg-type]


def _bytes(j: Job, ep: float, etp: float) -> float:
    return float(moe_permutation_bytes(j, TOKENS, np.array([ep]), np.array([etp]))[0])


def test_one_expert_per_rank_skips_the_second_permutation() -> None:
    assert _bytes(job(), 16, 1) == pytest.approx(14 * ROW_B * LAYERS * TOKENS)


def test_several_experts_per_rank_sort_them() -> None:
    assert _bytes(job(), 4, 1) == pytest.approx((14 + 16) * ROW_B * LAYERS * TOKENS)
    assert _bytes(job(), 1, 1) == pytest.approx((14 + 16) * ROW_B * LAYERS * TOKENS)  # ep 1: still 16 local experts


def test_expert_tp_and_imbalance_scale_only_the_second_permutation() -> None:
    # expert-TP 2: every rank of the pair sorts the gathered tokens; imbalance 1.5: the hot rank's share
    assert _bytes(job(), 4, 2) == pytest.approx((14 + 2 * 16) * ROW_B * LAYERS * TOKENS)
    assert _bytes(job(moe_imbalance=1.5), 4, 1) == pytest.approx((14 + 1.5 * 16) * ROW_B * LAYERS * TOKENS)


def test_leading_dense_layers_have_none() -> None:
    j = make_job(
        from_config_dict({**TINY_MOE, "model_type": "deepseek_v3", "n_routed_experts": 16, "first_k_dense_replace": 3}),
        hardware("h100"),
        16,
        8,
        32,
        2048,
    )
    assert j.model.first_dense_layers == 3
    assert _bytes(j, 16, 1) == pytest.approx(14 * ROW_B * (LAYERS - 3) * TOKENS)


def test_the_strategy_s_ep_reaches_the_bytes() -> None:
    j = job()
    tp, sp = np.array([1.0, 1.0]), np.array([1.0, 1.0])
    b = np.asarray(memory_bound_bytes(j, TOKENS, tp, sp, 0.0, np.array([16.0, 4.0]), np.array([1.0, 1.0])))
    assert float(b[1] - b[0]) == pytest.approx(16 * ROW_B * LAYERS * TOKENS)
    default = np.asarray(memory_bound_bytes(j, TOKENS, tp, sp, 0.0))  # ep 1, etp = tp
    assert float(default[0]) == pytest.approx(float(b[1]))


def test_they_reach_the_step_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope.planner import work

    j = job()
    s = parse_strategy("dp=16,ep=4,mb=1,recompute=none")
    with_perm = float(evaluate(j, s)["compute_s"][0])
    monkeypatch.setattr(work, "moe_permutation_bytes", lambda *a: np.zeros(1))
    without = float(evaluate(j, s)["compute_s"][0])
    # the step's 32 x 2048 tokens, 30 rows per token and layer, at the H100's HBM rate, over 16 devices
    expected_s = 30 * ROW_B * LAYERS * 32 * 2048 / j.hw.hbm_bytes_per_s / 16
    assert with_perm - without == pytest.approx(expected_s)
