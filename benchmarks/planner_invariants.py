"""Physical invariants of the planner's cost model over every catalog model's whole search space.

    python benchmarks/planner_invariants.py [--models llama3-8b,deepseek-v3] [--hardware h100,tpu-v5p]
                                            [--zero-gather-copy-us 10] [--attention-kernel fa2]

For each model x device x size (64 devices, 256 x 4k tokens; 512 devices, 1024 x 8k), every valid
configuration (TP and EP overlap allowed) is evaluated and checked:
- structure: every part finite and >= 0, the step the sum of its parts, memory the sum of its
  parts, MFU <= HFU < 1, tokens/s x step x devices = the batch's tokens, the transfers hidden
  under compute no more than the compute (+ host wait);
- monotonicity: faster GEMMs or attention (x1.5), more DP overlap (1.0), faster links (all, or
  inter-node only, x2) never make a step slower. Printed: the worst ratio new step / old step
  (<= 1 holds the invariant) and how many configurations exceed it by more than 1e-9.
One JSON line per model, device and size. Takes about 2 minutes for the catalog on 3 devices.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json

import numpy as np

from stepscope.catalog.models import catalog
from stepscope.errors import StepscopeError
from stepscope.planner.attention import KERNELS
from stepscope.planner.cost import evaluate
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware, model, space
from stepscope.planner.window import HIDDEN_PARTS

TIME_PARTS = ("compute_s", "tp_s", "dp_s", "ep_s", "cp_s", "bubble_s", "pp_p2p_s", "optimizer_s", "offload_s", "host_s")
MEMORY_PARTS = ("weights_gb", "grads_gb", "optimizer_gb", "activations_gb", "buffers_gb", "reserve_gb")
FASTER = (("gemm_scale", 1.5), ("attn_scale", 1.5), ("dp_overlap", 1.0), ("comm_scale", 0.5), ("inter_scale", 0.5))


def structure(r: dict[str, np.ndarray], tokens: float, devices: int) -> list[str]:
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(catalog()))
    ap.add_argument("--hardware", default="h100,a100,tpu-v5p")
    ap.add_argument(
        "--zero-gather-copy-us",
        type=float,
        default=0.0,
        help="host us per tensor and rank of a ZeRO-1/2 weight gather (nanotron's preset: 10)",
    )
    ap.add_argument(
        "--attention-kernel",
        default="",
        choices=("", *KERNELS),
        help="the measured attention kernel (Hopper devices; data/attention_kernels.yaml)",
    )
    ap.add_argument(
        "--sp-regather",
        action="store_true",
        help="count sequence parallelism's backward re-gathers (the megatron and nanotron presets)",
    )
    args = ap.parse_args()
    for mname, hname in itertools.product(args.models.split(","), args.hardware.split(",")):
        for devices, batch, seq in ((64, 256, 4096), (512, 1024, 8192)):
            try:
                job = make_job(
                    model=model(mname),
                    hw=hardware(hname),
                    devices=devices,
                    devices_per_node=8,
                    global_batch=batch,
                    seq_len=seq,
                    zero_gather_copy_s=args.zero_gather_copy_us * 1e-6,
                    attention_kernel=args.attention_kernel,
                    sp_regather=args.sp_regather,
                )
                strategies = space(job, tp_overlap=1, ep_overlap=True)
            except StepscopeError as e:
                print(json.dumps({"model": mname, "hardware": hname, "devices": devices, "skipped": str(e)}))
                continue
            base = evaluate(job, strategies)
            out: dict[str, object] = {
                "model": mname,
                "hardware": hname,
                "devices": devices,
                "configs": len(base["step_s"]),
                "structure_broken": structure(base, batch * seq, devices),
            }
            for field, value in FASTER:
                ratio = evaluate(dataclasses.replace(job, **{field: value}), strategies)["step_s"] / base["step_s"]
                out[f"{field}={value}"] = {
                    "worst": round(float(ratio.max()), 4),
                    "slower": int(np.sum(ratio > 1 + 1e-9)),
                }
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
