"""Physical invariants of the cost model over whole search spaces: every valid configuration (TP
and EP overlap allowed) of a model on a device is evaluated and checked.

- Structure: every part finite and >= 0, the step the sum of its parts, memory the sum of its
  parts, MFU <= HFU < 1, tokens/s x step x devices = the batch's tokens, the transfers hidden
  under compute no more than the compute (+ host wait).
- Monotonicity: faster attention (x1.5), more DP overlap (1.0), faster links (all, or the
  inter-node tier only, x2) never make a step slower. Faster GEMMs (x1.5) may, by at most
  GEMM_SLACK: a DP/FSDP transfer hides under its own window (the last backward; under ZeRO-2 each
  micro-batch's), which shrinks with the compute, while the TP collectives fused with the GEMMs
  lose their cover too (BENCHMARKS.md, "Planner invariants": at most 0.82%, ZeRO-2 at micro-batch
  1 with full TP overlap).

A few spaces run by default; the whole catalog on three devices at two sizes is ``slow``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from stepscope.catalog.models import catalog
from stepscope.errors import StepscopeError
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.search import hardware, model, space
from stepscope.planner.window import HIDDEN_PARTS

TIME_PARTS = ("compute_s", "tp_s", "dp_s", "ep_s", "cp_s", "bubble_s", "pp_p2p_s", "optimizer_s", "offload_s", "host_s")
MEMORY_PARTS = ("weights_gb", "grads_gb", "optimizer_gb", "activations_gb", "buffers_gb", "reserve_gb")
# a change that makes the job faster, as a calibration or a setting would make it
FASTER = (
    ("attn_scale", 1.5),
    ("measured_dp_overlap", 1.0),
    ("comm_scale", 0.5),
    ("inter_scale", 0.5),
)
GEMM_SLACK = 1e-2
SIZES = ((64, 256, 4096), (512, 1024, 8192))  # devices, sequences per step, tokens per sequence


def broken_structure(r: dict[str, np.ndarray], tokens: float, devices: int) -> list[str]:
    """The structural invariants the results break (none: an empty list)."""
    broken = []
    for k, v in r.items():
        v = np.asarray(v)
        if v.dtype.kind == "f" and not np.all(np.isfinite(v)):
            broken.append(f"{k} not finite")
        if v.dtype.kind == "f" and k != "headroom_gb" and np.any(v < 0):
            broken.append(f"{k} negative")
    if not np.allclose(sum(r[k] for k in TIME_PARTS), r["step_s"], rtol=1e-9):
        broken.append("step != sum of parts")
    if not np.allclose(sum(r[k] for k in MEMORY_PARTS), r["total_gb"]):
        broken.append("memory != sum of parts")
    if np.any(r["mfu"] > r["hfu"] + 1e-12) or np.any(r["hfu"] >= 1):
        broken.append("MFU > HFU or HFU >= 1")
    if not np.allclose(r["tokens_per_s_per_device"] * r["step_s"] * devices, tokens):
        broken.append("tokens")
    # the transfers share one window: together they hide no more than the compute (+ host wait)
    if np.any(sum(r[f"hidden_{p}_s"] for p in HIDDEN_PARTS) > (r["compute_s"] + r["host_s"]) * (1 + 1e-9)):
        broken.append("hidden > compute")
    return broken


def _job(name: str, hw: str, devices: int, batch: int, seq: int, **settings: object) -> Job:
    try:
        return make_job(
            model(name), hardware(hw), devices, 8, batch, seq, tp_overlap="full", ep_overlap=True, **settings
        )
    except StepscopeError as exc:  # e.g. fp8 or a model that does not fit the device's catalog entry
        pytest.skip(f"{name} on {hw}: {exc}")


def check_space(job: Job) -> None:
    strategies = space(job)
    base = evaluate(job, strategies)
    assert broken_structure(base, job.global_batch * job.seq_len, job.devices) == []
    for field, value in FASTER:
        other = job.calibrated(**{field: value})
        ratio = evaluate(other, strategies)["step_s"] / base["step_s"]
        assert ratio.max() <= 1 + 1e-9, f"{field}={value}: {int(np.sum(ratio > 1 + 1e-9))} configurations slower"
    ratio = evaluate(job.calibrated(gemm_scale=1.5), strategies)["step_s"] / base["step_s"]
    assert ratio.max() <= 1 + GEMM_SLACK


@pytest.mark.parametrize(
    ("name", "hw", "settings"),
    [
        ("llama3-8b", "h100", {}),
        ("deepseek-v3", "h100", {}),  # MoE, MLA, the DualPipe-free default schedules
        ("llama3-8b", "tpu-v5p", {}),  # static memory, vector work beside the matrix units
        # nanotron's gather on the host, a measured attention kernel, Megatron's re-gathers
        ("llama3-8b", "h100", {"zero_gather_copy_us": 10, "attention_kernel": "fa2", "sp_regather": True}),
    ],
)
def test_invariants_hold_over_a_search_space(name: str, hw: str, settings: dict[str, object]) -> None:
    check_space(_job(name, hw, *SIZES[0], **settings))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "hw", "size"), list(itertools.product(catalog(), ("h100", "a100", "tpu-v5p"), SIZES)))
def test_invariants_hold_over_the_catalog(name: str, hw: str, size: tuple[int, int, int]) -> None:
    check_space(_job(name, hw, *size))
