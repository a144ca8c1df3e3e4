"""Leading warm-up steps: detected (> 3x the median of the rest) or forced (--skip-steps), by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import stepscope
from stepscope.analysis.api import analyze
from stepscope.analysis.config import AnalyzeConfig
from stepscope.analysis.steps.warmup import warmup_count
from stepscope.cli import main
from stepscope.errors import ConfigError

from .. import synth

US = 1000


def _steps(tmp_path: Path, starts: list[int], durs: list[int]) -> Path:
    """Step i: CPU [starts[i] - 5, starts[i+1] - 5) (the last: 50 past its kernel), one kernel
    ``k{i}`` launched at starts[i] - 2 running [starts[i], starts[i] + durs[i]); the windows are
    [starts[i], starts[i+1]) and the last one ends at its kernel's end."""
    ev = []
    ends = [*starts[1:], starts[-1] + durs[-1] + 50]
    for i, (s, d) in enumerate(zip(starts, durs)):
        ev.append(synth.step(f"ProfilerStep#{i}", s - 5, ends[i] - s))
        ev += synth.launch(f"gemm_k{i}", s - 2, s, d)
    return synth.write(tmp_path / "t.json", ev)


# windows: 1000, 100, 100, 100 us
ONE = ([100, 1100, 1200, 1300], [900, 90, 90, 100])
# windows: 2000, 600, 100, 100, 100 us
TWO = ([100, 2100, 2700, 2800, 2900], [1900, 500, 90, 90, 100])


def test_counting_by_hand() -> None:
    # 1000 > 3 x median(100, 100, 100) = 300; then 100 > 300 fails
    assert warmup_count(np.array([1000, 100, 100, 100]), None) == 1
    # 2000 > 3 x median(600, 100, 100, 100) = 300; 600 > 3 x 100; 100 > 300 fails
    assert warmup_count(np.array([2000, 600, 100, 100, 100]), None) == 2
    # 250 > 3 x median(100, 90) = 285 fails
    assert warmup_count(np.array([250, 100, 90]), None) == 0
    assert warmup_count(np.array([100]), None) == 0  # one step is never warm-up
    assert warmup_count(np.array([100, 100, 100]), 2) == 2
    assert warmup_count(np.array([100, 100]), 5) == 1  # at least one step stays


def test_a_warmup_step_is_flagged_and_kept_out_of_statistics(tmp_path: Path) -> None:
    a = analyze(stepscope.load(_steps(tmp_path, *ONE)))
    r = a.ranks[0]
    assert [s.step_time_ns for s in r.steps] == [1000 * US, 100 * US, 100 * US, 100 * US]
    assert [s.warmup for s in r.steps] == [True, False, False, False]
    st = r.step_stats
    assert (st.count, st.warmup_steps, st.mean_ns, st.max_ns) == (3, 1, 100 * US, 100 * US)
    rs = a.summary.of(r.rank)
    assert (rs.steps, rs.warmup_steps, rs.total_step_time_ns, rs.mean_step_time_ns) == (3, 1, 300 * US, 100 * US)
    # the warm-up step's kernel is not among the top kernels; the others' share: 90 of 300 us
    names = {k.name: k for k in r.top_kernels}
    assert "gemm_k0" not in names and names["gemm_k1"].share_of_step_ratio == pytest.approx(90 / 300)
    assert any("warm-up" in w for w in a.warnings)


def test_two_warmup_steps_are_detected(tmp_path: Path) -> None:
    r = analyze(stepscope.load(_steps(tmp_path, *TWO))).ranks[0]
    assert [s.step_time_ns for s in r.steps] == [2000 * US, 600 * US, 100 * US, 100 * US, 100 * US]
    assert [s.warmup for s in r.steps] == [True, True, False, False, False]
    assert r.step_stats.count == 3 and r.step_stats.mean_ns == 100 * US


def test_skip_steps_forces_the_first_n_out(tmp_path: Path) -> None:
    trace = _steps(tmp_path, *ONE)
    r = analyze(stepscope.load(trace), AnalyzeConfig(skip_steps=2)).ranks[0]
    assert [s.warmup for s in r.steps] == [True, True, False, False]
    assert r.step_stats.count == 2
    r0 = analyze(stepscope.load(trace), AnalyzeConfig(skip_steps=0)).ranks[0]
    assert not any(s.warmup for s in r0.steps)
    assert r0.step_stats.mean_ns == (1000 + 100 + 100 + 100) / 4 * US
    with pytest.raises(ConfigError):
        AnalyzeConfig(skip_steps=-1)


def test_skip_steps_on_the_command_line(tmp_path: Path) -> None:
    trace = _steps(tmp_path, *ONE)
    out = tmp_path / "r.json"
    assert main(["analyze", str(trace), "-q", "--skip-steps", "3", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == "2.1"
    (rank,) = doc["ranks"]
    assert [s["warmup"] for s in rank["steps"]] == [True, True, True, False]
    assert rank["step_stats"]["count"] == 1 and rank["step_stats"]["warmup_steps"] == 3


def _ranks(tmp_path: Path) -> list[Path]:
    """Two ranks with the ONE layout, each step's kernel followed by an all-reduce [s + d, s + d + 5)."""
    out = []
    for rank in (0, 1):
        ev = []
        starts, durs = ONE
        ends = [*starts[1:], starts[-1] + durs[-1] + 50]
        for i, (s, d) in enumerate(zip(starts, durs)):
            ev.append(synth.step(f"ProfilerStep#{i}", s - 5, ends[i] - s))
            ev += synth.launch(f"gemm_k{i}", s - 2, s, d - 5)
            ev += synth.launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", s - 1, s + d - 5, 5, stream=20)
        out.append(synth.write(tmp_path / f"rank{rank}.json", ev, rank=rank))
    return out


def test_the_cluster_view_leaves_warmup_steps_out(tmp_path: Path) -> None:
    a = analyze([str(p) for p in _ranks(tmp_path)], workers=1)
    assert [[s.warmup for s in r.steps] for r in a.ranks] == [[True, False, False, False]] * 2
    assert a.cluster is not None
    # per rank the 3 steady steps (100 us each), renumbered 0..2; the 1000 us warm-up step is gone
    assert sorted((m.rank, m.step, m.step_ns) for m in a.cluster.matrix) == [
        (r, k, 100 * US) for r in (0, 1) for k in range(3)
    ]
    # one all-reduce instance per steady step is matched across the two ranks
    assert len(a.cluster.collectives) == 3
