"""rocprofv3 JSON: a hand-made document with hand-computed answers, and TraceLens's real MI350X
file checked against figures computed here from its raw JSON (plain interval unions)."""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stepscope
from stepscope.analysis.api import analyze
from stepscope.analysis.config import AnalyzeConfig
from stepscope.catalog import hardware
from stepscope.errors import TraceFormatError
from stepscope.trace.loader import ReadJob, read_one

FIX = Path(__file__).resolve().parents[1] / "fixtures"
REAL = FIX / "traces/TraceLens/tests/rocprof/908_results.json.gz"
TRIMMED = FIX / "rocprof/908_results_trimmed.json"
US = 1000
GPU = 37946
KINDS = ["NONE", "HIP_RUNTIME_API_EXT", "MEMORY_COPY", "KERNEL_DISPATCH", "MARKER_CORE_RANGE_API"]
OPS = [
    [],
    ["hipApiName", "hipLaunchKernel", "hipMemcpyAsync", "hipStreamSynchronize"],
    ["MEMORY_COPY_NONE", "MEMORY_COPY_HOST_TO_HOST", "MEMORY_COPY_HOST_TO_DEVICE"],
    ["KERNEL_DISPATCH_NONE", "KERNEL_DISPATCH_ENQUEUE", "KERNEL_DISPATCH_COMPLETE"],
    ["roctxMarkA", "roctxThreadRangeA"],
]


def _api(op: int, corr: int, t0: int, t1: int, kind: int = 1) -> dict[str, Any]:
    return {
        "size": 64,
        "kind": kind,
        "operation": op,
        "correlation_id": {"internal": corr, "external": 0, "ancestor": 0},
        "start_timestamp": t0 * US,
        "end_timestamp": t1 * US,
        "thread_id": 77,
    }


def _dispatch(kernel_id: int, corr: int, t0: int, t1: int, stream: int) -> dict[str, Any]:
    info = {"agent_id": {"handle": GPU}, "queue_id": {"handle": 3}, "kernel_id": kernel_id, "dispatch_id": corr}
    return {
        "kind": 3,
        "operation": 2,
        "thread_id": 77,
        "correlation_id": {"internal": corr, "external": 0},
        "start_timestamp": t0 * US,
        "end_timestamp": t1 * US,
        "dispatch_info": info,
        "stream_id": {"handle": stream},
    }


def _doc() -> dict[str, Any]:
    """Two steps (roctx ranges "step" [0, 500) and [500, 1000) us on thread 77). Step 1: a GEMM
    launched at 10, run [100, 300) on stream 5; an RCCL all-reduce launched at 20, run [250, 450)
    on stream 9; an H2D copy launched at 30, run [450, 500). Step 2: an elementwise kernel launched
    at 520, run [600, 700). Symbols: kernel 1 is a Tensile GEMM, 2 RCCL's, 3 elementwise."""
    symbols = [
        {"kernel_id": 0, "kernel_name": "", "formatted_kernel_name": "", "truncated_kernel_name": ""},
        {"kernel_id": 1, "kernel_name": "Cijk_Alik_Bljk_BBS_BH.kd", "formatted_kernel_name": "Cijk_Alik_Bljk_BBS_BH"},
        {
            "kernel_id": 2,
            "kernel_name": "x.kd",
            "formatted_kernel_name": "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)",
        },
        {
            "kernel_id": 3,
            "kernel_name": "y.kd",
            "formatted_kernel_name": "void at::native::vectorized_elementwise_kernel<4>()",
        },
    ]
    agents = [
        {"id": {"handle": 1}, "type": 1, "name": "AMD EPYC", "node_id": 0},
        {
            "id": {"handle": GPU},
            "type": 2,
            "name": "gfx950",
            "product_name": "AMD Instinct MI350X",
            "node_id": 2,
            "gpu_index": 0,
            "gfx_target_version": 90500,
            "cu_count": 256,
            "hive_id": 17332996360099338395,
        },
    ]
    copy_rec = {
        "kind": 2,
        "operation": 2,
        "thread_id": 77,
        "correlation_id": {"internal": 3, "external": 0},
        "start_timestamp": 450 * US,
        "end_timestamp": 500 * US,
        "dst_agent_id": {"handle": GPU},
        "src_agent_id": {"handle": 1},
        "bytes": 4096,
        "stream_id": {"handle": 5},
    }
    buffers = {
        "kernel_dispatch": [_dispatch(3, 4, 600, 700, 5), _dispatch(1, 1, 100, 300, 5), _dispatch(2, 2, 250, 450, 9)],
        "memory_copy": [copy_rec],
        "hip_api": [_api(1, 1, 10, 12), _api(1, 2, 20, 22), _api(2, 3, 30, 32), _api(1, 4, 520, 522)],
        "hsa_api": [],
        "marker_api": [_api(1, 90, 0, 500, kind=4), _api(1, 91, 500, 1000, kind=4)],
        "rccl_api": [],
        "scratch_memory": [],
    }
    strings = {
        "buffer_records": [{"kind": k, "operations": o} for k, o in zip(KINDS, OPS, strict=True)],
        "marker_api": [{"key": 90, "value": "step"}, {"key": 91, "value": "step"}],
    }
    proc = {
        "metadata": {"pid": 4242, "init_time": 0, "fini_time": 2_000_000},
        "agents": agents,
        "strings": strings,
        "kernel_symbols": symbols,
        "buffer_records": buffers,
    }
    return {"rocprofiler-sdk-tool": [proc]}


