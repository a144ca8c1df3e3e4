"""Ascend timelines (torch_npu ``trace_view.json``): a hand-made one with hand-computed answers, and
the real msprof-analyze sample checked against figures computed here from its raw JSON (exact
decimal arithmetic) and against msprof's own Overlap Analysis lanes."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stepscope
from stepscope.analysis.api import analyze
from stepscope.errors import InputError
from stepscope.trace.kineto import read_kineto

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "fixtures/traces/msprof-analyze/test/ut/advisor/timeline_advice/trace_view.json"
)
US = 1000
PY, CANN, HW, OV = 4242, 424202, 800, 424211


def _meta(pid: int, name: str, labels: str) -> list[dict[str, Any]]:
    return [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
        {"args": {"labels": labels}, "ph": "M", "name": "process_labels", "pid": pid, "tid": 0},  # args first
    ]


def _task(name: str, ts: str, dur: float, task_type: str, stream: int = 3) -> dict[str, Any]:
    args = {"Model Id": 4294967295, "Task Type": task_type, "Stream Id": stream, "Task Id": 1}
    return {"ph": "X", "name": name, "pid": HW, "tid": stream, "ts": ts, "dur": dur, "args": args}


def _flow(cat: str, fid: int, s: tuple[int, int, str], f: tuple[int, int, str]) -> list[dict[str, Any]]:
    return [
        {"ph": "s", "cat": cat, "name": cat, "id": fid, "pid": s[0], "tid": s[1], "ts": s[2]},
        {"ph": "f", "bp": "e", "cat": cat, "name": cat, "id": fid, "pid": f[0], "tid": f[1], "ts": f[2]},
    ]


def _cpu(name: str, ts: str, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": PY, "tid": PY, "ts": ts, "dur": dur, "args": {}}


def _events() -> list[dict[str, Any]]:
    """One step on NPU 2: a matmul on stream 3 [100.0005, 140.0005) us, an all-reduce on stream 9
    [130.0005, 190.0005), a copy [190.0005, 200.0005) and an event wait [200.0005, 250.0005) on
    stream 3, then a vector add [250.0005, 260.0005). Times carry sub-microsecond digits."""
    ev = _meta(PY, "Python", "CPU") + _meta(CANN, "CANN", "CPU") + _meta(HW, "Ascend Hardware", "NPU 2")
    ev += _meta(OV, "Overlap Analysis", "NPU 2")
    ev += [_cpu("ProfilerStep#1", "0.0", 400), _cpu("aten::mm", "10.25", 20), _cpu("aclnnMm", "10.25", 5)]
    ev += [_cpu("HcclAllreduce", "40.5", 8), _cpu("aten::add", "60.0", 6)]
    for i, (name, ts) in enumerate(
        (("AscendCL@aclnnMm", "20.0"), ("AscendCL@HcclAllReduce", "45.0"), ("AscendCL@aclnnAdd", "240.0"))
    ):
        ev.append({"ph": "X", "name": name, "pid": CANN, "tid": 77, "ts": ts, "dur": 4, "args": {"connection_id": i}})
    ev += [
        _task("MatMul_MatMulV2", "100.0005", 40, "AI_CORE"),
        _task("hcom_allReduce__123_0_1", "130.0005", 60, "HCCL", stream=9),
        _task("MEMCPY_ASYNC", "190.0005", 10, "Other"),
        _task("EVENT_WAIT", "200.0005", 50, "EVENT_WAIT_SQE"),
        _task("aclnnAdd_AddAiCore_Add", "250.0005", 10, "AI_VECTOR_CORE"),
    ]
    ev += _flow("HostToDevice", 11, (CANN, 77, "21.0"), (HW, 3, "100.0005"))
    ev += _flow("HostToDevice", 12, (CANN, 77, "46.0"), (HW, 9, "130.0005"))
    ev += _flow("HostToDevice", 13, (CANN, 77, "241.0"), (HW, 3, "250.0005"))
    ev += _flow("async_npu", 21, (PY, PY, "10.25"), (HW, 3, "100.0005"))
    ev += _flow("async_npu", 22, (PY, PY, "60.0"), (HW, 3, "250.0005"))
    ev.append({"ph": "X", "name": "Computing", "pid": OV, "tid": 0, "ts": "100.0005", "dur": 40})
    ev.append({"ph": "X", "name": "Free", "pid": OV, "tid": 3, "ts": "140.0005", "dur": 5})
    return ev


def _write(tmp: Path, events: list[dict[str, Any]]) -> Path:
    p = tmp / "trace_view.json"
    p.write_text(json.dumps(events))
    return p


@pytest.mark.parametrize("portable", [False, True])
def test_hand_made_timeline_rows(tmp_path: Path, portable: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if portable:
        from stepscope.trace import kineto as kineto_reader

        monkeypatch.setattr(kineto_reader, "_fast", None)
    t = stepscope.load(_write(tmp_path, _events())).events
    rows = {r["name"]: r for r in t.to_pylist()}
    assert {
        n: rows[n]["kind"] for n in ("MatMul_MatMulV2", "hcom_allReduce__123_0_1", "MEMCPY_ASYNC", "EVENT_WAIT")
    } == {
        "MatMul_MatMulV2": "kernel",
        "hcom_allReduce__123_0_1": "kernel",
        "MEMCPY_ASYNC": "memcpy",
        "EVENT_WAIT": "sync",
    }
    mm = rows["MatMul_MatMulV2"]
    assert (mm["device"], mm["stream"], mm["ts_ns"], mm["dur_ns"]) == (
        2,
        3,
        100_000,
        40 * US,
    )  # 100.0005 us: 100,000.5 ns, kept to the ns
    assert mm["ts_ns"] == int(Decimal("100.0005") * 1000)
    assert rows["hcom_allReduce__123_0_1"]["stream"] == 9
    assert rows["AscendCL@aclnnMm"]["kind"] == "runtime"
    # launches: each task carries its CANN call's correlation id, and the operator's external id
    assert mm["correlation"] == rows["AscendCL@aclnnMm"]["correlation"] >= 0
    # the ATen operator around torch_npu's aclnnMm launch record, where the flow starts (10.25)
    assert mm["external_id"] == rows["aten::mm"]["external_id"] >= 0
    assert rows["aclnnMm"]["external_id"] < 0
    assert rows["AscendCL@aclnnMm"]["external_id"] == mm["external_id"]
    add = rows["aclnnAdd_AddAiCore_Add"]
    assert (
        add["correlation"] == rows["AscendCL@aclnnAdd"]["correlation"]
        and add["external_id"] == rows["aten::add"]["external_id"]
    )
    # the overlap lanes and the linking flows are not rows
    assert not {"Computing", "Free", "HostToDevice", "async_npu"} & set(rows)


def test_hand_made_timeline_breakdown(tmp_path: Path) -> None:
    """Step window [100.0005, 260.0005) us (first to last NPU task, which the step launched):
    compute = matmul [100,140) + add [250,260) = 50 us; the all-reduce [130,190) is recognized as
    HCCL communication, 10 us under the matmul, 50 exposed; the copy [190,200) is exposed memcpy;
    the event wait [200,250) is no work: idle 50 us."""
    fr_t = stepscope.load(_write(tmp_path, _events()))
    (s,) = analyze(fr_t).ranks[0].steps
    assert s.step_time_ns == 160 * US
    assert s.compute_ns == 50 * US
    assert (s.comm_ns, s.overlapped_comm_ns, s.exposed_comm_ns) == (60 * US, 10 * US, 50 * US)
    assert s.exposed_memcpy_ns == 10 * US
    assert s.idle_ns == 50 * US
    assert s.compute_ns + s.exposed_comm_ns + s.exposed_memcpy_ns + s.idle_ns == s.step_time_ns
    (c,) = s.collectives
    assert c.type == "all_reduce"


def test_overlap_lanes_kept_for_cross_checks(tmp_path: Path) -> None:
    from stepscope.trace.loader import ReadJob, read_one

    fr = read_one(ReadJob(str(_write(tmp_path, _events()))))
    assert fr.header["format"] == "ascend"
    assert fr.header["ascend_overlap_ns"] == {"Computing": 40 * US, "Free": 5 * US}


def _raw_fixture() -> list[dict[str, Any]]:
    return json.loads(FIXTURE.read_text())


def _union_ns(spans: list[tuple[Decimal, Decimal]]) -> Decimal:
    total, cur = Decimal(0), None
    for a, b in sorted(spans):
        if cur is None or a > cur[1]:
            total += cur[1] - cur[0] if cur else 0
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return (total + (cur[1] - cur[0] if cur else 0)) * 1000


def test_real_sample_device_rows_match_raw_json() -> None:
    """The msprof-analyze sample: every "Ascend Hardware" slice is a device row at its exact time;
    the union of its compute tasks equals msprof's own "Computing" lane (to 1 ns per task: our
    durations are whole nanoseconds, the file's have more digits)."""
    raw = _raw_fixture()
    hw = {e["pid"] for e in raw if e.get("ph") == "M" and e.get("args", {}).get("name") == "Ascend Hardware"}
    tasks = [e for e in raw if e.get("ph") == "X" and e.get("pid") in hw]
    trace = stepscope.load(FIXTURE)
    t = trace.events
    kind = np.array(t["kind"].to_pylist(), dtype=object)
    dev = np.isin(kind, ["kernel", "memcpy", "sync"])
    assert int(dev.sum()) == len(tasks) == 276
    expect_ts = sorted(int(Decimal(e["ts"]) * 1000) for e in tasks)
    assert sorted(t["ts_ns"].to_numpy()[dev].tolist()) == expect_ts
    copies = [e for e in tasks if e["name"] == "MEMCPY_ASYNC"]
    assert int((kind == "memcpy").sum()) == len(copies) == 2
    compute = [
        (Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(str(e["dur"]))) for e in tasks if e["name"] != "MEMCPY_ASYNC"
    ]
    computing_lane = (
        sum(Decimal(str(e["dur"])) for e in raw if e.get("name") == "Computing" and e.get("ph") == "X") * 1000
    )
    assert abs(_union_ns(compute) - computing_lane) < 1  # msprof's lane is our independent union
    k = kind == "kernel"
    ts, end = t["ts_ns"].to_numpy()[k], (t["ts_ns"].to_numpy() + t["dur_ns"].to_numpy())[k]
    ours = _union_ns([(Decimal(int(a)), Decimal(int(b))) for a, b in zip(ts, end, strict=True)]) / 1000
    assert abs(ours - computing_lane) <= len(compute)


