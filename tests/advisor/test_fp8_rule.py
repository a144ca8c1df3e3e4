"""compute.fp8_gemm: bf16 GEMMs dominating the step on a device with fp8 tensor cores (times in
us; 6 steps of 1000 us)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analysis.api import analyze

from .. import synth

US = 1000
N = 6
BF = "c10::BFloat16"


def _steps() -> list[dict[str, Any]]:
    """Each step: aten::mm on [8192, 8192] x [8192, 8192] bf16 launches a 600 us GEMM at t+2."""
    ev = []
    for k in range(N):
        t = 1000 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 1000))
        dims = {"External id": k + 1, "Input Dims": [[8192, 8192], [8192, 8192]], "Input type": [BF, BF]}
        ev.append(synth.cpu("aten::mm", t + 1, 5, **dims))
        ev += synth.launch("sm90_xmma_gemm_bf16bf16_bf16f32", t + 1.5, t + 2, 600, ext=k + 1)
    return ev


def _run(tmp_path: Path, device: str):
    p = synth.write(tmp_path / "t.json", _steps(), deviceProperties=[{"id": 0, "name": device}])
    return {f.id: f for f in analyze(stepscope.load(p)).findings}


def test_bf16_gemms_on_h100_get_the_fp8_card(tmp_path: Path) -> None:
    """H100 SXM (hardware.yaml): fp8 1978.9 x 0.709 against bf16 989.4 x 0.803 TFLOP/s, 1.766x.
    600 us of GEMM per step (windows 1000 us, the last 600: 64% of the mean step); the ceiling
    600 x (1 - 1/1.766) us, mid half of it."""
    f = _run(tmp_path, "NVIDIA H100 80GB HBM3")["compute.fp8_gemm"]
    speedup = (1978.9 * 0.709) / (989.4 * 0.803)
    assert f.evidence["fp8_speedup"] == pytest.approx(speedup)
    assert f.evidence["bf16_gemm_ns"] == pytest.approx(600 * US)
    assert f.saving.high_ns == pytest.approx(600 * US * (1 - 1 / speedup), abs=1)
    assert f.saving_method == "roofline"


def test_a_device_without_fp8_gets_none(tmp_path: Path) -> None:
    assert "compute.fp8_gemm" not in _run(tmp_path, "NVIDIA A100-SXM4-80GB")
