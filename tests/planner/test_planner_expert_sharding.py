"""Expert parameters under ZeRO: held by the expert data-parallel group (dp x cp x tp / (ep x etp)
ranks), not by all of data parallelism; by hand on a small MoE model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stepscope.planner.cost import evaluate
from stepscope.planner.data_parallel import _fold
from stepscope.planner.record import job_from_record
from stepscope.planner.strategy import parse_strategy

# h 1024, 2 layers, 8 heads of 128 (MHA), 8 experts of 1024 (SwiGLU), top 2, vocabulary 1000
MOE = {
    "hidden_size": 1024,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "intermediate_size": 1024,
    "moe_intermediate_size": 1024,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 1000,
}
# matmul weights: a layer's attention 4 x 1024^2 = 4,194,304 and router 1024 x 8 = 8,192; its experts
# 8 x 3 x 1024^2 = 25,165,824; the embedding 1000 x 1024 = 1,024,000 (one stage holds all of it)
DENSE = 2 * (4_194_304 + 8_192) + 1_024_000  # 9,428,992 on every rank
EXPERTS = 2 * 25_165_824


@pytest.fixture
def moe_job(tmp_path: Path):  # noqa: ANN201
    path = tmp_path / "moe.json"
    path.write_text(json.dumps(MOE))
    return job_from_record({"model": str(path), "hardware": "h100", "devices": 8, "global_batch": 8, "seq_len": 1024})


def _gb(job, strategy: str, key: str) -> float:  # noqa: ANN001
    return float(evaluate(job, parse_strategy(strategy))[key][0])


@pytest.mark.parametrize("ep", [1, 2, 4, 8])
def test_zero1_optimizer_states_by_hand(moe_job, ep: int) -> None:  # noqa: ANN001
    """8 ranks, ZeRO-1, fp32 master + Adam's moments 12 B per parameter. A rank holds the dense
    weights (sharded 8 ways) and EXPERTS / ep expert weights, which dp / ep = 8 / ep ranks share:
    sharded 8 / ep ways, EXPERTS / 8 each whatever ep is: 12 x (DENSE / 8 + EXPERTS / 8) B."""
    expected = 12 * (DENSE / 8 + EXPERTS / 8)
    assert _gb(moe_job, f"dp=8,ep={ep},zero=1", "optimizer_gb") == pytest.approx(expected / 1e9, rel=1e-9)


def test_zero2_gradients_and_zero3_weights_by_hand(moe_job) -> None:  # noqa: ANN001
    """EP 8 on 8 ranks: each expert shard has one copy, so ZeRO-2 shards only the dense gradients
    (fp32, 4 B) and ZeRO-3 only the dense weights (bf16, 2 B); with EP 4 the experts' are halved."""
    e8, e4 = EXPERTS / 8, EXPERTS / 4
    assert _gb(moe_job, "dp=8,ep=8,zero=2", "grads_gb") == pytest.approx(4 * (DENSE / 8 + e8) / 1e9, rel=1e-9)
    assert _gb(moe_job, "dp=8,ep=4,zero=2", "grads_gb") == pytest.approx(4 * (DENSE / 8 + e4 / 2) / 1e9, rel=1e-9)
    assert _gb(moe_job, "dp=8,ep=8,zero=3", "weights_gb") == pytest.approx(2 * (DENSE / 8 + e8) / 1e9, rel=1e-9)
    assert _gb(moe_job, "dp=8,ep=8,zero=0", "grads_gb") == pytest.approx(4 * (DENSE + e8) / 1e9, rel=1e-9)


def test_expert_share_of_a_ring_by_hand() -> None:
    """A ring over n ranks moves (n-1)/n of a buffer per rank; the experts', shared by n / fold
    ranks, move ((n/fold - 1)/(n/fold)) of theirs: as a share of the dense ring's, over 8 ranks,
    fold 8 -> 0, fold 4 -> (1/2)/(7/8) = 4/7, fold 1 -> 1; one rank -> 0."""
    got = _fold(np.array([8.0, 8.0, 8.0, 1.0]), np.array([8.0, 4.0, 1.0, 1.0]))
    assert got.tolist() == pytest.approx([0.0, 4 / 7, 1.0, 0.0], rel=1e-12)


def test_expert_gradients_not_reduced_without_replicas(moe_job) -> None:  # noqa: ANN001
    """With EP = DP the reduce-scatter carries only the dense gradients: the exposed DP time with
    nothing hidden (dp_overlap 0) equals that of the same stage without experts' bytes, i.e. it
    does not grow with the experts' width."""
    import dataclasses

    job = moe_job.replaced(dp_overlap=0.0)
    wide = dataclasses.replace(job, model=dataclasses.replace(job.model, d_ff_expert=2048))
    narrow_s, wide_s = (_gb(j, "dp=8,ep=8,zero=1", "dp_s") for j in (job, wide))
    assert wide_s == pytest.approx(narrow_s, rel=1e-12)
    assert _gb(wide, "dp=8,ep=4,zero=1", "dp_s") > _gb(
        job, "dp=8,ep=4,zero=1", "dp_s"
    )  # with 2 replicas they are reduced


@pytest.mark.parametrize(
    "layout",
    ["tp=2,dp=4,ep=1,etp=1", "tp=2,dp=4,ep=2", "tp=2,dp=4,ep=4,etp=1", "tp=1,dp=8,ep=2", "tp=4,dp=2,ep=2,etp=1"],
)
def test_zero1_spreads_every_state_once_over_the_ranks(moe_job, layout: str) -> None:  # noqa: ANN001
    """Without a pipeline, ZeRO-1 over 8 ranks holds each parameter's optimizer states exactly once:
    12 x (DENSE + EXPERTS) / 8 per rank, however TP, EP and expert-TP split the weights (with etp=1
    the TP ranks hold whole experts and Megatron folds them into the expert data-parallel group)."""
    assert _gb(moe_job, f"{layout},zero=1", "optimizer_gb") == pytest.approx(12 * (DENSE + EXPERTS) / 8 / 1e9, rel=1e-9)