def test_real_sample_launch_links() -> None:
    """Each HostToDevice flow links its task to a CANN call; each async_npu flow to an operator."""
    raw = _raw_fixture()
    h2d = sum(1 for e in raw if e.get("cat") == "HostToDevice" and e.get("ph") == "f")
    npu = sum(1 for e in raw if e.get("cat") == "async_npu" and e.get("ph") == "f")
    t = stepscope.load(FIXTURE).events
    kind = np.array(t["kind"].to_pylist(), dtype=object)
    corr, ext = t["correlation"].to_numpy(), t["external_id"].to_numpy()
    dev = np.isin(kind, ["kernel", "memcpy"])
    assert int((corr[dev] >= 0).sum()) == h2d == 274
    assert int((ext[dev] >= 0).sum()) == npu == 274
    assert set(corr[dev][corr[dev] >= 0]) <= set(corr[kind == "runtime"])
    assert set(ext[dev][ext[dev] >= 0]) <= set(ext[kind == "cpu_op"])


def test_both_readers_read_the_sample_alike() -> None:
    a = read_kineto(FIXTURE, force_portable=False).table
    b = read_kineto(FIXTURE, force_portable=True).table
    assert a["cat"].to_pylist() == b["cat"].to_pylist() and a["ts_ns"].to_pylist() == b["ts_ns"].to_pylist()


