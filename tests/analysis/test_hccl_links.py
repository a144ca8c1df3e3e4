"""HCCL's links (``communication_matrix.json``) across ranks: local ranks mapped to global ones by
each rank's link to itself, the ``total`` entries read (not the top/middle/bottom ones they
include), and the slow link found. Hand-made files in torch_npu's layout; figures by hand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analysis.api import analyze
from stepscope.analysis.cluster.hccl_links import HcclLinkView
from stepscope.trace.ascend_matrix import read_hccl_links

TIMELINE = (
    Path(__file__).resolve().parents[1]
    / "fixtures/traces/msprof-analyze/test/ut/advisor/timeline_advice/trace_view.json"
)
#: global rank -> its rank in group "g1" (not the same order)
LOCAL = {0: 2, 1: 0, 2: 3, 3: 1}
#: global ring 0 -> 1 -> 2 -> 3 -> 0; MB and ms each rank's file reports for its outgoing link
MOVED = {0: (100.0, 5.0), 1: (100.0, 5.0), 2: (100.0, 20.0), 3: (100.0, 4.0)}


def _link(mb: float, ms: float, transport: str = "HCCS") -> dict[str, Any]:
    return {"Transport Type": transport, "Transit Size(MB)": mb, "Transit Time(ms)": ms, "Bandwidth(GB/s)": mb / ms}


def _matrix(rank: int) -> dict[str, Any]:
    me, nxt = LOCAL[rank], LOCAL[(rank + 1) % 4]
    mb, ms = MOVED[rank]
    total = {f"{me}-{me}": _link(10.0, 0.1, "LOCAL"), f"{me}-{nxt}": _link(mb, ms)}
    top1 = {f"{me}-{nxt}": _link(mb / 2, ms / 2)}  # part of the total: not to be added
    return {"step1": {"collective": {"allreduce-total@g1": total, "allreduce-top1@g1": top1}, "p2p": {}}}


def _profiles(root: Path, ranks: list[int]) -> Path:
    for rank in ranks:
        out = root / f"host_{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        out.mkdir(parents=True)
        (out.parent / f"profiler_info_{rank}.json").write_text("{}")
        shutil.copy(TIMELINE, out / "trace_view.json")
        (out / "communication_matrix.json").write_text(json.dumps(_matrix(rank)))
    return root


def test_links_by_global_rank_and_the_slow_one(tmp_path: Path) -> None:
    """Bandwidths: 100 MB / 5 ms = 20, 20, 100 / 20 = 5 (2 -> 3), 100 / 4 = 25 GB/s; median of the
    four 20; 5 < 0.5 x 20: the link from rank 2 to rank 3 is slow."""
    res = analyze(stepscope.load(_profiles(tmp_path, [0, 1, 2, 3])))
    assert res.cluster is not None
    view = res.cluster.extras["hccl_links"]
    assert isinstance(view, HcclLinkView) and view.unmapped == 0
    got = {(x.src, x.dst): x for x in view.links}
    assert sorted(got) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert got[(2, 3)].gbps == pytest.approx(5.0) and got[(3, 0)].gbps == pytest.approx(25.0)
    assert got[(0, 1)].mb == 100.0 and got[(0, 1)].transit_ns == 5_000_000
    assert got[(2, 3)].median_gbps == pytest.approx(20.0)
    assert [(x.src, x.dst) for x in view.slow] == [(2, 3)]
    assert view.links[0].src == 2  # slowest first


def test_an_end_not_profiled_is_counted_not_guessed(tmp_path: Path) -> None:
    """Without rank 3, its local rank in g1 is unknown: the links 2 -> 3 and 3 -> 0 (the latter
    only in rank 3's own file, not read) cannot be placed; 2 -> 3 is counted unmapped."""
    res = analyze(stepscope.load(_profiles(tmp_path, [0, 1, 2])))
    assert res.cluster is not None
    view = res.cluster.extras["hccl_links"]
    assert isinstance(view, HcclLinkView)
    assert sorted((x.src, x.dst) for x in view.links) == [(0, 1), (1, 2)] and view.unmapped == 1
    assert view.slow == ()  # two links of the transport: too few for a median


def test_files_naming_operators_one_by_one_are_read_whole(tmp_path: Path) -> None:
    out = tmp_path / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    doc = {"step": {"collective": {"hcom_allReduce__1_0@g": {"0-1": _link(4.0, 2.0)}, "bad": 3}, "p2p": []}}
    (out / "communication_matrix.json").write_text(json.dumps(doc))
    cols, warning = read_hccl_links(str(out / "trace_view.json"))
    assert warning is None and cols is not None
    assert cols["src"] == [0] and cols["mb"] == [4.0] and cols["transit_ns"] == [2_000_000] and cols["step"] == [-1]
    (out / "communication_matrix.json").write_text("{")
    cols, warning = read_hccl_links(str(out / "trace_view.json"))
    assert cols is None and warning is not None and "communication_matrix.json cannot be read" in warning


def test_the_terminal_report_names_the_slow_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.cli import main

    assert main(["analyze", str(_profiles(tmp_path, [0, 1, 2, 3])), "--workers", "1"]) == 0
    assert "HCCL link 2 -> 3 (HCCS) moved 5.0 GB/s, under half the 20.0 GB/s median" in capsys.readouterr().out
