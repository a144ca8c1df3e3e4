"""Communication buffers under ZeRO-3 / FSDP: two gathered layers' weights and one layer's whole
gradients (or the embedding's, or the largest tensor's), counted by hand on tiny models."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy

TINY = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "vocab_size": 1000,
    "hidden_act": "silu",
}  # the embedding (1000 x 1024) smaller than a layer
BIG_VOCAB = {**TINY, "vocab_size": 32000}  # 32000 x 1024 = 32,768,000: larger than a layer
LAYER = 4 * 1024 * 1024 + 3 * 1024 * 4096  # q, k, v, o (MHA) + SwiGLU's three matrices


def job_from_record(**kw: object) -> Job:
    return make_job(from_config_dict(TINY), hardware("h100"), 8, 8, 16, 2048, **kw)  # type: ignore[arg-type]


def _buffers_gb(job: Job, strategy: str) -> float:
    return float(evaluate(job, parse_strategy(strategy))["buffers_gb"][0])


def test_zero1_holds_only_the_communicators_buffers() -> None:
    assert _buffers_gb(job_from_record(), "tp=2,dp=4,zero=1") == pytest.approx(1.0)


def test_fsdp_holds_two_gathered_layers_and_one_layers_gradients() -> None:
    # tp=2: a layer's parameters on this device are LAYER / 2; bf16 weights of two layers (2 x 2 B),
    # the layer's bf16 gradients (2 B) and their fp32 copy for the reduce-scatter (4 B): 10 B each
    assert _buffers_gb(job_from_record(), "tp=2,dp=4,zero=3") == pytest.approx(1.0 + 10 * LAYER / 2 / 1e9)
    # reduced in bf16: no fp32 copy, 6 B
    assert _buffers_gb(job_from_record(grad_dtype="bf16"), "tp=2,dp=4,zero=3") == pytest.approx(
        1.0 + 6 * LAYER / 2 / 1e9
    )
    # weights kept gathered are counted under weights: only the gradient part (6 B) remains
    assert _buffers_gb(job_from_record(), "tp=2,dp=4,zero=3,keep_params=1") == pytest.approx(1.0 + 6 * LAYER / 2 / 1e9)


def test_fsdp_holds_the_embedding_where_it_is_larger_than_a_layer() -> None:
    big = make_job(from_config_dict(BIG_VOCAB), hardware("h100"), 8, 8, 16, 2048)
    assert _buffers_gb(big, "tp=2,dp=4,zero=3") == pytest.approx(1.0 + 10 * 32000 * 1024 / 2 / 1e9)


def test_the_total_includes_them() -> None:
    r = evaluate(job_from_record(), parse_strategy("tp=2,dp=4,zero=3"))
    parts = sum(
        float(r[k][0]) for k in ("weights_gb", "grads_gb", "optimizer_gb", "activations_gb", "buffers_gb", "reserve_gb")
    )
    assert float(r["total_gb"][0]) == pytest.approx(parts)


# ---- gathered tensor by tensor (XLA, DeepSpeed ZeRO-3) and statically allocated devices ----------


def test_tensor_gather_holds_the_largest_tensor_not_the_layer() -> None:
    # the fused gate+up matrix (2 x 1024 x 4096) is the largest (fused qkv 1024 x 3072, the
    # embedding 1000 x 1024); over tp=2, 10 B per parameter
    job = job_from_record(zero3_gather="tensor")
    assert _buffers_gb(job, "tp=2,dp=4,zero=3") == pytest.approx(1.0 + 10 * 2 * 1024 * 4096 / 2 / 1e9)
    # vocab 32000 x h 1024 = 32,768,000 is the largest tensor of the other model
    big = make_job(from_config_dict(BIG_VOCAB), hardware("h100"), 8, 8, 16, 2048, zero3_gather="tensor")
    assert _buffers_gb(big, "tp=2,dp=4,zero=3") == pytest.approx(1.0 + 10 * 32000 * 1024 / 2 / 1e9)
    # separate projections: gate and up are tensors of their own (1024 x 4096)
    sep = make_job(
        from_config_dict(TINY), hardware("h100"), 8, 8, 16, 2048, zero3_gather="tensor", fused_projections=False
    )
    assert _buffers_gb(sep, "tp=2,dp=4,zero=3") == pytest.approx(1.0 + 10 * 1024 * 4096 / 2 / 1e9)
    # ZeRO-1 gathers nothing whole: the same 1 GB either way
    assert _buffers_gb(job, "tp=2,dp=4,zero=1") == pytest.approx(1.0)


def test_tensor_gather_counts_the_stacked_experts_of_a_device() -> None:
    # 8 experts of 1024 x 2048 (gate, up, down separate), ep=2: 4 experts' gate stacked, 8,388,608
    moe = {**TINY, "num_local_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 2048}
    job = make_job(
        from_config_dict(moe), hardware("h100"), 8, 8, 16, 2048, zero3_gather="tensor", fused_projections=False
    )
    assert _buffers_gb(job, "tp=1,dp=8,ep=2,zero=3") == pytest.approx(1.0 + 10 * 4 * 1024 * 2048 / 1e9)


def test_a_tpu_reserves_nothing_and_has_no_nccl_buffers() -> None:
    tpu = make_job(from_config_dict(TINY), hardware("tpu-v5p"), 8, 8, 16, 2048)
    r = evaluate(tpu, parse_strategy("tp=2,dp=4,zero=3"))
    assert float(r["reserve_gb"][0]) == 0.0
    assert float(r["buffers_gb"][0]) == pytest.approx(10 * LAYER / 2 / 1e9)  # the gathered layers only
    # a reserve given explicitly is kept, on any device
    assert (
        float(
            evaluate(
                make_job(from_config_dict(TINY), hardware("tpu-v5p"), 8, 8, 16, 2048, reserve_gb=2.0),
                parse_strategy("tp=2,dp=4"),
            )["reserve_gb"][0]
        )
        == 2.0
    )
    assert float(evaluate(job_from_record(), parse_strategy("tp=2,dp=4"))["reserve_gb"][0]) == 3.0


def test_bad_gather_mode_is_refused() -> None:
    from stepscope.errors import ConfigError

    with pytest.raises(ConfigError, match="zero3_gather must be one of layer, tensor"):
        job_from_record(zero3_gather="module")


def test_batch_records_and_flags_carry_the_gather_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from stepscope.cli import main

    base = {
        "model": "gpt3-175b",
        "hardware": "h100",
        "devices": 64,
        "global_batch": 64,
        "seq_len": 2048,
        "strategy": "dp=64,zero=3,recompute=full",
    }
    batch = tmp_path / "b.jsonl"
    batch.write_text(
        "\n".join(json.dumps(r) for r in (base, {**base, "zero3_gather": "tensor"}, {**base, "zero3_gather": "module"}))
        + "\n"
    )
    assert main(["plan", "--batch", str(batch)]) == 0
    layer, tensor, bad = (json.loads(x) for x in capsys.readouterr().out.splitlines())
    # GPT-3 175B: a layer 12 x 12288^2 parameters, its largest tensor the embedding 50257 x 12288;
    # 10 B each, beside the 1 GB communicator prior of a GPU
    assert layer["memory_gb"]["buffers"] == pytest.approx(1.0 + 10 * 12 * 12288**2 / 1e9, rel=1e-3)
    assert tensor["memory_gb"]["buffers"] == pytest.approx(1.0 + 10 * 50257 * 12288 / 1e9, rel=1e-3)
    assert tensor["settings"]["zero3_gather"] == "tensor" and "zero3_gather" not in layer["settings"]
    assert "zero3_gather must be one of layer, tensor, not 'module'" in bad["error"]
    # a bad setting is one line and exit 2
    assert (
        main(
            [
                "plan",
                "--model",
                "gpt3-175b",
                "--hardware",
                "h100",
                "--devices",
                "64",
                "--global-batch",
                "64",
                "--seq-len",
                "2048",
                "--set",
                "zero3_gather=module",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "zero3_gather must be one of layer, tensor, not 'module'" in err and len(err.strip().splitlines()) == 1
