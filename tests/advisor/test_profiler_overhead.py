"""The profiler-overhead guard: CUPTI buffer work inside a host-bound gap is the profiler's, not the
job's (times in us; the host-bound trace of test_rules.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analysis.api import analyze

from .. import synth
from .test_rules import US, N, _input_bound


def _overhead(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "overhead", "name": name, "pid": -1, "tid": 0, "ts": ts, "dur": dur}


def _run(tmp_path: Path, events: list[dict[str, Any]]):
    return analyze(stepscope.load(synth.write(tmp_path / "t.json", events)))


def test_profiler_overhead_is_taken_out_of_the_host_bound_saving(tmp_path: Path) -> None:
    """Step k: CPU span [100k, 100k+100); a 58 us GEMM launched at 100k+41 runs [100k+42, 100k+100).
    Windows run from GEMM start to GEMM start, so windows 1-5 end in a 42 us host-bound gap
    [100k+100, 100k+142) and the last has none: gross host-bound 5 x 42 / 6 = 35 us per step.
    A 30 us ``Activity Buffer Request`` at 100k+5 lies in that gap for k >= 1 (before the first
    window for k = 0): in the CPU steps 30 us each, 25 us per step in idle, all of it host-bound;
    net host-bound 35 - 25 = 10 us, saving mid 0.6 x 10 us."""
    ev = _input_bound(0) + [_overhead("Activity Buffer Request", 100 * k + 5, 30) for k in range(N)]
    a = _run(tmp_path, ev)
    po = a.ranks[0].extras["profiler_overhead"]
    assert po.events == N and po.overhead_ns == pytest.approx(30 * US)
    by_id = {f.id: f for f in a.findings}
    f = by_id["cpu.host_bound"]
    assert f.evidence["idle_host_bound_ns"] == pytest.approx(35 * US)
    assert f.evidence["idle_host_bound_net_ns"] == pytest.approx(10 * US)
    assert f.saving.mid_ns == 6_000  # 0.6 x 10 us
    guard = by_id["cpu.profiler_overhead"]
    assert guard.saving_method == "none" and guard.evidence["profiler_overhead_idle_ns"] == pytest.approx(25 * US)


def test_lazy_function_loading_is_the_jobs_own(tmp_path: Path) -> None:
    ev = _input_bound(0) + [_overhead("Lazy Function Loading", 100 * k + 5, 30) for k in range(N)]
    a = _run(tmp_path, ev)
    po = a.ranks[0].extras["profiler_overhead"]
    assert po.events == 0 and po.lazy_loading_ns == pytest.approx(30 * US)
    assert "cpu.profiler_overhead" not in {f.id for f in a.findings}
