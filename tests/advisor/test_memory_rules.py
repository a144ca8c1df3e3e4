"""Memory findings on hand-built traces: capacity, the pool's unused share at its peak, driver
allocator calls inside the steps (times in us; 6 steps of 1000 us)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analysis.api import analyze

from .. import synth
from ..trace.test_memory_events import mem

US = 1000
GB = 10**9
N = 6
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 80 * GB}


def _steps(allocated_gb: float, reserved_gb: float, free_us: float = 0) -> list[dict[str, Any]]:
    """Step k at t = 1000k: a GEMM launched at t+1 runs [t+2, t+602); in step 2 the allocator
    reaches ``reserved_gb`` reserved with ``allocated_gb`` allocated (1 GB / 2 GB before);
    ``free_us``: a cudaFree of that length at t+700 in every step (in the idle gap up to the next
    step's GEMM at t+1002)."""
    ev = []
    for k in range(N):
        t = 1000 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 1000))
        ev += synth.launch("sm90_xmma_gemm_bf16bf16_bf16f32", t + 1, t + 2, 600)
        if free_us:
            ev.append(synth.cpu("cudaFree", t + 700, free_us, cat="cuda_runtime"))
    ev += [mem(100, GB, GB, 2 * GB), mem(2100, int(allocated_gb * GB), int(allocated_gb * GB), int(reserved_gb * GB))]
    return ev


def _run(tmp_path: Path, events: list[dict[str, Any]]):
    path = synth.write(tmp_path / "t.json", events, deviceProperties=[H100])
    return analyze(stepscope.load(path))


def test_memory_figures_by_hand(tmp_path: Path) -> None:
    """Peak reserved 76 GB of 80: 0.95; at that event 50 GB allocated: 1 - 50/76 unused."""
    d = _run(tmp_path, _steps(50, 76)).ranks[0].extras["memory"].devices[0]
    assert (d.peak_allocated_bytes, d.peak_reserved_bytes, d.capacity_bytes) == (50 * GB, 76 * GB, 80 * GB)
    assert d.peak_used_ratio == pytest.approx(0.95)
    assert d.unallocated_at_peak_ratio == pytest.approx(1 - 50 / 76)


def test_near_capacity_without_fragmentation(tmp_path: Path) -> None:
    """70 of 76 GB in use at the peak: 7.9% unused, under the 20% bar; 95% of capacity, over 90%."""
    by_id = {f.id: f for f in _run(tmp_path, _steps(70, 76)).findings}
    assert "memory.near_capacity" in by_id and "memory.fragmentation" not in by_id
    f = by_id["memory.near_capacity"]
    assert f.saving_method == "none" and f.saving.mid_ns == 0
    assert f.evidence["memory_peak_used_gb"] == pytest.approx(76)


def test_fragmentation_near_capacity(tmp_path: Path) -> None:
    ids = {f.id for f in _run(tmp_path, _steps(50, 76)).findings}
    assert {"memory.near_capacity", "memory.fragmentation"} <= ids


def test_a_roomy_device_gets_no_memory_finding(tmp_path: Path) -> None:
    """30 GB reserved of 80 (38%), 40% of it unused: fragmentation costs nothing with room to spare."""
    ids = {f.id for f in _run(tmp_path, _steps(18, 30)).findings}
    assert not any(i.startswith("memory.") for i in ids)


def test_allocator_calls_in_idle_gaps(tmp_path: Path) -> None:
    """A 100 us cudaFree at t+700 lies in the idle gap [t+602, t+1002) of steps 1-5; the last window
    ends at its GEMM's end (t+602), so its call is outside: mean 5 x 100 / 6 us per step, of a mean
    step of (5 x 1000 + 600) / 6 us (8.9%, over the 3% bar); saving mid 0.9 of it."""
    a = _run(tmp_path, _steps(18, 30, free_us=100))
    m = a.ranks[0].extras["memory"]
    assert m.allocator_calls == 1 and m.allocator_ns == pytest.approx(100 * US)
    f = {x.id: x for x in a.findings}["memory.allocator_calls"]
    assert f.evidence["allocator_idle_ns"] == pytest.approx(5 * 100 * US / 6)
    assert f.saving.mid_ns == 75_000  # 0.9 x 83,333.3 ns
