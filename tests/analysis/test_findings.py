"""Cluster findings are records with their numbers; the reports word them, the same in each."""

from __future__ import annotations

import dataclasses
import io
import json
from html import escape

from rich.console import Console

from stepscope.analysis.cluster.results import (
    ClusterView,
    LowBandwidthFinding,
    SmallMessagesFinding,
    StragglerFinding,
    SyncWaitFinding,
)
from stepscope.report import cluster_html, cluster_json, cluster_terminal

FINDINGS = (
    StragglerFinding(rank=3, cause="compute", score=4.26, excess_ns=1_234_567, saving_ns=2_500_000),
    SmallMessagesFinding(small=12, total=20, threshold_bytes=1 << 20),
    LowBandwidthFinding(count=2, min_bytes=1 << 20, ratio=0.5, median_busbw_gbps=123.45),
    SyncWaitFinding(wait_ns=229_460_000, transfer_ns=545_800_000),
)
TEXT = [
    "rank 3 is a straggler (compute; score 4.3, 1.23 ms/step over the median); if it ran like the median rank "
    "the step would be ~2.50 ms shorter",
    "12 of 20 collectives move < 1 MiB: latency-bound; bucket them (larger DDP/FSDP buckets, coalescing)",
    "2 collectives >= 1 MiB reach < 50% of the link's bus bandwidth (the node's measured figure for the collective "
    "where the catalog has one, else the nominal peak; median 123.5 GB/s)",
    "collective sync wait (waiting for the last rank): 229.46 ms summed over ranks; transfer: 545.80 ms",
]


def _view(**kw: object) -> ClusterView:
    base = ClusterView(
        ranks=2,
        clock_offsets_ns={0: 0, 1: 0},
        collectives=(),
        stragglers=(),
        matrix=(),
        size_histogram=(),
        findings=FINDINGS,
        threshold=3.0,
        unmatched_instances=0,
    )
    return dataclasses.replace(base, **kw)


def test_each_report_words_the_findings_the_same() -> None:
    c = _view()
    d = cluster_json.to_dict(c)
    assert d is not None and d["findings"] == TEXT
    html = cluster_html.section(c)
    assert all(f"<li>{escape(t)}</li>" in html for t in TEXT)
    out = io.StringIO()
    cluster_terminal.render(c, Console(file=out, width=400))
    assert all(f"- {t}" in out.getvalue() for t in TEXT)


def test_cluster_extras_reach_the_json_only_when_there_are_some() -> None:
    @dataclasses.dataclass(frozen=True)
    class Skew:
        max_ns: int

    assert "extras" not in json.loads(json.dumps(cluster_json.to_dict(_view())))
    d = cluster_json.to_dict(_view(extras={"skew": Skew(5)}))
    assert d is not None and d["extras"] == {"skew": {"max_ns": 5}}
