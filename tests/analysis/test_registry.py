"""The analysis contract: a new per-rank analysis is a compute(ctx) + one registry line, and its result
reaches RankAnalysis.extras and the JSON report with nothing else touched."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from stepscope.analysis import registry
from stepscope.analysis.api import analyze
from stepscope.analysis.context import RankContext
from stepscope.analysis.results import RankAnalysis
from stepscope.report import json_report
from tests import synth


@dataclass(frozen=True)
class LongKernels:
    count: int
    total_ns: int


def long_kernels(ctx: RankContext) -> LongKernels:
    """Kernels of 100 us or more inside the steps."""
    d = ctx.data.dev
    dur = (d.end - d.ts)[(ctx.dev_step >= 0) & (d.end - d.ts >= 100_000)]
    return LongKernels(count=int(dur.size), total_ns=int(dur.sum()))


def _trace(tmp_path: Path) -> Path:
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev += synth.launch("gemm_a", 10, 100, 150)  # 150 us: long
    ev += synth.launch("gemm_b", 20, 300, 50)  # 50 us: short
    ev += synth.launch("gemm_c", 30, 400, 100)  # 100 us: long
    return synth.write(tmp_path / "t.json", ev)


def test_a_registered_analysis_reaches_the_rank_and_the_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        registry, "RANK_ANALYSES", (*registry.RANK_ANALYSES, registry.RankEntry("long_kernels", long_kernels))
    )
    result = analyze([str(_trace(tmp_path))], workers=1)
    (r,) = result.ranks
    assert r.extras["long_kernels"] == LongKernels(count=2, total_ns=250_000)
    doc = json.loads(json_report.render(result, {}))
    assert doc["ranks"][0]["extras"]["long_kernels"] == {"count": 2, "total_ns": 250_000}


def test_an_analysis_reads_the_results_listed_before_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclass(frozen=True)
    class Share:
        ratio: float

    def share(ctx: RankContext) -> Share:
        lk = ctx.result("long_kernels", LongKernels)
        return Share(lk.total_ns / sum(s.step_time_ns for s in ctx.steps))

    extra = (registry.RankEntry("long_kernels", long_kernels), registry.RankEntry("long_share", share))
    monkeypatch.setattr(registry, "RANK_ANALYSES", (*registry.RANK_ANALYSES, *extra))
    (r,) = analyze([str(_trace(tmp_path))], workers=1).ranks
    # the step's window: first kernel start 100 us to last end 500 us
    assert r.extras["long_share"] == Share(250 / 400)
    assert list(r.extras)[-2:] == ["long_kernels", "long_share"]  # registry order, after the built-in extras


def test_an_analysis_that_does_not_apply_leaves_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = registry.RankEntry("long_kernels", long_kernels, applies=lambda ctx: ctx.data.dev.xla is not None)
    monkeypatch.setattr(registry, "RANK_ANALYSES", (*registry.RANK_ANALYSES, entry))
    (r,) = analyze([str(_trace(tmp_path))], workers=1).ranks
    assert "long_kernels" not in r.extras and "xla" not in r.extras  # a PyTorch trace: no XLA view either


def test_every_built_in_field_comes_from_the_registry() -> None:
    identity = {"rank", "device", "path", "step_source", "extras"}
    fields = {f.name for f in dataclasses.fields(RankAnalysis)} - identity
    assert fields <= {e.name for e in registry.RANK_ANALYSES}


def test_a_result_that_is_not_a_dataclass_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        registry, "RANK_ANALYSES", (*registry.RANK_ANALYSES, registry.RankEntry("bad", lambda ctx: {"a": 1}))
    )
    with pytest.raises(TypeError, match="'bad' returned dict"):
        analyze([str(_trace(tmp_path))], workers=1)


@dataclass(frozen=True)
class NumpyCounts:
    count: np.int64
    per_kernel_ns: np.ndarray


def test_an_extra_holding_numpy_values_reaches_the_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def counts(ctx: RankContext) -> NumpyCounts:
        return NumpyCounts(count=np.int64(3), per_kernel_ns=np.array([150_000, 50_000, 100_000], dtype=np.int64))

    monkeypatch.setattr(registry, "RANK_ANALYSES", (*registry.RANK_ANALYSES, registry.RankEntry("counts", counts)))
    doc = json.loads(json_report.render(analyze([str(_trace(tmp_path))], workers=1), {}))
    assert doc["ranks"][0]["extras"]["counts"] == {"count": 3, "per_kernel_ns": [150_000, 50_000, 100_000]}


def test_the_json_fallback_refuses_what_is_not_numpy() -> None:
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        json.dumps({"a": {1}}, default=json_report.numpy_default)
