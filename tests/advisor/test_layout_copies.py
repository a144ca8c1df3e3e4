"""compute.layout_copies: on a hand-built trace, and on the real Qwen1.5 H100 inference trace
against an independent reading of its JSON (kernels launched, inside the CPU step, by the ops that
only move data)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analysis.api import analyze

from .. import synth

US = 1000
N = 6
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "TraceLens" / "tests" / "traces"
LAYOUT = {"aten::copy_", "aten::contiguous", "aten::clone", "aten::cat", "aten::stack", "aten::_to_copy", "aten::to"}


def _steps(copy_us: float) -> list[dict[str, Any]]:
    """Each 1000 us step: aten::mm launches a 700 us GEMM at t+2, then aten::contiguous launches a
    ``copy_us`` copy kernel right after it (ops linked to their kernels by External id)."""
    ev = []
    for k in range(N):
        t = 1000 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 1000))
        ext = 10 * k + 1
        ev.append(synth.cpu("aten::mm", t + 1, 3, **{"External id": ext}))
        ev += synth.launch("sm90_xmma_gemm_bf16bf16_bf16f32", t + 1.5, t + 2, 700, ext=ext)
        ev.append(synth.cpu("aten::contiguous", t + 5, 3, **{"External id": ext + 1}))
        ev += synth.launch("direct_copy_kernel_cuda", t + 5.5, t + 702, copy_us, ext=ext + 1)
    return ev


def _run(tmp_path: Path, events: list[dict[str, Any]]):
    return analyze(stepscope.load(synth.write(tmp_path / "t.json", events)))


def test_copies_are_found_with_their_kernel_time(tmp_path: Path) -> None:
    """Copy kernels of 100 us per step; windows 1000 us, the last one ends at its copy (800 us):
    mean step 966.7 us, 10.3%; saving mid 0.5 x 100 us."""
    f = {x.id: x for x in _run(tmp_path, _steps(100)).findings}["compute.layout_copies"]
    assert f.evidence["layout_copy_ns"] == pytest.approx(100 * US)
    assert f.evidence["step_ns"] == pytest.approx((5 * 1000 + 800) * US / 6)
    assert f.saving.mid_ns == 50_000


def test_a_few_copies_are_not_a_finding(tmp_path: Path) -> None:
    """20 us of 1000 (2%) is under the 5% bar."""
    assert "compute.layout_copies" not in {x.id for x in _run(tmp_path, _steps(20)).findings}


def _independent_copy_ns(path: Path) -> tuple[float, int]:
    """Kernel time per CPU step launched by the data-moving ops (kernel -> runtime call by
    correlation -> op by External id), from a plain json.load."""
    doc = json.load(gzip.open(path))
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in ev if e["name"].startswith("ProfilerStep#") and e.get("cat") == "user_annotation"]
    op = {e["args"]["External id"]: e["name"] for e in ev if e.get("cat") == "cpu_op" and "External id" in e["args"]}
    rt = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "cuda_runtime" and "correlation" in e["args"]}
    total = 0.0
    for k in (e for e in ev if e.get("cat") == "kernel"):
        r = rt.get(k["args"].get("correlation"))
        if r and any(s["ts"] <= r["ts"] < s["ts"] + s["dur"] for s in steps):
            if op.get(r["args"].get("External id")) in LAYOUT:
                total += k["dur"]
    return total * US / len(steps), len(steps)


def test_real_inference_trace_copies_match_an_independent_count() -> None:
    """Hugging Face Qwen1.5-0.5B generation on H100: the KV cache grows by torch.cat and copies,
    a fifth of the step."""
    path = FIXTURES / "h100" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    want, n = _independent_copy_ns(path)
    a = analyze(stepscope.load(path))
    assert len(a.ranks[0].steps) == n == 1
    f = {x.id: x for x in a.findings}["compute.layout_copies"]
    assert f.evidence["layout_copy_ns"] == pytest.approx(want, rel=1e-6)


def test_real_training_trace_without_many_copies_gets_none() -> None:
    a = analyze(stepscope.load(FIXTURES / "b200" / "eager_trace.json.gz"))
    assert "compute.layout_copies" not in {x.id for x in a.findings}
