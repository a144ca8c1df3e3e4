"""compute.mfu: the MFU decision tree as a finding, on the roofline test's hand-built H100 trace
(one 60 us step window)."""

from __future__ import annotations

from pathlib import Path

import pytest

import stepscope
from stepscope.analysis.api import analyze
from stepscope.analysis.config import AnalyzeConfig

from ..analysis.test_roofline import _mm_trace


def _findings(tmp_path: Path, mfu: float | None):
    cfg = AnalyzeConfig(model_flops_per_step=mfu * 60e-6 * 989.4e12) if mfu else AnalyzeConfig()
    return {f.id: f for f in analyze(stepscope.load(_mm_trace(tmp_path)), cfg).findings}


def test_a_low_mfu_says_where_to_look(tmp_path: Path) -> None:
    """25%: the low band; its failing check is the memory-bound ops (the 20 us add of 40 us kernel time)."""
    f = _findings(tmp_path, 0.25)["compute.mfu"]
    assert f.evidence["mfu"] == pytest.approx(0.25)
    assert f.title.startswith("MFU is 25%: low") and "fuse them" in f.title
    assert f.saving_method == "none" and f.saving.mid_ns == 0


def test_an_impossible_mfu_blames_the_input(tmp_path: Path) -> None:
    assert "impossible" in _findings(tmp_path, 2.5)["compute.mfu"].title


def test_no_model_flops_no_mfu_card(tmp_path: Path) -> None:
    assert "compute.mfu" not in _findings(tmp_path, None)
