"""The layouts model reports published, as they ran: what the planner puts on their devices.

DeepSeek-V3 (arXiv 2412.19437, sections 3.2-3.3): 2,048 H800s, PP 16 with DualPipe, EP 64 over 8
nodes, ZeRO-1 data parallelism over 128, no TP; FP8 GEMMs, AdamW moments in BF16 with FP32
master weights, activations cached in FP8, RMSNorm and SwiGLU recomputed. The weights are counted
here by hand from its config.json (Hugging Face deepseek-ai/DeepSeek-V3: h 7,168, 61 layers of
which the first 3 dense, MLA q_lora_rank 1,536, kv_lora_rank 512, 128 heads of 128 + 64 rope
dims and 128 value dims, 256 routed experts and 1 shared of 2,048, dense FFN 18,432, vocabulary
129,280, untied)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

H, L, DENSE, MOE = 7168, 61, 3, 58
MLA = (  # 187,105,280
    H * 1536  # q down
    + 1536 * 128 * (128 + 64)  # q up
    + H * (512 + 64)  # kv down, with the shared rope key
    + 512 * 128 * (128 + 128)  # kv up: keys and values
    + 128 * 128 * H  # output
)
EXPERT = 3 * H * 2048  # gate, up, down: 44,040,192
DENSE_MLP = 3 * H * 18432
EMBEDDING = 129280 * H  # 926,679,040


def test_deepseek_v3_published_layout_weights_by_hand(run_json: Callable[..., Any]) -> None:
    """61 layers on 16 stages: the 14 middle stages hold 4, the ends 3 (first) and 2 (last);
    DualPipe's first rank holds both ends, 5 layers with the embedding, the output layer and the
    MTP module (a layer and its 2h x h projection), more than the others' 2 x 4 layers. A layer,
    averaged over the model as the planner counts it: MLA + (58/61) x (the shared expert + the
    256 x h router) + (3/61) x the dense MLP, and (58/61) x 256 experts / 64 on a rank. Weights in
    BF16: 2 B each."""
    layer = MLA + MOE / L * (EXPERT + 256 * H) + DENSE / L * DENSE_MLP + MOE / L * 256 * EXPERT / 64
    weights_b = 2 * (5 * layer + 2 * EMBEDDING + layer + 2 * H * H)
    out = run_json(
        "plan",
        "--model",
        "deepseek-v3",
        "--hardware",
        "h800",
        "--devices",
        "2048",
        "--global-batch",
        "15360",
        "--seq-len",
        "4096",
        "--precision",
        "fp8",
        "--set",
        "optimizer_bytes=8",
        "--set",
        "ep_dispatch=deepep",
        "--set",
        "fp8_activation_cache=true",
        "--evaluate",
        "tp=1,pp=16,sched=dualpipe,ep=64,dp=128,zero=1,mb=1,recompute=layernorm_mla_up_proj_moe_act",
        "--json",
    )
    assert out["memory_gb"]["weights"] == pytest.approx(weights_b / 1e9, rel=1e-6)
