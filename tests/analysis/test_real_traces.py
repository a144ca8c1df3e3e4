"""Real public traces (tests/fixtures/traces, see tests/fixtures/ATTRIBUTION.md): every one reads,
parts sum to the step, and an independent stdlib-json + pure-Python interval merge agrees on the unions."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

import stepscope
from stepscope.analysis.api import analyze

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "tests" / "fixtures" / "traces"
HTA = TRACES / "HolisticTraceAnalysis" / "tests" / "data"
REAL = {
    "gpu_a100_nccl": ROOT / "examples" / "traces" / "a100_nccl_rank0.json.gz",  # HTA nccl_parser_config/nccl_data
    "gpu_a100_multistream": HTA / "negative_queue_length_values_check" / "rank0.json.gz",
    "ns_timestamps_v100": HTA / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "rocm_mi250": HTA / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "mtia": HTA / "mtia_trace_single_rank" / "mtia_rank_0.json.gz",
    "cpu_only_gloo": HTA / "cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "no_rank_info": HTA / "distributed_info_unavailable" / "distributed_info_not_found.json.gz",
    "old_schema_torch19": TRACES
    / "kineto"
    / "tb_plugin"
    / "samples"
    / "resnet50_num_workers_0"
    / "worker0.1623143089861.pt.trace.json.gz",
    "sampled_rank0": HTA / "trace_filter" / "sampled_rank-0.json.gz",
    "b200_no_steps": TRACES / "TraceLens" / "tests" / "traces" / "b200" / "eager_trace.json.gz",
    "mi300_inference": TRACES / "TraceLens" / "tests" / "traces" / "mi300" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "hip_graph_replay": TRACES
    / "TraceLens"
    / "tests"
    / "traces"
    / "inference"
    / "vllm_decode_full"
    / "graph_execution.json.gz",
}


@pytest.mark.parametrize("key", sorted(REAL))
def test_real_trace_parts_sum_to_step(key: str) -> None:
    a = analyze(stepscope.load(REAL[key]))
    (r,) = a.ranks
    assert r.steps, key
    for s in r.steps:
        parts = s.compute_ns + s.exposed_comm_ns + s.exposed_memcpy_ns + s.idle_ns
        assert abs(parts - s.step_time_ns) <= 0.001 * s.step_time_ns
        assert s.step_time_ns == s.window_end_ns - s.window_start_ns
        assert 0 <= s.overlapped_comm_ns <= s.comm_ns
        c = s.idle_causes
        assert c.input_wait_ns + c.host_bound_ns + c.wait_ns + c.other_ns == s.idle_ns


def test_real_expected_facts() -> None:
    ns = analyze(stepscope.load(REAL["ns_timestamps_v100"])).ranks[0]
    raw = json.load(gzip.open(REAL["ns_timestamps_v100"]))["traceEvents"]
    want = sorted(
        {e["name"] for e in raw if str(e.get("name", "")).startswith("ProfilerStep#")},
        key=lambda n: int(n.split("#")[1]),
    )
    assert [s.name for s in ns.steps] == want and len(want) == 5
    old = analyze(stepscope.load(REAL["old_schema_torch19"])).ranks[0]
    assert len(old.steps) == 6 and old.device == "Tesla V100-DGXS-32GB"
    assert sum(s.cpu.dataloader_ns for s in old.steps) > 0  # enumerate(DataLoader) in the ResNet run
    nccl = analyze(stepscope.load(REAL["gpu_a100_nccl"])).ranks[0]
    assert {c.type for s in nccl.steps for c in s.collectives} >= {"all_reduce"}
    cpu = analyze(stepscope.load(REAL["cpu_only_gloo"])).ranks[0]
    assert cpu.steps[0].window_source == "cpu"


# ---------------------------------------------------------------- independent check ---------
_DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
_COMM = re.compile(r"nccl|rccl", re.I)


def _merge(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _length(iv: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in _merge(iv))


def _intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    a, b = _merge(a), _merge(b)
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _ns(x: float) -> int:
    return int(round(x * 1000))


@pytest.mark.parametrize("key", ["gpu_a100_nccl", "gpu_a100_multistream", "ns_timestamps_v100", "old_schema_torch19"])
def test_independent_union_check(key: str) -> None:
    doc = json.load(gzip.open(REAL[key]))
    ev = doc["traceEvents"]
    steps = [
        e
        for e in ev
        if e.get("ph") == "X"
        and re.match(r"^ProfilerStep#\d+$", str(e.get("name")))
        and e.get("cat", "").lower() in ("user_annotation", "operator", "cpu_op")
    ]
    rt = {
        e["args"]["correlation"]: _ns(e["ts"])
        for e in ev
        if e.get("ph") == "X"
        and e.get("cat", "").lower() in ("cuda_runtime", "runtime")
        and "correlation" in e.get("args", {})
    }
    dev = [e for e in ev if e.get("ph") == "X" and e.get("cat", "").lower() in _DEVICE_CATS | {"memcpy", "memset"}]
    ours = {s.name: s for s in analyze(stepscope.load(REAL[key])).ranks[0].steps}
    # windows partition the device timeline: step i from the first start of the work it launched
    # to step i+1's first start (never before step i's start); the last to the last end of its own work
    spans = sorted(steps, key=lambda e: e["ts"])
    firsts, lasts = [], []
    for st in spans:
        c0, c1 = _ns(st["ts"]), _ns(st["ts"]) + _ns(st["dur"])
        mine = [e for e in dev if c0 <= rt.get(e["args"].get("correlation"), -1) < c1]
        firsts.append(max([min(_ns(e["ts"]) for e in mine), *firsts[-1:]]))
        lasts.append(max(_ns(e["ts"]) + _ns(e["dur"]) for e in mine))
    ends = [*firsts[1:], lasts[-1]]
    for st, w0, w1 in zip(spans, firsts, ends):
        # all device work in the window counts, whoever launched it
        iv = [(max(_ns(e["ts"]), w0), min(_ns(e["ts"]) + _ns(e["dur"]), w1), e) for e in dev]
        iv = [(s, x, e) for s, x, e in iv if x > s]
        comp = [(s, x) for s, x, e in iv if e["cat"].lower() == "kernel" and not _COMM.search(e["name"])]
        comm = [(s, x) for s, x, e in iv if e["cat"].lower() == "kernel" and _COMM.search(e["name"])]
        busy = [(s, x) for s, x, _ in iv]
        o = ours[st["name"]]
        tol = 1 + 0.001 * (w1 - w0)  # float rounding of the stdlib path on ns timestamps
        assert abs(o.step_time_ns - (w1 - w0)) <= tol
        assert abs(o.compute_ns - _length(comp)) <= tol
        assert abs(o.comm_ns - _length(comm)) <= tol
        assert abs(o.overlapped_comm_ns - _intersect(comm, comp)) <= tol
        assert abs(o.idle_ns - ((w1 - w0) - _length(busy))) <= tol


# ---------------------------------------------------------------- two readers, one table -----
# the Chrome trace-event JSON files (rocprofv3 JSON is another format: trace/test_rocprof.py)
ALL_JSON = sorted([*(p for p in TRACES.rglob("*.json*") if "rocprof" not in p.parts), REAL["gpu_a100_nccl"]])


@pytest.mark.parametrize("path", ALL_JSON, ids=lambda p: p.name[:40])
def test_c_scanner_matches_portable_reader(path: Path) -> None:
    from stepscope.trace import kineto

    if kineto._fast is None:
        pytest.skip("C scanner not built")
    fast = kineto.read_kineto(path)
    slow = kineto.read_kineto(path, force_portable=True)
    assert fast.table.num_rows == slow.table.num_rows
    for col in fast.table.column_names:
        a, b = fast.table[col], slow.table[col]
        if pa_types_is_dict(a.type):
            a, b = a.cast(a.type.value_type), b.cast(b.type.value_type)
        assert a.equals(b), col
    assert fast.truncated == slow.truncated


def pa_types_is_dict(t: object) -> bool:
    import pyarrow as pa

    return pa.types.is_dictionary(t)


def test_cupti_counter_flops_on_real_trace() -> None:
    path = HTA / "cupti_profiler" / "benchmark_result_924719_1679055439_trace.json.gz"
    doc = json.load(gzip.open(path))
    want: dict[str, float] = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "cuda_profiler_range":
            a = e["args"]
            f = sum(
                a.get(f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum", 0) * (2 if op == "fma" else 1)
                for p in "dfh"
                for op in ("add", "mul", "fma")
            )
            want[e["name"]] = want.get(e["name"], 0) + f
    r = analyze(stepscope.load(path)).ranks[0].roofline
    got = {g.name: g.flops for g in r.measured}
    assert got == pytest.approx({k: v for k, v in want.items() if k in got})
    assert len(got) == min(len(want), 50) and all(g.source == "counters" for g in r.measured)


def test_roofline_on_real_traces_with_shapes() -> None:
    """Figures documented in docs/roofline.md."""
    h100 = analyze(
        stepscope.load(TRACES / "TraceLens" / "tests" / "traces" / "h100" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    ).ranks[0]
    roof = h100.roofline
    assert roof.hardware.name == "H100-SXM" and roof.coverage_ratio > 0.85
    mm = [g for g in roof.groups if g.name == "aten::mm" and g.bound == "compute"]
    assert mm and all(0.3 < g.efficiency <= 1 for g in mm)
    v100 = analyze(stepscope.load(REAL["old_schema_torch19"])).ranks[0].roofline
    assert v100.hardware.name == "V100-SXM2" and 0.2 < v100.coverage_ratio < 0.8
    assert v100.groups[0].name == "aten::cudnn_convolution"


# ---------------------------------------------------------------- device memory -----
def test_the_catalog_never_gives_a_device_more_memory_than_its_traces_report() -> None:
    """Every real trace that records its device's memory (Kineto deviceProperties.totalGlobalMem,
    as CUDA / ROCm report it) and names a catalog device: the planner's capacity for that device
    is at most what the trace reports, and equal where the catalog took its figure from one."""
    import gzip
    import json

    from stepscope.catalog.hardware import by_name, detect_from_properties

    seen: dict[str, int] = {}
    for path in ALL_JSON:
        opener = gzip.open if path.suffix == ".gz" else open
        try:
            with opener(path, "rt", encoding="utf-8") as fh:
                props = json.load(fh).get("deviceProperties") or []
        except (ValueError, OSError, AttributeError):
            continue  # damaged or non-object files are other tests' business
        for p in props:
            hw = detect_from_properties(p) if p.get("name") and p.get("totalGlobalMem") else None
            if hw is not None and hw.capacity_bytes is not None:
                assert hw.capacity_bytes <= p["totalGlobalMem"], (path.name, hw.name)
                seen[hw.name] = min(seen.get(hw.name, p["totalGlobalMem"]), p["totalGlobalMem"])
    assert {"A100-SXM-80GB", "A100-SXM-40GB", "H100-SXM", "B200", "V100-SXM2", "MI300X"} <= set(seen)
    for name, least in seen.items():  # the catalog took the least figure the traces show
        assert by_name(name).hbm_bytes == least, name
    assert seen["H100-SXM"] == 85_018_279_936 and seen["MI300X"] == 205_571_227_648
