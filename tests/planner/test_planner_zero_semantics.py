"""ZeRO stages under gradient accumulation and pipelines, as the frameworks run them.

Hand-computed against a stand-in ring that costs its bytes in GB as seconds plus 1 ms per call,
(a group of one: nothing), so every transfer and every collective call shows in the sum:
- ZeRO-1 (Megatron's distributed optimizer, DeepSpeed stage 1): one reduce-scatter of the whole
  gradients per step, whatever the accumulation, and the gradients held whole;
- ZeRO-2 (DeepSpeed stage 2, Llama 3's FSDP): one reduce-scatter per micro-batch, gradients held
  sharded; DeepSpeed and Megatron do not run it with a pipeline;
- ZeRO-3 with kept weights (FSDP2 reshard_after_forward=False): one all-gather + one
  reduce-scatter per micro-batch without a pipeline, per step under one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from stepscope.catalog.model_flops import ModelShape
from stepscope.cli import main
from stepscope.errors import ConfigError
from stepscope.planner import frameworks
from stepscope.planner.data_parallel import dp_seconds
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware
from stepscope.planner.states import state_bytes
from stepscope.planner.strategy import Strategy
from stepscope.planner.window import Window

M = ModelShape(d_model=64, n_layers=4, n_heads=4, n_kv_heads=4, head_dim=16, d_ff=256, vocab=100, gated_mlp=False)
P = 1e9  # parameters on the device
DP = 4.0  # ranks sharing the weights: a ring moves 3/4 of a buffer
LAYERS = 4.0


def _ring(n: np.ndarray, nbytes: Any, span: Any, calls: Any = 1, kind: str = "all_gather") -> np.ndarray:
    # a group of one moves nothing and makes no call
    return np.where(n > 1, (n - 1) / n * np.asarray(nbytes) / 1e9 + np.asarray(calls) * 1e-3, 0.0)


def _job(**settings: Any) -> Any:
    # no bucketing (one reduce-scatter call), no overlap unless a test asks
    base = {"dp_bucket_mb": 0.0, "dp_overlap": 0.0, "zero3_prefetch": False}
    return make_job(M, hardware("h100"), 8, 8, 64, 1024).with_settings(**{**base, **settings})


def _dp(job: Any, *, zero: int, n_micro: float, pp: int = 1, keep: bool = False, busy_s: float = 100.0) -> float:
    one = np.ones(1)
    out = dp_seconds(
        job,
        ring=_ring,
        window=Window(busy_s * one),
        p_dev=P * one,
        gather_b=2 * P * one,
        tp=one,
        pp=pp * one,
        dpc=DP * one,
        shard=DP * one,
        zero=np.array([zero]),
        keep=np.array([keep]),
        stage_L=LAYERS * one,
        n_micro=n_micro * one,
        busy_s=busy_s * one,
        rf=one,
    )
    return float(out[0])


def test_zero1_reduces_once_per_step_whatever_the_accumulation() -> None:
    # reduce-scatter 3/4 x 4 B x 1e9 = 3 s + 1 call; weight all-gather 3/4 x 2 B x 1e9 = 1.5 s + 1 call
    for n_micro in (1.0, 8.0):
        assert _dp(_job(), zero=1, n_micro=n_micro) == pytest.approx(3.0 + 1e-3 + 1.5 + 1e-3)


def test_zero2_reduces_every_micro_batch() -> None:
    # 8 reduce-scatters of 3 s + 1 ms each, then the all-gather 1.5 s + 1 ms
    assert _dp(_job(), zero=2, n_micro=8.0) == pytest.approx(8 * (3.0 + 1e-3) + 1.5 + 1e-3)
    assert _dp(_job(), zero=2, n_micro=1.0) == pytest.approx(_dp(_job(), zero=1, n_micro=1.0))


def test_zero2_hides_each_reduce_scatter_under_its_own_micro_batch() -> None:
    # dp_overlap 1; 16 s of compute in 8 micro-batches of 2 s, the last backward of each (rf = 1)
    # 2 x 2/3 = 4/3 s: the 8 reduce-scatters (8 x 3.001 s) hide under 8 x 4/3 s; the all-gather
    # after the optimizer step has no window (param_gather_overlap off): 1.501 s
    zero2 = _dp(_job(dp_overlap=1.0), zero=2, n_micro=8.0, busy_s=16.0)
    assert zero2 == pytest.approx(8 * 3.001 - 8 * 4 / 3 + 1.501)
    # ZeRO-1's one reduce-scatter hides under the last micro-batch's backward only
    zero1 = _dp(_job(dp_overlap=1.0), zero=1, n_micro=8.0, busy_s=16.0)
    assert zero1 == pytest.approx(3.001 - 4 / 3 + 1.501)


def test_zero3_kept_weights_gather_per_micro_batch_without_a_pipeline() -> None:
    # one all-gather (2 B) + one reduce-scatter (4 B) = 3/4 x 6e9 = 4.5 s, one call per layer and pass: 2 x 4
    once = 4.5 + 8e-3
    assert _dp(_job(), zero=3, n_micro=4.0, keep=True) == pytest.approx(4 * once)
    assert _dp(_job(), zero=3, n_micro=4.0, pp=2, keep=True) == pytest.approx(once)
    # resharded after forward: two all-gathers + one reduce-scatter (3/4 x 8e9 = 6 s, 3 x 4 calls) each micro-batch
    assert _dp(_job(), zero=3, n_micro=4.0) == pytest.approx(4 * (6.0 + 12e-3))


def test_memory_by_stage() -> None:
    """1e9 parameters, dp 4: weights 2 B, gradients 4 B, optimizer 12 B a parameter; ZeRO-1 shards
    the optimizer only (Megatron keeps a full gradient buffer), ZeRO-2 also the gradients,
    ZeRO-3 also the weights; kept weights stay whole, and under a pipeline their gradients too."""
    job = _job()
    one = np.ones(1)

    def parts(zero: int, keep: bool = False, pp: int = 1) -> tuple[float, float, float]:
        w, g, o = state_bytes(
            job, p_dev=P * one, zero=np.array([zero]), shard=DP * one, keep=np.array([keep]), pp=pp * one
        )
        return float(w[0]) / 1e9, float(g[0]) / 1e9, float(o[0]) / 1e9

    assert parts(1) == pytest.approx((2.0, 4.0, 3.0))
    assert parts(2) == pytest.approx((2.0, 1.0, 3.0))
    assert parts(3) == pytest.approx((0.5, 1.0, 3.0))
    assert parts(3, keep=True) == pytest.approx((2.0, 1.0, 3.0))
    assert parts(3, keep=True, pp=2) == pytest.approx((2.0, 4.0, 3.0))


def test_frameworks_offer_their_own_stages() -> None:
    megatron, deepspeed = frameworks.by_name("megatron"), frameworks.by_name("deepspeed")
    ok = Strategy(tp=1, pp=2, dp=4, zero=1)
    assert frameworks.check_strategy(megatron, ok) is ok
    with pytest.raises(ConfigError, match="megatron has no ZeRO stage 2"):
        frameworks.check_strategy(megatron, Strategy(dp=8, zero=2))
    with pytest.raises(ConfigError, match="megatron runs no ZeRO stage 3 with pipeline parallelism"):
        frameworks.check_strategy(megatron, Strategy(pp=2, dp=4, zero=3))
    assert frameworks.check_strategy(deepspeed, Strategy(dp=8, zero=3)).zero == 3
    with pytest.raises(ConfigError, match="no ZeRO stage 3 with pipeline parallelism"):
        frameworks.check_strategy(deepspeed, Strategy(pp=2, dp=4, zero=3))
    with pytest.raises(ConfigError, match="deepspeed runs no ZeRO stage 2 with pipeline parallelism"):
        frameworks.check_strategy(deepspeed, Strategy(pp=2, dp=4, zero=2))
    # without a framework the strategy is taken as given (Llama 3's FSDP ran ZeRO-2 under a pipeline)
    assert frameworks.check_strategy(None, Strategy(pp=2, dp=4, zero=2)).zero == 2


JOB = ["plan", "--model", "llama3-8b", "--hardware", "h100", "--devices", "64", "--global-batch", "512"]
JOB += ["--seq-len", "4096", "--top", "200", "--variants"]


@pytest.mark.parametrize(("framework", "allowed"), [("megatron", {0, 1, 3}), ("deepspeed", {0, 1, 2, 3})])
def test_search_keeps_to_the_framework(run_json: Callable[..., Any], framework: str, allowed: set[int]) -> None:
    rows = [r["strategy"] for r in run_json(*JOB, "--framework", framework, "--json")["rows"]]
    assert len(rows) == 200
    assert {r["zero"] for r in rows} <= allowed
    assert not [r for r in rows if r["pp"] > 1 and r["zero"] >= 2]


def test_evaluate_refuses_zero2_with_a_pipeline_under_deepspeed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*JOB[:11], "--framework", "deepspeed", "--evaluate", "pp=2,dp=32,zero=2"]) == 2
    assert "deepspeed runs no ZeRO stage 2 with pipeline parallelism" in capsys.readouterr().err