def _write(tmp: Path, doc: dict[str, Any], name: str = "4242_results.json") -> Path:
    p = tmp / name
    p.write_text(json.dumps(doc))
    return p


def test_hand_made_rows(tmp_path: Path) -> None:
    t = read_one(ReadJob(str(_write(tmp_path, _doc())))).table
    rows = {r["name"]: r for r in t.to_pylist()}
    gemm = rows["Cijk_Alik_Bljk_BBS_BH"]
    assert (gemm["kind"], gemm["device"], gemm["stream"], gemm["ts_ns"], gemm["dur_ns"]) == (
        "kernel",
        0,
        5,
        100 * US,
        200 * US,
    )
    assert rows["Memcpy HtoD (Host -> Device)"]["bytes"] == 4096
    assert rows["Memcpy HtoD (Host -> Device)"]["kind"] == "memcpy"
    assert sum(1 for r in t.to_pylist() if r["name"] == "hipLaunchKernel" and r["kind"] == "runtime") == 3
    assert [r["kind"] for r in t.to_pylist() if r["name"] == "step"] == ["user_annotation"] * 2
    # the launch and its kernel share the internal correlation id
    launches = sorted(r["correlation"] for r in t.to_pylist() if r["name"] == "hipLaunchKernel")
    assert launches == sorted(r["correlation"] for r in t.to_pylist() if r["kind"] == "kernel")


def test_hand_made_breakdown(tmp_path: Path) -> None:
    """Step 1 window [100, 600) (to step 2's first work): gemm [100,300) compute; all-reduce
    [250,450): 50 under the gemm, 150 exposed; copy [450,500) exposed; idle [500,600) = 100.
    Step 2 [600, 700): the elementwise kernel, 100 compute."""
    trace = stepscope.load(_write(tmp_path, _doc()))
    r = analyze(trace, AnalyzeConfig(step_marker="step")).ranks[0]
    s1, s2 = r.steps
    assert (s1.step_time_ns, s1.compute_ns, s1.exposed_comm_ns, s1.exposed_memcpy_ns, s1.idle_ns) == (
        500 * US,
        200 * US,
        150 * US,
        50 * US,
        100 * US,
    )
    assert (s2.step_time_ns, s2.compute_ns) == (100 * US, 100 * US)
    assert s1.by_category_ns["gemm"] == 200 * US
    (c,) = s1.collectives
    assert c.comm_ns == 200 * US
    hw = hardware.detect(r.device)
    assert r.device == "AMD Instinct MI350X" and hw is not None and hw.name == "MI350X"


