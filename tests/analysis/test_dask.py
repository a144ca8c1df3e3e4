"""Per-rank work on a Dask cluster (LocalCluster with worker processes), paths as fsspec URLs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stepscope.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAIR = ROOT / "tests" / "fixtures" / "traces" / "HolisticTraceAnalysis" / "tests" / "data" / "trace_filter"


def test_dask_local_cluster_gives_the_same_result_as_local_processes(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    pytest.importorskip("fsspec")
    data = tmp_path / "traces"
    data.mkdir()
    for f in PAIR.glob("sampled_rank-*.json.gz"):
        shutil.copy(f, data / f.name)
    local_out, dask_out = tmp_path / "local.json", tmp_path / "dask.json"
    assert main(["analyze", str(data), "--json", str(local_out), "-q", "--workers", "2"]) == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        url = f"file://{data}/sampled_rank-*.json.gz"
        assert main(["analyze", url, "--dask", cluster.scheduler_address, "--json", str(dask_out), "-q"]) == 0
    a, b = json.loads(local_out.read_text()), json.loads(dask_out.read_text())
    assert [r["rank"] for r in b["ranks"]] == [0, 1]
    for ra, rb in zip(a["ranks"], b["ranks"]):
        assert ra["steps"] == rb["steps"] and ra["top_kernels"] == rb["top_kernels"]
    assert a["cluster"]["collectives"] == b["cluster"]["collectives"]
    assert [Path(r["path"]).name for r in b["ranks"]] == ["sampled_rank-0.json.gz", "sampled_rank-1.json.gz"]


def test_fsspec_url_is_copied_and_read(tmp_path: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    from stepscope.analysis.api import analyze
    from stepscope.trace.loader import expand_inputs

    trace = ROOT / "examples" / "traces" / "a100_nccl_rank0.json.gz"
    with fsspec.open("memory://bucket/run1/rank-0.json.gz", "wb") as f:
        f.write(trace.read_bytes())
    found, _ = expand_inputs("memory://bucket/run1/*.json.gz")
    paths = [str(p) for p in found]
    assert paths == ["memory://bucket/run1/rank-0.json.gz"]
    remote = analyze(paths, workers=1)
    local = analyze([str(trace)], workers=1)
    assert remote.ranks[0].path == paths[0]
    assert [s.step_time_ns for s in remote.ranks[0].steps] == [s.step_time_ns for s in local.ranks[0].steps]


@pytest.mark.slow
def test_unreachable_dask_scheduler_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("distributed")
    trace = ROOT / "examples" / "traces" / "a100_nccl_rank0.json.gz"
    assert main(["analyze", str(trace), "--dask", "tcp://127.0.0.1:9", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Dask scheduler" in err[0]
