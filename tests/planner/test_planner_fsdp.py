"""FSDP (ZeRO-3) terms by hand. fp8 all-gather (torchao's enable_fsdp_float8_all_gather): the layers'
weights are cast to fp8 before their all-gather, so the gathers move, and the gathered buffers hold,
1 B per layer parameter instead of 2; the embedding and the output layer stay bf16, the gradients'
reduce-scatter is unchanged. Prefetching (FSDP2): only a micro-batch's first all-gather and last
reduce-scatter are exposed. A small model: h 1024, 8 layers of 16,777,216 matmul parameters, vocab
8000 (the planner leaves the norms' 2,048 per layer out)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.cli import main
from stepscope.planner.cost import evaluate
from stepscope.planner.data_parallel import dp_seconds
from stepscope.planner.job import Job, make_job
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy
from stepscope.planner.window import Window

SMALL = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "vocab_size": 8000,
    "hidden_act": "silu",
}
LAYER = 4 * 1024 * 1024 + 3 * 1024 * 4096  # q, k, v, o; gate, up, down


def _job(**kw: object) -> Job:
    return make_job(from_config_dict(SMALL), hardware("h100"), 8, 8, 64, 2048, precision="fp8", **kw)  # type: ignore[arg-type]


def test_the_gathered_layers_are_held_in_fp8() -> None:
    s = parse_strategy("dp=8,zero=3,mb=1")
    bf16, fp8 = evaluate(_job(), s), evaluate(_job(fp8_all_gather=True), s)
    # the running and the prefetched layer, 1 B less per parameter each (the unit is a layer: the
    # 8000 x 1024 embedding is smaller)
    assert float(bf16["buffers_gb"][0] - fp8["buffers_gb"][0]) == pytest.approx(2 * LAYER / 1e9)
    assert fp8["dp_s"][0] + fp8["hidden_dp_s"][0] < bf16["dp_s"][0] + bf16["hidden_dp_s"][0]
    # only under fp8 and only under ZeRO-3
    assert evaluate(_job(fp8_all_gather=True), parse_strategy("dp=8,zero=1,mb=1"))["dp_s"][0] == pytest.approx(
        evaluate(_job(), parse_strategy("dp=8,zero=1,mb=1"))["dp_s"][0]
    )
    bf16_job = make_job(from_config_dict(SMALL), hardware("h100"), 8, 8, 64, 2048, fp8_all_gather=True)
    assert evaluate(bf16_job, s)["buffers_gb"][0] == pytest.approx(
        evaluate(make_job(from_config_dict(SMALL), hardware("h100"), 8, 8, 64, 2048), s)["buffers_gb"][0]
    )


def test_zero3_traffic_uses_the_gather_bytes() -> None:
    """With a ring that returns the bytes it is given and no compute to hide under, the exposed
    FSDP time is the traffic: per micro-batch two all-gathers and one reduce-scatter."""

    def bytes_only(
        n: np.ndarray, nbytes: np.ndarray, span: np.ndarray, calls: np.ndarray | float = 1.0, kind: str = ""
    ) -> np.ndarray:
        return np.where(n > 1, nbytes, 0.0)  # a group of one moves nothing

    one = np.ones(1)
    args = {
        "ring": bytes_only,
        "p_dev": one * 100.0,
        "tp": one,
        "pp": one,
        "dpc": one * 8,
        "shard": one * 8,
        "zero": one * 3,
        "keep": np.zeros(1, dtype=bool),
        "stage_L": one * 8,
        "n_micro": one * 4,
        "busy_s": one * 0.0,
        "rf": one,
    }
    job = _job()  # fp32 gradients: 4 B per parameter reduced
    bf16 = dp_seconds(job, window=Window(np.zeros(1)), gather_b=one * 200.0, **args)
    fp8 = dp_seconds(job, window=Window(np.zeros(1)), gather_b=one * 100.0, **args)
    assert float(bf16[0]) == pytest.approx(4 * (2 * 200 + 4 * 100))
    assert float(fp8[0]) == pytest.approx(4 * (2 * 100 + 4 * 100))


def test_flag_and_record_key(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "16",
        "--global-batch",
        "32",
        "--seq-len",
        "8192",
        "--precision",
        "fp8",
        "--evaluate",
        "dp=16,zero=3,mb=1,recompute=full",
        "--json",
    ]
    assert main([*args, "--set", "fp8_all_gather=true"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["settings"]["fp8_all_gather"] is True


def test_prefetched_zero3_exposes_only_the_first_gather_and_the_last_reduce_by_hand() -> None:
    """FSDP2's implicit prefetching (the zero3_prefetch setting): 3 collectives per layer and micro-batch, of
    which only the first all-gather and the last reduce-scatter have no layer's compute beside them:
    2 of 3 x 8 exposed while the traffic is shorter than the compute; kept weights, 2 of 2 x 8."""

    def bytes_only(
        n: np.ndarray, nbytes: np.ndarray, span: np.ndarray, calls: np.ndarray | float = 1.0, kind: str = ""
    ) -> np.ndarray:
        return np.where(n > 1, nbytes, 0.0)

    one = np.ones(1)
    args = {
        "ring": bytes_only,
        "p_dev": one * 100.0,
        "gather_b": one * 200.0,
        "tp": one,
        "pp": one,
        "dpc": one * 8,
        "shard": one * 8,
        "zero": one * 3,
        "stage_L": one * 8,
        "n_micro": one * 4,
        "busy_s": one * 1e6,
        "rf": one,
    }
    raw = 4 * (2 * 200 + 4 * 100)  # 4 micro-batches: two gathers of 200 B, a reduce-scatter of 400 (fp32)
    each = dp_seconds(_job(zero3_prefetch=True), window=Window(one * 1e6), keep=np.zeros(1, dtype=bool), **args)
    assert float(each[0]) == pytest.approx(raw * 2 / 24)
    # kept weights: one gather and one reduce-scatter per micro-batch without a pipeline, per step under one
    kept = _job(zero3_prefetch=True)
    once = dp_seconds(kept, window=Window(one * 1e6), keep=np.ones(1, dtype=bool), **args)
    assert float(once[0]) == pytest.approx(4 * (200 + 400) * 2 / 16)
    piped = dp_seconds(kept, window=Window(one * 1e6), keep=np.ones(1, dtype=bool), **{**args, "pp": one * 2})
    assert float(piped[0]) == pytest.approx((200 + 400) * 2 / 16)
    # without it, the 0.7 prior share hides
    plain = dp_seconds(_job(), window=Window(one * 1e6), keep=np.zeros(1, dtype=bool), **args)
    assert float(plain[0]) == pytest.approx(raw * 0.3)
