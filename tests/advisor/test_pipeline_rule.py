"""parallel.pipeline_bubble: exposed send/receive time, by hand (times in us; 6 steps of 100 us)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analysis.api import analyze

from .. import synth

US = 1000
N = 6
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"


def _steps(kernel: str, wait_us: float) -> list[dict[str, Any]]:
    """Each 100 us step: a ``wait_us`` receive on stream 20 from t+2 (the stage waits for its
    neighbour), then a 60 us GEMM right after it, then an 8 us elementwise kernel."""
    ev = []
    for k in range(N):
        t = 100 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 100))
        ev += synth.launch(kernel, t + 1, t + 2, wait_us, stream=20)
        ev += synth.launch(GEMM, t + 1, t + 2 + wait_us, 60)
        ev += synth.launch("elementwise_kernel", t + 1, t + 62 + wait_us, 8)
    return ev


def _run(tmp_path: Path, events: list[dict[str, Any]]):
    return analyze(stepscope.load(synth.write(tmp_path / "t.json", events)))


def test_an_exposed_receive_is_a_pipeline_bubble(tmp_path: Path) -> None:
    """20 us of receive per step with nothing else running: exposed 20 us of each step (windows
    100 us, the last 88); mean step (5 x 100 + 88) / 6 = 98 us, 20.4%; saving mid 0.5 x 20 us."""
    a = _run(tmp_path, _steps("ncclDevKernel_SendRecv", 20))
    f = {x.id: x for x in a.findings}["parallel.pipeline_bubble"]
    assert f.evidence["exposed_p2p_ns"] == pytest.approx(20 * US)
    assert f.saving.mid_ns == 10_000
    assert f.group == "exposed_comm"  # never added to parallel.exposed_comm's saving


def test_an_exposed_all_reduce_is_not_a_bubble(tmp_path: Path) -> None:
    ids = {x.id for x in _run(tmp_path, _steps("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 20)).findings}
    assert "parallel.pipeline_bubble" not in ids and "parallel.exposed_comm" in ids


def test_a_short_receive_is_not_worth_a_change(tmp_path: Path) -> None:
    """3 us of each 100 us window (the last 71): 3.1%, under the 5% bar."""
    assert "parallel.pipeline_bubble" not in {
        x.id for x in _run(tmp_path, _steps("ncclDevKernel_SendRecv", 3)).findings
    }