def _union(a: np.ndarray, b: np.ndarray) -> int:
    """Union length of [a, b) intervals, in plain Python (the independent method)."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(zip(a.tolist(), b.tolist(), strict=True)):
        if cur_e is None or s > cur_e:
            total += (cur_e - cur_s) if cur_e is not None else 0
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + ((cur_e - cur_s) if cur_e is not None else 0)


@pytest.fixture(scope="module")
def real_raw() -> dict[str, Any]:
    with gzip.open(REAL) as f:
        return json.loads(f.read())["rocprofiler-sdk-tool"][0]


def test_real_file_against_its_raw_records(real_raw: dict[str, Any]) -> None:
    """TraceLens's MI350X file (kernel trace only, 43,915 dispatches on one GPU): the whole trace is
    one window from the first kernel's start to the last one's end; communication is the union of
    the RCCL kernels and compute the union of the rest, each computed here from the raw records."""
    recs = real_raw["buffer_records"]["kernel_dispatch"]
    syms = real_raw["kernel_symbols"]
    start = np.array([r["start_timestamp"] for r in recs])
    end = np.array([r["end_timestamp"] for r in recs])
    nccl = np.array(
        [syms[r["dispatch_info"]["kernel_id"]]["formatted_kernel_name"].startswith("ncclDevKernel") for r in recs]
    )
    trace = stepscope.load(REAL)
    assert trace.ranks[0].device_name == "AMD Instinct MI350X"
    (s,) = analyze(trace).ranks[0].steps
    assert len(recs) == 43_915 == int(np.isin(np.array(trace.events["kind"].to_pylist()), ["kernel"]).sum())
    assert s.step_time_ns == int(end.max() - start.min()) == 15_122_023_494
    assert s.comm_ns == _union(start[nccl], end[nccl])
    assert s.compute_ns == _union(start[~nccl], end[~nccl])
    assert s.compute_ns + s.exposed_comm_ns == _union(start, end)  # no copies: busy = compute + exposed comm
    assert s.idle_ns == s.step_time_ns - _union(start, end)
    assert s.cpu.silent_ns == 0  # no host rows: nothing to call silent


def test_cut_file_is_read_to_its_last_record(tmp_path: Path) -> None:
    """The trimmed real file cut inside dispatch 101 (its records are sorted by dispatch id): the
    first 100 are read, with a warning."""
    text = TRIMMED.read_text()
    cut = text.index('"dispatch_id":101,')
    p = tmp_path / "cut_results.json"
    p.write_text(text[:cut])
    fr = read_one(ReadJob(str(p)))
    assert fr.truncated and any("cut short" in w for w in fr.warnings)
    assert fr.table.num_rows == 100
    assert sorted(fr.table["correlation"].to_pylist()) == list(range(1, 101))


def test_record_of_the_wrong_type_costs_only_itself(tmp_path: Path) -> None:
    doc = _doc()
    doc["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"][1]["start_timestamp"] = "soon"
    fr = read_one(ReadJob(str(_write(tmp_path, doc))))
    assert fr.skipped_events == 1
    assert sum(1 for k in fr.table["kind"].to_pylist() if k == "kernel") == 2


def test_empty_and_foreign_documents_are_refused(tmp_path: Path) -> None:
    doc = _doc()
    for key in ("kernel_dispatch", "memory_copy", "hip_api", "marker_api"):
        doc["rocprofiler-sdk-tool"][0]["buffer_records"][key] = []
    with pytest.raises(TraceFormatError, match="no kernel, copy, API or marker record"):
        stepscope.load(_write(tmp_path, doc))
    with pytest.raises(TraceFormatError, match="not a rocprofv3 document"):
        stepscope.load(_write(tmp_path, {"rocprofiler-sdk-tool": {"x": 1}}, "b_results.json"))


def test_a_directory_holding_results_files(tmp_path: Path) -> None:
    """rocprofv3 writes <host>/<pid>_results.json: a directory of them is read, not skipped; the
    files name no rank, so the order numbers them, as said."""
    (tmp_path / "node0").mkdir()
    _write(tmp_path / "node0", _doc())
    other = copy.deepcopy(_doc())
    _write(tmp_path / "node0", other, "4343_results.json")
    trace = stepscope.load(tmp_path / "node0")
    assert len(trace.ranks) == 2
    assert [n.text for n in trace.notices] == [
        f"no rank in distributedInfo or file name; using rank {i} by file order" for i in (0, 1)
    ]


def test_version_drift_without_stream_ids(tmp_path: Path) -> None:
    """ROCm 6.2 files have no stream_id: kernels go on their HSA queue."""
    doc = _doc()
    text = re.sub(r',\s*"stream_id": \{"handle": \d+\}', "", json.dumps(doc))
    p = tmp_path / "old_results.json"
    p.write_text(text)
    t = read_one(ReadJob(str(p))).table
    assert {r["stream"] for r in t.to_pylist() if r["kind"] == "kernel"} == {3}
