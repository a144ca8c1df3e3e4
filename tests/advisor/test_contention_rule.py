"""cpu.contention: a launch call stalling for many times the median while the device idles (times
in us; 6 steps of 1000 us)."""

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


def _steps(stall_us: float, busy: bool) -> list[dict[str, Any]]:
    """Step k at t = 1000k: ten 2 us launch calls (synth.launch), the first nine launching 50 us
    kernels back to back from t+10; the tenth call, at t+600, lasts ``stall_us`` and launches a
    kernel that starts right after it returns. ``busy``: a long kernel launched at t+1 keeps the
    device busy through the stall (a full launch queue), else the device idles during it."""
    ev = []
    for k in range(N):
        t = 1000 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 1000))
        if busy:
            ev += synth.launch(GEMM, t + 1, t + 460, 500, stream=9)
        for j in range(9):
            ev += synth.launch(GEMM, t + 2 + j, t + 10 + 50 * j, 50)
        rt, kern = synth.launch(GEMM, t + 600, t + 601 + stall_us, 50)
        rt["dur"] = stall_us
        ev += [rt, kern]
    return ev


def _run(tmp_path: Path, events: list[dict[str, Any]]):
    return analyze(stepscope.load(synth.write(tmp_path / "t.json", events)))


def test_a_stall_with_the_device_idle_is_contention(tmp_path: Path) -> None:
    """The median call is 2 us; the 300 us call is a stall (>= 10x and >= 50 us). The device is
    idle from t+460 (the ninth kernel's end) to t+901: the whole call [t+600, t+900) is idle."""
    a = _run(tmp_path, _steps(300, busy=False))
    c = a.ranks[0].extras["contention"]
    assert c.launch_call_p50_ns == 2 * US
    assert c.stalled_calls == 1 and c.stalled_ns == pytest.approx(298 * US)
    f = {x.id: x for x in a.findings}["cpu.contention"]
    assert f.evidence["stalled_idle_ns"] == pytest.approx(300 * US)
    assert f.saving.mid_ns == 240_000  # 0.8 x 300 us


def test_a_stall_with_the_device_busy_is_a_full_queue(tmp_path: Path) -> None:
    """A 500 us kernel on another stream covers [t+460, t+960): the stall cost nothing."""
    a = _run(tmp_path, _steps(300, busy=True))
    assert a.ranks[0].extras["contention"].stalled_calls == 1
    assert "cpu.contention" not in {x.id for x in a.findings}


def test_short_calls_are_not_stalls(tmp_path: Path) -> None:
    assert _run(tmp_path, _steps(15, busy=False)).ranks[0].extras["contention"].stalled_calls == 0
