"""MaxText's remat policies minimal_with_context, save_dot_with_context_except_mlp and
save_dot_except_mlpwi (src/MaxText/layers/decoders.py, Decoder.get_remat_policy: the checkpoint
names each keeps), their short names, and their activation bytes counted by hand on a small model
for which the priors' count is exact: MHA (q, k, v and the attention output h wide each), a plain
(ungated) 4h MLP, dense."""

from __future__ import annotations

import pytest

from stepscope.catalog.model_flops import ModelShape
from stepscope.planner import frameworks
from stepscope.planner.api import plan
from stepscope.planner.cost import evaluate
from stepscope.planner.job import make_job
from stepscope.planner.recompute import (
    ACT_BYTES,
    CP_REPLAY,
    EP_REPLAY,
    GATHERED_BYTES,
    RECOMPUTE,
    RECOMPUTE_FACTOR,
    REPLICATED_BYTES,
    TP_REPLAY,
)
from stepscope.planner.search import hardware, recompute_policies
from stepscope.planner.strategy import parse_strategy

H, L, SEQ, MB, V = 256, 4, 512, 2, 1000
SMALL = ModelShape(d_model=H, n_layers=L, n_heads=4, n_kv_heads=4, head_dim=64, d_ff=4 * H, vocab=V, gated_mlp=False)
JOB = make_job(SMALL, hardware("tpu-v5e"), 4, 4, 8, SEQ)  # 8 sequences over dp 4: one micro-batch of 2
NEW = ("minimal_with_context", "save_dot_with_context_except_mlp", "save_dot_except_mlpwi")

# Elements kept per token and layer, by the checkpoint names MaxText's policy saves (h = 256):
# q, k, v 3 x 256; context (the attention output, n_heads x head_dim) 256; out_proj 256;
# mlpwi (the plain MLP's input projection) 1024; mlpwo 256; decoder_layer_input 256, always kept
KEPT = {
    "minimal": 768 + 256 + 1024 + 256 + 256,  # q, k, v, out_proj, mlpwi, mlpwo, input: 2560
    "minimal_with_context": 768 + 256 + 256 + 1024 + 256 + 256,  # + context: 2816
    "save_dot_with_context_except_mlp": 768 + 256 + 256 + 256,  # q, k, v, context, out_proj, input: 1536
    "save_dot_except_mlpwi": 768 + 256 + 256 + 256,  # q, k, v, out_proj, mlpwo, input: 1536
    "save_dot_except_mlp": 768 + 256 + 256,  # q, k, v, out_proj, input: 1280
}
# without recompute (Korthikanti's count, no dropout masks): both norms' inputs and outputs 4h,
# q, k, v 3h, the attention output h, the MLP's activation input and output 2 x 4h = 16 h elements
NONE = 16 * H


def _activation_bytes(policy: str) -> float:
    return float(evaluate(JOB, parse_strategy(f"dp=4,mb={MB},recompute={policy}"))["activations_gb"][0]) * 1e9


@pytest.mark.parametrize("policy", sorted(KEPT))
def test_activation_bytes_by_hand(policy: str) -> None:
    """Every layer keeps its tensors, 2 B each; backward regenerates one layer in full (the rest of
    the no-recompute bytes once more); the output layer keeps 6 B per logit (fused loss)."""
    per_token = 2.0 * KEPT[policy]
    expected = SEQ * MB * (L * per_token + (2.0 * NONE - per_token)) + SEQ * MB * V * 6.0
    assert _activation_bytes(policy) == pytest.approx(expected)


def test_context_is_what_minimal_with_context_keeps_beyond_minimal() -> None:
    # 256 elements of context x 2 B per token in each of the 4 layers, less the same in the one
    # layer backward regenerates (which no longer needs to be recomputed beside it)
    diff = _activation_bytes("minimal_with_context") - _activation_bytes("minimal")
    assert diff == pytest.approx(SEQ * MB * 2.0 * 256 * (L - 1))


