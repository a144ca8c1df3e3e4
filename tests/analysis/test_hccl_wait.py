"""The rank the others wait for, from HCCL's own timing: msprof-analyze's real two-rank cluster
output (``cluster_communication.json``, op -> rank -> timing) split back into the per-rank
``communication.json`` files torch_npu writes, beside a timeline each. Expected figures are summed
here from the raw file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analysis.api import analyze
from stepscope.analysis.cluster.hccl_wait import HcclWaitView

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CLUSTER = FIXTURES / "ascend/cluster_communication.json"
TIMELINE = FIXTURES / "traces/msprof-analyze/test/ut/advisor/timeline_advice/trace_view.json"


def _per_rank() -> dict[int, dict[str, Any]]:
    """{rank: that rank's communication.json}: {"step": {"collective": {"op@group": timing}}}."""
    out: dict[int, dict[str, Any]] = {}
    for steps in json.loads(CLUSTER.read_text()).values():
        for step, ops in steps.items():
            for op, ranks in ops.items():
                for rank, timing in ranks.items():
                    out.setdefault(int(rank), {}).setdefault(step, {"collective": {}})["collective"][op] = timing
    return out


def _profiles(root: Path, per_rank: dict[int, dict[str, Any]]) -> Path:
    for rank, doc in per_rank.items():
        d = root / f"host_{rank}_ascend_pt"
        (d / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
        (d / f"profiler_info_{rank}.json").write_text("{}")
        shutil.copy(TIMELINE, d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
        (d / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(json.dumps(doc))
    return root


def _wait_ms(doc: dict[str, Any]) -> float:
    return sum(t["Communication Time Info"]["Wait Time(ms)"] for s in doc.values() for t in s["collective"].values())


def test_the_late_rank_is_the_one_that_waits_least(tmp_path: Path) -> None:
    """Rank 0 waited 116 + 27 ms in two broadcasts, rank 1 almost nothing: rank 0 waited for
    rank 1, which is late."""
    per_rank = _per_rank()
    assert sorted(per_rank) == [0, 1]
    res = analyze(stepscope.load(_profiles(tmp_path, per_rank)))
    assert res.cluster is not None
    view = res.cluster.extras["hccl_wait"]
    assert isinstance(view, HcclWaitView)
    assert view.late_ranks == (1,)
    first, second = view.ranks
    assert first.rank == 1 and second.rank == 0
    w0, w1 = _wait_ms(per_rank[0]) * 1e6, _wait_ms(per_rank[1]) * 1e6
    assert w0 > 100e6 > 1e3 > w1  # the file's figures, as described above
    assert first.wait_ns == pytest.approx(w1, abs=2) and second.wait_ns == pytest.approx(w0, abs=2)
    assert first.waited_for_ns == pytest.approx(w0 - w1, abs=4) and second.waited_for_ns == 0.0


def test_ranks_that_wait_alike_name_nobody(tmp_path: Path) -> None:
    per_rank = _per_rank()
    per_rank[1] = json.loads(json.dumps(per_rank[0]))  # rank 1 now waits exactly as rank 0
    res = analyze(stepscope.load(_profiles(tmp_path, per_rank)))
    assert res.cluster is not None
    view = res.cluster.extras["hccl_wait"]
    assert isinstance(view, HcclWaitView) and view.late_ranks == ()
    assert all(r.waited_for_ns == 0.0 for r in view.ranks)


def test_the_terminal_report_names_the_late_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.cli import main

    assert main(["analyze", str(_profiles(tmp_path, _per_rank())), "--workers", "1"]) == 0
    assert "HCCL's own timing: the others wait for rank 1 (143.06 ms per step)" in capsys.readouterr().out