def _profile_dir(root: Path, name: str, rank: int | None) -> Path:
    d = root / name
    (d / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_bytes(FIXTURE.read_bytes())
    (d / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text('{"step1": {}}')
    if rank is not None:
        (d / f"profiler_info_{rank}.json").write_text("{}")
    return d


def test_profiling_directories_are_ranks(tmp_path: Path) -> None:
    """Two profiling directories (torch_npu's ``*_ascend_pt``, MindSpore's ``*_ascend_ms``): two
    ranks, numbered by their profiler_info files; the output folder's other JSON files are not
    taken for traces."""
    _profile_dir(tmp_path, "node1_123_20240101_ascend_pt", 5)
    _profile_dir(tmp_path, "node0_456_20240101_ascend_ms", 3)
    trace = stepscope.load(tmp_path)
    assert sorted(r.rank for r in trace.ranks) == [3, 5]
    assert not trace.notices
    one = stepscope.load(tmp_path / "node1_123_20240101_ascend_pt")
    assert [r.rank for r in one.ranks] == [5]
    out = stepscope.load(tmp_path / "node0_456_20240101_ascend_ms" / "ASCEND_PROFILER_OUTPUT")
    assert [r.rank for r in out.ranks] == [3]


def test_database_only_export_is_refused_with_the_fix(tmp_path: Path) -> None:
    d = tmp_path / "w_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True)
    (d / "ascend_pytorch_profiler_0.db").write_bytes(b"SQLite format 3\x00")
    with pytest.raises(InputError, match="export_type=Db") as ei:
        stepscope.load(tmp_path)
    assert ei.value.fix and "ExportType.Text" in ei.value.fix


def test_unparsed_profiling_directory_is_refused_with_the_fix(tmp_path: Path) -> None:
    d = tmp_path / "w_1_ascend_pt"
    (d / "PROF_000001").mkdir(parents=True)
    with pytest.raises(InputError, match="without ASCEND_PROFILER_OUTPUT") as ei:
        stepscope.load(d)
    assert ei.value.fix and "analyse(" in ei.value.fix


COMM = 5252


def _comm_events(thread_names: bool) -> list[dict[str, Any]]:
    """One step on NPU 0: a matmul on stream 3 [100, 200) us; an all-reduce operator on the
    communicator lane [150, 250), whose tasks show on the "Plane 0" lane and again on the NPU's
    HCCL stream 9 (a notify wait [150, 190), a copy [190, 240)); a PROFILING_ENABLE marker [90, 91)
    on stream 3."""
    ev = _meta(PY, "Python", "CPU") + _meta(HW, "Ascend Hardware", "NPU 0") + _meta(COMM, "Communication", "NPU 0")
    if thread_names:
        ev += [
            {
                "ph": "M",
                "name": "thread_name",
                "pid": COMM,
                "tid": 7,
                "args": {"name": "Group 10.0.0.1%eth0_1_0 Communication"},
            },
            {"ph": "M", "name": "thread_name", "pid": COMM, "tid": 8, "args": {"name": "Plane 0"}},
        ]
    ev += [_cpu("ProfilerStep#1", "0.0", 400)]
    ev += [
        _task("MatMul_MatMulV2", "100.0", 100, "AI_CORE"),
        _task("PROFILING_ENABLE", "90.0", 1, "PROFILING_ENABLE"),
        _task("NOTIFY_WAIT", "150.0", 40, "NOTIFY_WAIT", stream=9),
        _task("MEMCPY_ASYNC", "190.0", 50, "MEMCPY_ASYNC", stream=9),
    ]
    op_args = {
        "rank_size": 8,
        "connection_id": 3,
        "model id": 4294967295,
        "data_type": "BFP16",
        "alg_type": "RING-RING",
    }
    ev.append(
        {
            "ph": "X",
            "name": "hcom_allReduce__428_0_1",
            "pid": COMM,
            "tid": 7,
            "ts": "150.0",
            "dur": 100,
            "args": op_args,
        }
    )
    for name, ts, dur in (("Notify_Wait", "150.0", 40), ("Memcpy", "190.0", 50)):
        args = {"stream id": 9, "task type": name, "transport type": "SDMA", "size(Byte)": 1024}
        ev.append({"ph": "X", "name": name, "pid": COMM, "tid": 8, "ts": ts, "dur": dur, "args": args})
    return ev


@pytest.mark.parametrize("thread_names", [True, False])
def test_communication_operators_stand_for_their_tasks(tmp_path: Path, thread_names: bool) -> None:
    """Step window [100, 250) us. The operator is the only communication row: 100 us, 50 under the
    matmul, 50 exposed; its tasks on the Plane lane and on HCCL stream 9 are not rows, and the
    profiler marker is no work. compute 100 + exposed comm 50 = 150 = step, no idle."""
    trace = stepscope.load(_write(tmp_path, _comm_events(thread_names)))
    names = set(trace.events["name"].to_pylist())
    assert "hcom_allReduce__428_0_1" in names
    assert not {"Notify_Wait", "Memcpy", "NOTIFY_WAIT", "MEMCPY_ASYNC", "PROFILING_ENABLE"} & names
    op = next(r for r in trace.events.to_pylist() if r["name"] == "hcom_allReduce__428_0_1")
    assert (op["kind"], op["device"], op["stream"]) == ("kernel", 0, (1 << 32) + 7)
    (s,) = analyze(trace).ranks[0].steps
    assert s.step_time_ns == 150 * US
    assert (s.compute_ns, s.comm_ns, s.exposed_comm_ns, s.idle_ns) == (100 * US, 100 * US, 50 * US, 0)
    (c,) = s.collectives
    assert c.type == "all_reduce"


def test_old_hccl_process_sample() -> None:
    """msprof-analyze's byte-alignment test timeline (an "HCCL" process without thread names): its
    three hcom_broadcast operators are device rows; its Memcpy / Reduce_inline tasks are not."""
    p = Path(__file__).resolve().parents[1] / "fixtures/ascend/trace_view.hccl_byte_alignment.json"
    raw = json.loads(p.read_text())
    ops = [e for e in raw if e.get("ph") == "X" and e["name"].startswith("hcom_")]
    from stepscope.trace.loader import ReadJob, read_one

    t = read_one(ReadJob(str(p))).table
    rows = [r for r in t.to_pylist() if r["kind"] == "kernel"]
    assert sorted(r["ts_ns"] for r in rows) == sorted(int(Decimal(e["ts"]) * 1000) for e in ops)
    assert len(rows) == 3 and {r["name"] for r in rows} == {e["name"] for e in ops}


def test_reports_and_diff_on_ascend_profiles(tmp_path: Path) -> None:
    """The same reports as for a Kineto trace: JSON and HTML of two ranks, and a diff of the two."""
    from stepscope.cli import main

    a = _profile_dir(tmp_path, "n0_1_ascend_pt", 0)
    b = _profile_dir(tmp_path, "n1_2_ascend_pt", 1)
    out = tmp_path / "r.json"
    assert main(["analyze", str(tmp_path), "-q", "--json", str(out), "--html", str(tmp_path / "r.html")]) == 0
    report = json.loads(out.read_text())
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert "aclnnReduceSum_CastAiCpu_Cast" in (tmp_path / "r.html").read_text()
    assert main(["diff", str(a), str(b), "--json", str(tmp_path / "d.json")]) == 0


def test_hccl_timing_from_communication_json(tmp_path: Path) -> None:
    """HCCL's own wait / transit per collective, read from a communication.json (msprof-analyze's
    test data) beside the timeline: the sums by hand from the file, and the bandwidth per link equal
    to the Bandwidth(GB/s) HCCL wrote for the one all-reduce."""
    src = Path(__file__).resolve().parents[1] / "fixtures/ascend/communication.json"
    d = _profile_dir(tmp_path, "n0_1_ascend_pt", 0)
    (d / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_bytes(src.read_bytes())
    raw = json.loads(src.read_text())["step1"]["collective"]
    ar = raw["hcom_allReduce__844_2_1@13681369207305868844"]
    bc = raw["hcom_broadcast__844_1_1@13681369207305868844"]
    h = analyze(stepscope.load(d)).ranks[0].extras["hccl"]
    assert h is not None and h.steps == 1
    by = {c.collective: c for c in h.by_collective}
    assert set(by) == {"all_reduce", "broadcast"}
    t = ar["Communication Time Info"]
    a = by["all_reduce"]
    assert (a.count, a.wait_ns, a.transit_ns, a.sync_ns, a.elapse_ns) == (
        1,
        1_476_320,
        1_352_360,
        1_445_240,
        10_904_200,
    )
    assert a.wait_ratio == pytest.approx(t["Wait Time(ms)"] / (t["Wait Time(ms)"] + t["Transit Time(ms)"]))
    assert a.link_gbps["HCCS"] == pytest.approx(ar["Communication Bandwidth Info"]["HCCS"]["Bandwidth(GB/s)"], abs=1e-3)
    assert a.transit_mb == pytest.approx(176.160768)
    assert (by["broadcast"].wait_ns, by["broadcast"].transit_ns) == (14_940, 1_260)
    assert h.wait_ns_per_step == 1_476_320 + 14_940
    assert bc["Communication Time Info"]["Wait Time(ms)"] == pytest.approx(0.01494)


def test_without_communication_json_there_is_no_hccl_result(tmp_path: Path) -> None:
    d = _profile_dir(tmp_path, "n0_1_ascend_pt", 0)  # its communication.json holds no operator
    assert analyze(stepscope.load(d)).ranks[0].extras.get("hccl") is None


def test_late_peers_finding_from_hccl_wait(tmp_path: Path) -> None:
    """The hand-made HCCL timeline (step 150 us, 50 us of it exposed communication) with the
    communication.json above (HCCL waited 1,491.26 us of its 2,844.88 us of wait + transit: 52%):
    the finding fires, its saving based on the 50 us the step can see (mid 0.6 -> 30 us)."""
    from stepscope.advisor.engine import advise

    d = tmp_path / "n0_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True)
    (d / "trace_view.json").write_text(json.dumps(_comm_events(True)))
    src = Path(__file__).resolve().parents[1] / "fixtures/ascend/communication.json"
    (d / "communication.json").write_bytes(src.read_bytes())
    findings = {f.id: f for f in advise(analyze(stepscope.load(d.parent)))}
    f = findings["parallel.late_peers"]
    assert f.evidence["hccl_wait_share"] == pytest.approx(1.49126 / 2.84488, abs=1e-6)
    assert f.evidence["hccl_wait_exposed_ns"] == 50 * US
    assert f.saving.mid_ns == 30 * US


def test_ai_cpu_operators(tmp_path: Path) -> None:
    """The hand-made timeline with its vector add [250.0005, 260.0005) retyped AI_CPU: one task,
    10 us, of a 160 us step (6%): extras.ai_cpu says so and the finding fires (mid 0.8 -> 8 us)."""
    from stepscope.advisor.engine import advise

    ev = _events()
    for e in ev:
        if e.get("name") == "aclnnAdd_AddAiCore_Add":
            e["args"]["Task Type"] = "AI_CPU"
    a = analyze(stepscope.load(_write(tmp_path, ev)))
    got = a.ranks[0].extras["ai_cpu"]
    assert got is not None and (got.tasks, got.time_ns, got.top) == (
        1.0,
        10_000.0,
        (("aclnnAdd_AddAiCore_Add", 10_000.0),),
    )
    f = {x.id: x for x in advise(a)}["compute.ai_cpu_ops"]
    assert f.evidence["ai_cpu_ratio"] == pytest.approx(10 / 160)
    assert f.saving.mid_ns == 8 * US


def test_the_sample_ai_cpu_tasks() -> None:
    """msprof-analyze's sample: its two AI_CPU tasks (the raw JSON's "Task Type"), 327.57 us of an
    11.27 ms step: 2.9%, below the finding's 3%."""
    raw = _raw_fixture()
    want = sum(Decimal(str(e["dur"])) for e in raw if e.get("args", {}).get("Task Type") == "AI_CPU") * 1000
    got = analyze(stepscope.load(FIXTURE)).ranks[0].extras["ai_cpu"]
    assert got is not None and got.tasks == 2 and abs(got.time_ns - float(want)) <= 2


def test_roofline_from_the_aten_operator_shapes(tmp_path: Path) -> None:
    """With record_shapes the ATen operator around the launch carries its shapes: aten::mm of two
    bf16 1024 x 1024 matrices is 2 x 1024^3 FLOPs, over its task's 40 us: 53.69 TFLOP/s, on a
    910B3 (294.9 TF dense bf16) 18.2% of peak."""
    from stepscope.analysis.config import AnalyzeConfig

    ev = _events()
    for e in ev:
        if e.get("name") == "aten::mm":
            e["args"] = {"Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}
    r = analyze(stepscope.load(_write(tmp_path, ev)), AnalyzeConfig(hardware="ascend-910b3")).ranks[0].roofline
    assert r is not None and r.hardware is not None and r.hardware.peak_tflops == pytest.approx(294.9)
    (g,) = [g for g in r.groups if g.name == "aten::mm"]
    assert g.flops == 2 * 1024**3 and g.dur_ns == 40 * US
    assert g.achieved_tflops == pytest.approx(2 * 1024**3 / 40e-6 / 1e12)
