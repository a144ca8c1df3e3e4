"""Tiny synthetic Kineto traces with hand-computable answers. Times are given in microseconds."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

_corr = [1000]


def step(name: str, ts: float, dur: float, tid: int = 1) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "user_annotation",
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"External id": 1},
    }


def cpu(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op", **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": dict(args)}


def launch(
    kernel: str,
    launch_ts: float,
    ts: float,
    dur: float,
    stream: int = 7,
    cat: str = "kernel",
    ext: int = -1,
    tid: int = 1,
    **args: Any,
) -> list[dict[str, Any]]:
    """A runtime launch call at ``launch_ts`` and the device work it launched."""
    _corr[0] += 1
    c = _corr[0]
    rt_name = "cudaMemcpyAsync" if cat == "gpu_memcpy" else "cudaLaunchKernel"
    rt = {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": rt_name,
        "pid": 1,
        "tid": tid,
        "ts": launch_ts,
        "dur": 2,
        "args": {"correlation": c, "External id": ext},
    }
    k = {
        "ph": "X",
        "cat": cat,
        "name": kernel,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": stream, "correlation": c, "External id": ext, **args},
    }
    return [rt, k]


def write(path: Path, events: list[dict[str, Any]], rank: int | None = 0, gz: bool = False, **header: Any) -> Path:
    doc: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    doc.update(header)
    doc["traceEvents"] = events
    doc["traceName"] = str(path)
    text = json.dumps(doc, indent=2)
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


def basic_events() -> list[dict[str, Any]]:
    """One step; see test_breakdown.py for the hand computation."""
    ev = [step("ProfilerStep#1", 0, 1000)]
    ev += launch("sm90_xmma_gemm_bf16bf16_bf16f32", 10, 100, 200, stream=7)
    ev += launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 20, 250, 200, stream=20)
    ev += launch("Memcpy HtoD (Pinned -> Device)", 30, 400, 100, stream=7, cat="gpu_memcpy")
    ev += launch("void at::native::vectorized_elementwise_kernel<4>", 550, 600, 100, stream=7)
    return ev


def free_port() -> int:
    """A port nobody listens on now (two test runs on one machine must not share a rendezvous)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