# forward multiply-adds per token of a layer (h = 256, q = k = v = 256 wide, a plain 4h MLP,
# causal attention over SEQ = 512 tokens: half of 2 x 512 x 256): q, k, v 3 h^2, out h^2, MLP
# 8 h^2, attention 512 x 256; what each policy reruns (the MLP's output projection only in MoE
# layers), over three times that (forward + backward)
LAYER_MACS = 12 * 256**2 + 512 * 256


@pytest.mark.parametrize(
    "policy,factor",
    [
        ("minimal_with_context", 1.0),  # every GEMM output and the kernel's output kept
        # the MLP's input projection (4 h^2): its activation is the output projection's input
        ("save_dot_with_context_except_mlp", 1.0 + 4 * 256**2 / (3 * LAYER_MACS)),
        # the attention kernel (context not kept) and the MLP's input projection
        ("save_dot_except_mlpwi", 1.0 + (512 * 256 + 4 * 256**2) / (3 * LAYER_MACS)),
    ],
)
def test_recomputed_flops_by_hand(policy: str, factor: float) -> None:
    r = evaluate(JOB, parse_strategy(f"dp=4,mb={MB},recompute={policy}"))
    assert float(r["hfu"][0] / r["mfu"][0]) == pytest.approx(factor)


def test_policies_order_by_memory_and_time() -> None:
    """MaxText's base.yml lists them from fastest to slowest and most to least memory."""
    res = {
        p: evaluate(JOB, parse_strategy(f"dp=4,mb={MB},recompute={p}"))
        for p in ("minimal_with_context", "minimal", "save_dot_except_mlpwi", "save_dot_except_mlp", "full")
    }
    acts = [float(r["activations_gb"][0]) for r in res.values()]
    assert acts == sorted(acts, reverse=True)
    steps = [float(r["compute_s"][0]) for r in res.values()]
    assert steps == sorted(steps)


@pytest.mark.parametrize(
    "written,name",
    [
        ("minimal_with_context", "minimal_with_context"),
        ("minimal_with_ctx", "minimal_with_context"),
        ("minimal_flash", "minimal_with_context"),
        ("save_dot_with_context_except_mlp", "save_dot_with_context_except_mlp"),
        ("save_dot_ctx_ex_mlp", "save_dot_with_context_except_mlp"),
        ("save-dot-except-mlpwi", "save_dot_except_mlpwi"),
    ],
)
def test_names_and_short_names_parse(written: str, name: str) -> None:
    for key in ("recompute", "remat"):
        assert int(parse_strategy(f"dp=4,{key}={written}")["recompute"][0]) == RECOMPUTE.index(name)


def test_appended_after_the_existing_policies() -> None:
    """Earlier indices (saved records, --where codes) keep their meaning; every table has an entry."""
    assert RECOMPUTE[:12] == (
        "none",
        "selective",
        "full",
        "minimal",
        "save_dot_except_mlp",
        "save_qkv_proj",
        "save_out_proj",
        "op",
        "layernorm_moe_act",
        "qkv_proj_offloaded",
        "mla_up_proj",
        "layernorm_mla_up_proj_moe_act",
    )
    assert RECOMPUTE[12:] == NEW
    for table in (ACT_BYTES, REPLICATED_BYTES, GATHERED_BYTES, RECOMPUTE_FACTOR, TP_REPLAY, EP_REPLAY, CP_REPLAY):
        assert len(table) == len(RECOMPUTE)
    assert all(RECOMPUTE.index(p) in recompute_policies(SMALL) for p in NEW)


def test_maxtext_offers_them_and_evaluate_takes_the_short_names() -> None:
    fw = frameworks.by_name("maxtext")
    assert set(NEW) <= set(fw.recompute)
    result = plan(
        model="llama3-8b",
        hardware="tpu-v5p",
        devices=16,
        global_batch=32,
        seq_len=2048,
        framework="maxtext",
        evaluate="dp=16,zero=3,mb=2,remat=minimal_with_ctx",
    )
    assert result.records[0]["strategy"]["recompute"] == "minimal_with_context"
