"""The per-tensor optimizer: the dispatch analysis's counts and the advisor's finding, by hand
(times in us; 6 steps of 1000 us of a fixed pattern)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analysis.api import analyze

from .. import synth

US = 1000
N = 6
OPT = "Optimizer.step#Adam.step"


def _steps(n_ops: int, op_us: float, device: bool) -> list[dict[str, Any]]:
    """Step k at t = 1000k: a 5 us aten::addmm at t+1 (on a device: launching a 400 us GEMM at
    t+2); the optimizer range [t+450, t+450+3n) holds ``n_ops`` operators, operator j at t+450+3j
    lasting ``op_us`` (on a device: each launches a 1 us kernel at t+452+3j)."""
    ev = []
    for k in range(N):
        t = 1000 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 1000))
        ev.append(synth.cpu("aten::addmm", t + 1, 5))
        if device:
            ev += synth.launch("sm90_xmma_gemm_bf16bf16_bf16f32", t + 1.5, t + 2, 400)
        ev.append(synth.cpu(OPT, t + 450, 3 * n_ops, cat="user_annotation"))
        for j in range(n_ops):
            ev.append(synth.cpu("aten::mul_", t + 450 + 3 * j, op_us))
            if device:
                ev += synth.launch("vectorized_elementwise_kernel", t + 450.5 + 3 * j, t + 452 + 3 * j, 1)
    return ev


def _run(tmp_path: Path, events: list[dict[str, Any]]):
    return analyze(stepscope.load(synth.write(tmp_path / "t.json", events)))


def test_dispatch_counts_on_a_device_rank(tmp_path: Path) -> None:
    """Per step: 151 operators (addmm + 150 mul_; the launch calls are runtime rows, not operators),
    all under 10 us; 150 in the optimizer, median 2.8 us; the optimizer's device work spans from the
    first kernel (t+452) to the end of the last (t+452+447+1): 448 us."""
    a = _run(tmp_path, _steps(150, 2.8, device=True))
    d = a.ranks[0].extras["dispatch"]
    assert [(s.ops, s.tiny_ops, s.optimizer_ops) for s in d.steps] == [(151, 151, 150)] * N
    assert [s.optimizer_ns for s in d.steps] == [448 * US] * N
    assert d.optimizer_op_p50_ns == 2800


def test_per_tensor_optimizer_is_found_on_a_device_rank(tmp_path: Path) -> None:
    """Windows: 1000 us, the last 898 (t+2 to t+900); optimizer 448 us; saving mid 0.7 x 448 us."""
    a = _run(tmp_path, _steps(150, 2.8, device=True))
    f = {x.id: x for x in a.findings}["cpu.optimizer_per_tensor"]
    assert f.evidence["optimizer_ns"] == pytest.approx(448 * US)
    assert f.evidence["step_ns"] == pytest.approx((5 * 1000 + 898) * US / 6)
    assert f.saving.mid_ns == 313_600  # 0.7 x 448,000 ns
    assert f.saving_method == "heuristic"


def test_per_tensor_optimizer_is_found_on_a_cpu_rank(tmp_path: Path) -> None:
    """No device: the optimizer holds its host range, 3 x 150 = 450 us of each 1000 us step."""
    a = _run(tmp_path, _steps(150, 2.0, device=False))
    f = {x.id: x for x in a.findings}["cpu.optimizer_per_tensor"]
    assert f.evidence["optimizer_ns"] == pytest.approx(450 * US)
    assert f.evidence["optimizer_ops"] == 150
    assert f.saving.mid_ns == 315_000  # 0.7 x 450,000 ns


@pytest.mark.parametrize(("n_ops", "op_us"), [(4, 100.0), (150, 2.8)], ids=["foreach", "per_tensor_but_small"])
def test_a_foreach_or_negligible_optimizer_is_not_a_finding(tmp_path: Path, n_ops: int, op_us: float) -> None:
    """Four 100 us operators (foreach/fused) are not per-tensor; 150 tiny ones over a step ten
    times longer (steps of 10 ms: 450 us is 4.5%, under the 5% bar) are not worth a change."""
    ev = _steps(n_ops, op_us, device=False)
    if n_ops == 150:  # stretch each step to 10 ms
        for e in ev:
            e["ts"] = e["ts"] * 10 if e["name"].startswith("ProfilerStep") else e["ts"] + 9000 * (e["ts"] // 1000)
            if e["name"].startswith("ProfilerStep"):
                e["dur"] = 10_000
    ids = {x.id for x in _run(tmp_path, ev).findings}
    assert "cpu.optimizer_per_tensor" not in ids
