"""Megatron-core's --recompute-modules layernorm moe_act (recompute=layernorm_moe_act), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.planner.cost import evaluate
from stepscope.planner.record import job_from_record
from stepscope.planner.strategy import parse_strategy


def test_norms_and_expert_activations_recomputed_by_hand() -> None:
    """Mixtral-8x7B (h 4096, 32 layers, 8 experts of 14336, top 2, SwiGLU), 8 H100, dp 8, ZeRO-3,
    one 4096-token sequence per device. Stored per token and layer: 2 h fewer (the norms' outputs)
    and one f_e fewer per routed copy (the SwiGLU product): 2 B x (2 x 4096 + 2 x 14336) = 73,728 B,
    4096 tokens: 301,989,888 B a layer. Under no recompute the 32 layers hold that much more; the
    policy's backward regenerates one layer (that much live again): 31 x 301,989,888 B fewer.
    Recomputed forward per token and layer: the norms 8 h B, the activation 6 f_e B per copy:
    32,768 + 172,032 = 204,800 B, over 32 layers and 32,768 tokens, at 3.35 TB/s, over 8 devices."""
    job = job_from_record(
        {"model": "mixtral-8x7b", "hardware": "h100", "devices": 8, "global_batch": 8, "seq_len": 4096}
    )
    none, nma = (
        evaluate(job, parse_strategy(f"tp=1,pp=1,dp=8,ep=1,zero=3,mb=1,recompute={p}"))
        for p in ("none", "layernorm_moe_act")
    )
    assert float(none["activations_gb"][0] - nma["activations_gb"][0]) == pytest.approx(
        31 * 301_989_888 / 1e9, rel=1e-9
    )
    assert float(nma["compute_s"][0] - none["compute_s"][0]) == pytest.approx(
        204_800 * 32 * 32_768 / 3.35e12 / 8, rel=1e-9
    )
    assert np.array_equal(nma["tp_s"], none["tp_s"])  # no GEMM and no collective replayed


def test_on_a_dense_model_the_policy_is_named_layernorm(capsys: pytest.CaptureFixture[str]) -> None:
    """On a dense model moe_act recomputes nothing, so the policy is Megatron's --recompute-modules
    layernorm: shown under that name, accepted back as it, and refused by that name for MoE models
    (where the planner models layernorm only together with moe_act)."""
    import json

    from stepscope.cli import main

    dense = [
        "plan",
        "--model",
        "llama3-70b",
        "--hardware",
        "h100",
        "--devices",
        "64",
        "--global-batch",
        "512",
        "--seq-len",
        "8192",
        "--framework",
        "megatron",
    ]
    assert main([*dense, "--where", "recompute=layernorm", "--top", "2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["strategy"]["recompute"] for r in rows} == {"layernorm"}
    assert main([*dense, "--evaluate", "tp=4,pp=4,vpp=5,cp=2,dp=2,recompute=layernorm", "--json"]) == 0
    by_alias = json.loads(capsys.readouterr().out)
    assert main([*dense, "--evaluate", "tp=4,pp=4,vpp=5,cp=2,dp=2,recompute=layernorm_moe_act", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == by_alias  # the same policy, under the dense name
    moe = [
        "plan",
        "--model",
        "mixtral-8x7b",
        "--hardware",
        "h100",
        "--devices",
        "64",
        "--global-batch",
        "512",
        "--seq-len",
        "4096",
    ]
    assert main([*moe, "--evaluate", "tp=2,pp=4,ep=8,dp=8,recompute=layernorm"]) == 2
    assert "use recompute=layernorm_moe_act" in capsys.readouterr().err
    assert main([*moe, "--evaluate", "tp=2,pp=4,ep=8,dp=8,recompute=layernorm_moe_act", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["strategy"]["recompute"] == "layernorm_moe_act"


def test_under_fp8_the_fp8_copies_are_freed_too_by_hand() -> None:
    """With fp8 (Transformer Engine's linears keep fp8 copies of their inputs) Megatron has the linears
    after a recomputed norm or expert activation save the original input instead, so the policy
    frees every copy of those outputs: Mixtral (all 32 layers MoE, no shared expert) per token and
    layer the first norm's fp8 copy (1 B x 4096), the router's bf16 second-norm output (2 B x 4096)
    and both routed copies' fp8 activation outputs (1 B x 2 x 14336): 40,960 B, 4096 tokens:
    167,772,160 B a layer, 31 of them fewer (backward regenerates one layer)."""
    job = job_from_record(
        {
            "model": "mixtral-8x7b",
            "hardware": "h100",
            "devices": 8,
            "global_batch": 8,
            "seq_len": 4096,
            "precision": "fp8",
        }
    )
    none, nma = (
        evaluate(job, parse_strategy(f"tp=1,pp=1,dp=8,ep=1,zero=3,mb=1,recompute={p}"))
        for p in ("none", "layernorm_moe_act")
    )
    assert float(none["activations_gb"][0] - nma["activations_gb"][0]) == pytest.approx(
        31 * 167_772_160 / 1e9, rel=1e-9
    )
