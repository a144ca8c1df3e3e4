"""MaxText's ``remat_policy: qkv_proj_offloaded``: the q, k, v projections go to host memory, the
device keeps only each layer's input (as full recompute does), the compute is save_qkv_proj's, and
the q, k, v bytes cross the host link twice. Expected values by hand on Llama 3 8B."""

from __future__ import annotations

import pytest

from stepscope.planner.cost import evaluate
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware, model
from stepscope.planner.strategy import parse_strategy

JOB = make_job(model("llama3-8b"), hardware("tpu-v5e"), 16, 16, 32, 2048)  # 32 / dp 16 = one micro-batch of 2


def _eval(policy: str) -> dict[str, float]:
    r = evaluate(JOB, parse_strategy(f"tp=1,dp=16,zero=3,mb=2,recompute={policy}"))
    return {k: float(v[0]) for k, v in r.items()}


def test_device_memory_is_full_recomputes_and_compute_is_save_qkv_projs() -> None:
    off, full, qkv = _eval("qkv_proj_offloaded"), _eval("full"), _eval("save_qkv_proj")
    assert off["activations_gb"] == pytest.approx(full["activations_gb"])
    assert off["activations_gb"] < qkv["activations_gb"]
    assert off["compute_s"] == pytest.approx(qkv["compute_s"])


def test_the_qkv_bytes_cross_the_host_link_twice() -> None:
    off = _eval("qkv_proj_offloaded")
    # save_qkv_proj keeps 8 B per token and layer / h, the block input 2 of them: 6 h B of q, k, v
    # per token and layer (the prior's MHA count), 2 x 2048 tokens, 32 layers, one micro-batch,
    # out and back over the catalog-less host link's 25 GB/s
    raw_s = 2 * (6 * 4096) * (2 * 2048) * 32 / 25e9
    assert off["offload_s"] + off["hidden_offload_s"] == pytest.approx(raw_s)
    assert _eval("save_qkv_proj")["offload_s"] == 0.0
