"""Hand-computed breakdowns on synthetic traces."""

from __future__ import annotations

from pathlib import Path

import pytest

import stepscope
from stepscope.analysis.api import analyze
from stepscope.analysis.config import AnalyzeConfig

from .. import synth

US = 1000


def _one(tmp_path: Path, events, **kw):
    p = synth.write(tmp_path / "t.json", events, **kw)
    return analyze(stepscope.load(p)).ranks[0]


def test_basic_step_by_hand(tmp_path: Path) -> None:
    # gemm [100,300) s7, nccl all-reduce [250,450) s20, H2D memcpy [400,500) s7, elementwise [600,700) s7
    r = _one(tmp_path, synth.basic_events())
    (s,) = r.steps
    assert (s.window_start_ns, s.window_end_ns) == (100 * US, 700 * US)
    assert s.step_time_ns == 600 * US
    assert s.compute_ns == 300 * US  # [100,300) + [600,700)
    assert s.comm_ns == 200 * US
    assert s.overlapped_comm_ns == 50 * US  # [250,300)
    assert s.exposed_comm_ns == 150 * US  # [300,450)
    assert s.memcpy_ns == 100 * US
    assert s.exposed_memcpy_ns == 50 * US  # [450,500)
    assert s.idle_ns == 100 * US  # [500,600)
    assert s.compute_ns + s.exposed_comm_ns + s.exposed_memcpy_ns + s.idle_ns == s.step_time_ns
    assert s.cpu_step_ns == 1000 * US
    assert s.by_category_ns == {
        "gemm": 200 * US,
        "comm:all_reduce": 200 * US,
        "memcpy_h2d": 100 * US,
        "elementwise": 100 * US,
    }
    (c,) = s.collectives
    assert (c.type, c.comm_ns, c.overlapped_ns, c.exposed_ns, c.count) == ("all_reduce", 200 * US, 50 * US, 150 * US, 1)
    # the gap [500,600) ends with the elementwise kernel, launched at 550 > 500: host-bound
    assert s.idle_causes.host_bound_ns == 100 * US
    assert s.cpu.cpu_bound_ns == 100 * US
    # launch delays of the 3 kernels: 90, 230, 50 us -> nearest-rank p50 = 90 us
    assert r.launch.kernels == 3 and r.launch.delay_p50_ns == 90 * US and r.launch.delay_p99_ns == 230 * US


def test_idle_launched_early_is_not_host_bound(tmp_path: Path) -> None:
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev += synth.launch("gemm_a", 10, 100, 100)
    ev += synth.launch("gemm_b", 20, 300, 100)  # launched long before the gap [200,300)
    ev.append(synth.cpu("cudaStreamSynchronize", 150, 100, cat="cuda_runtime"))
    (s,) = _one(tmp_path, ev).steps
    assert s.idle_ns == 100 * US
    assert s.idle_causes.host_bound_ns == 0
    assert s.idle_causes.wait_ns == 100 * US  # a sync call was in flight during the gap
    assert s.cpu.sync_calls == 1 and s.cpu.sync_ns == 100 * US


def test_window_follows_launches_not_wall_clock(tmp_path: Path) -> None:
    # step 1 launches a kernel that runs after step 1's CPU span ended (async GPU lag)
    ev = [synth.step("ProfilerStep#1", 0, 100), synth.step("ProfilerStep#2", 100, 100)]
    ev += synth.launch("gemm_1", 50, 150, 100)  # launched in step 1, runs [150, 250)
    ev += synth.launch("gemm_2", 120, 260, 40)  # launched in step 2, runs [260, 300)
    r = _one(tmp_path, ev)
    s1, s2 = r.steps
    # step 1 runs to step 2's first work; the last step ends at the end of its own work
    assert (s1.window_start_ns, s1.window_end_ns) == (150 * US, 260 * US)
    assert (s2.window_start_ns, s2.window_end_ns) == (260 * US, 300 * US)
    assert s1.compute_ns == 100 * US and s2.compute_ns == 40 * US
    # the gap [250, 260) ends with gemm_2, launched at 120 (in time, no sync): other
    assert s1.idle_ns == 10 * US and s1.idle_causes.other_ns == 10 * US


def test_comm_recognized_from_launching_op_and_stream(tmp_path: Path) -> None:
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    # a kernel with a neutral name, launched from record_param_comms with a collective arg
    ev.append(synth.cpu("record_param_comms", 5, 30, **{"External id": 77, "Collective name": "reduce_scatter"}))
    ev += synth.launch("custom_comm_kernel_v2", 10, 100, 100, stream=30, ext=77)
    ev.append(synth.cpu("record_param_comms", 40, 30, **{"External id": 78, "Collective name": "reduce_scatter"}))
    ev += synth.launch("custom_comm_kernel_v2", 41, 200, 20, stream=30, ext=78)
    # DeepEP-style dispatch kernel by name
    ev += synth.launch("deep_ep::intranode::dispatch<8>", 12, 300, 50, stream=31)
    # an unnamed kernel on stream 30, where 2 of 3 kernels are communication
    ev += synth.launch("kernel_xyz", 14, 400, 10, stream=30)
    ev += synth.launch("hccl_all_gather_kernel", 16, 420, 10, stream=32)
    (s,) = _one(tmp_path, ev).steps
    types = {c.type: c.comm_ns for c in s.collectives}
    assert types == {"reduce_scatter": 120 * US, "all_to_all": 50 * US, "other": 10 * US, "all_gather": 10 * US}
    assert s.compute_ns == 0


def test_cpu_only_gloo_trace(tmp_path: Path) -> None:
    ev = [
        synth.step("ProfilerStep#1", 0, 1000),
        synth.cpu("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 100, cat="user_annotation"),
        synth.cpu("aten::mm", 100, 300),
        synth.cpu("aten::addmm", 150, 200),  # nested: not double counted
        synth.cpu("gloo:all_reduce", 400, 300, cat="user_annotation"),
        synth.cpu("c10d::allreduce_", 410, 280),  # nested in the annotation
    ]
    (s,) = _one(tmp_path, ev, rank=None).steps
    assert s.window_source == "cpu"
    assert s.step_time_ns == 1000 * US
    assert s.compute_ns == 300 * US
    assert s.comm_ns == 300 * US and s.exposed_comm_ns == 300 * US and s.overlapped_comm_ns == 0
    assert s.idle_ns == 400 * US
    assert s.cpu.dataloader_ns == 100 * US
    assert [c.type for c in s.collectives] == ["all_reduce"]


def test_cpu_comm_nested_in_a_compute_op_is_communication(tmp_path: Path) -> None:
    """DDP's all-reduce hook runs inside autograd: evaluate_function [100, 500) holds
    c10d::allreduce_ [300, 450). Compute = 400 - 150 = 250 us, exposed comm = 150 us."""
    ev = [
        synth.step("ProfilerStep#1", 0, 1000),
        synth.cpu("autograd::engine::evaluate_function: AddmmBackward0", 100, 400),
        synth.cpu("c10d::allreduce_", 300, 150),
    ]
    (s,) = _one(tmp_path, ev, rank=None).steps
    assert s.compute_ns == 250 * US
    assert s.comm_ns == 150 * US and s.exposed_comm_ns == 150 * US and s.overlapped_comm_ns == 0
    assert s.idle_ns == 600 * US
    assert s.compute_ns + s.exposed_comm_ns + s.exposed_memcpy_ns + s.idle_ns == s.step_time_ns
    (c,) = s.collectives
    assert c.type == "all_reduce" and c.exposed_ns == 150 * US and c.overlapped_ns == 0


def test_fluctuation_flags_what_grew(tmp_path: Path) -> None:
    # step i: kernel A at s_i (launched at s_i - 9), kernel B at s_i + 110 (launched at s_i + 50,
    # before the 10 us gap: other idle), each 100 us; windows [s_i, s_i+1), the last ends at s_3 + 210.
    # s = 10, 230, 450, 870: steps 220, 220, 420, 210 us. The gap after B to the next step's A is
    # host-bound (A launched after it began): 10, 10, 210, 0 us (median 10), so step 2 grew by 200 us.
    cpu = [(0, 220), (220, 220), (440, 420), (860, 240)]
    s = [10, 230, 450, 870]
    ev = []
    for i in range(4):
        ev.append(synth.step(f"ProfilerStep#{i}", *cpu[i]))
        ev += synth.launch(f"gemm_{i}", s[i] - 9, s[i], 100)
        ev += synth.launch(f"gemm_b{i}", s[i] + 50, s[i] + 110, 100)
    r = _one(tmp_path, ev)
    times = [s.step_time_ns for s in r.steps]
    assert times == [220 * US, 220 * US, 420 * US, 210 * US]
    assert [s.idle_causes.host_bound_ns for s in r.steps] == [10 * US, 10 * US, 210 * US, 0]
    (flag,) = r.step_stats.flagged
    assert flag.name == "ProfilerStep#2"
    assert flag.grew == "idle_host_bound_ns" and flag.grew_by_ns == 200 * US
    assert flag.over_median_ratio == pytest.approx(200 / 220)


def test_step_marker_and_whole_trace_fallback(tmp_path: Path) -> None:
    ev = [synth.step("train_step#1", 0, 500), synth.step("train_step#2", 500, 500)]
    ev += synth.launch("gemm", 10, 100, 100)
    ev += synth.launch("gemm", 510, 600, 50)
    p = synth.write(tmp_path / "m.json", ev)
    a = analyze(stepscope.load(p), AnalyzeConfig(step_marker="train_step"))
    assert [s.name for s in a.ranks[0].steps] == ["train_step#1", "train_step#2"]
    b = analyze(stepscope.load(p))
    assert b.ranks[0].step_source == "whole-trace" and len(b.ranks[0].steps) == 1
    assert any("whole trace" in w for w in b.warnings)
    assert b.ranks[0].steps[0].step_time_ns == 550 * US


def test_top_kernels_quantiles(tmp_path: Path) -> None:
    ev = [synth.step("ProfilerStep#1", 0, 10000)]
    durs = [10, 20, 30, 40, 100]
    t = 100
    for d in durs:
        ev += synth.launch("gemm_k", t - 50, t, d)
        t += 200
    ev += synth.launch("other_k", 5, 5000, 5)
    r = _one(tmp_path, ev)
    top = r.top_kernels[0]
    assert top.name == "gemm_k" and top.count == 5 and top.total_ns == 200 * US
    assert top.p50_ns == 30 * US and top.p99_ns == 100 * US and top.mean_ns == 40 * US
    step_ns = r.steps[0].step_time_ns
    assert top.share_of_step_ratio == pytest.approx(200 * US / step_ns)


def test_user_rules_file_extends_classification(tmp_path: Path) -> None:
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev += synth.launch("my_fused_moe_grouped_kernel", 10, 100, 100)
    ev += synth.launch("vendor_xccl_sendrecv_v3", 20, 300, 50, stream=9)
    p = synth.write(tmp_path / "t.json", ev)
    base = analyze(stepscope.load(p)).ranks[0].steps[0]
    assert base.by_category_ns.get("other") == 150 * US
    rules = tmp_path / "rules.yaml"
    rules.write_text("categories:\n  - {category: gemm, pattern: 'fused_moe_grouped'}\ncomm_kernels: 'xccl'\n")
    s = analyze(stepscope.load(p), AnalyzeConfig(rules_file=str(rules))).ranks[0].steps[0]
    assert s.by_category_ns == {"gemm": 100 * US, "comm:send_recv": 50 * US}
    assert s.exposed_comm_ns == 50 * US


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("categories:\n  - {category: gemm, pattern: '(unclosed'}\n", "bad regular expression '(unclosed'"),
        ("categorie:\n  - {category: gemm, pattern: 'x'}\n", "unknown key categorie"),  # was ignored without a word
        (
            "categories:\n  - {pattern: 'x'}\n",
            "categories must be a list of {category: ..., pattern: ...}",
        ),  # was a KeyError
        ("collectives: {type: all_reduce}\n", "collectives must be a list of {type: ..., pattern: ...}"),
        ("comm_kernels: 'my(ccl'\n", "bad regular expression 'my(ccl'"),  # named alone, not inside the bundled pattern
        (
            "comm_kernels: [mynccl]\n",
            "comm_kernels must be one regular expression (a string), not list",
        ),  # was a traceback
        ("comm_ops: true\n", "comm_ops must be one regular expression (a string), not bool"),
        (
            "categories:\n  - {category: gemm, pattern: [x]}\n",
            "categories must be a list of {category: ..., pattern: ...} with text",
        ),  # the regex "['x']"
    ],
)
def test_bad_rules_file_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    from stepscope.cli import main

    p = synth.write(tmp_path / "t.json", synth.basic_events())
    rules = tmp_path / "bad.yaml"
    rules.write_text(text)
    assert main(["analyze", str(p), "--rules", str(rules), "-q"]) == 2
    err = capsys.readouterr().err
    assert says in err and str(rules) in err and len(err.strip().splitlines()) == 1


def test_analyze_files_in_workers_matches_in_memory(tmp_path: Path) -> None:
    d = tmp_path / "run"
    d.mkdir()
    synth.write(d / "a_rank-1.json", synth.basic_events(), rank=None)
    synth.write(d / "b.json", synth.basic_events(), rank=None)  # no rank: numbered by order -> 0
    synth.write(d / "c.json", synth.basic_events(), rank=1)  # rank 1 taken by a_rank-1 -> 2
    mem = analyze(stepscope.load(d))
    files = sorted(str(p) for p in d.iterdir())
    par = analyze(files, workers=2)
    assert [r.rank for r in par.ranks] == [r.rank for r in mem.ranks] == [0, 1, 2]
    assert [r.path for r in par.ranks] == [r.path for r in mem.ranks]
    assert [r.steps for r in par.ranks] == [r.steps for r in mem.ranks]
    assert sorted(par.warnings) == sorted(mem.warnings)


def test_stream_idle_causes_optimizer_and_short_kernels(tmp_path: Path) -> None:
    ev = [
        synth.step("ProfilerStep#1", 0, 1000),
        synth.cpu("Optimizer.step#AdamW.step", 600, 100, cat="user_annotation"),
    ]
    ev += synth.launch("gemm_a", 10, 100, 100, stream=7)  # s7 [100,200)
    ev += synth.launch("gemm_b", 250, 300, 100, stream=7)  # s7 gap [200,300): launched at 250 -> host-bound 100
    ev += synth.launch("tiny_elementwise", 650, 700, 5, stream=7)  # s7 gap [400,700): launched at 650 -> host-bound 300
    ev += synth.launch("gemm_c", 20, 150, 100, stream=8)  # s8 [150,250)
    ev += synth.launch("gemm_d", 30, 420, 80, stream=8)  # s8 gap [250,420): launched early; s7 busy 100 of 170 -> wait
    r = _one(tmp_path, ev)
    by_stream = {si.stream: si for si in r.stream_idle}
    s7, s8 = by_stream[7], by_stream[8]
    assert (s7.busy_ns, s7.idle_ns) == (205 * US, 400 * US)
    assert (s7.causes.host_bound_ns, s7.causes.wait_ns, s7.causes.other_ns, s7.causes.gaps) == (400 * US, 0, 0, 2)
    assert (s8.busy_ns, s8.idle_ns) == (180 * US, 170 * US)
    assert (s8.causes.host_bound_ns, s8.causes.wait_ns, s8.causes.other_ns) == (0, 170 * US, 0)
    (s,) = r.steps
    assert s.cpu.optimizer_ns == 100 * US
    assert r.launch.short_kernels == 1 and r.launch.short_kernel_time_ns == 5 * US
    assert s.kernel_time_by_category_ns == {"gemm": 380 * US, "elementwise": 5 * US}
    # device level: busy [100,250) u [300,400) u [420,500) u [700,705) -> idle 605 - 335 = 270
    assert s.step_time_ns == 605 * US and s.idle_ns == 270 * US


def test_lambda_kernels_are_not_optimizer(tmp_path: Path) -> None:
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev += synth.launch(
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::lambda>", 10, 100, 10
    )
    ev += synth.launch("void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor>", 20, 200, 10)
    (s,) = _one(tmp_path, ev).steps
    assert s.by_category_ns == {"elementwise": 10 * US, "optimizer": 10 * US}


def test_per_rank_warnings_are_collapsed() -> None:
    from stepscope.notices import Notice, collapse

    ns = [Notice("no ProfilerStep", rank=r) for r in range(10)]
    ns += [Notice("truncated", path="file x"), Notice("other thing", rank=3), Notice("no steps", rank=1, path="p")]
    assert collapse(ns) == (
        "ranks 0, 1, 2, 3, 4, 5, 6, 7, ... (10 ranks): no ProfilerStep",
        "file x: truncated",
        "rank 3: other thing",
        "rank 1: p: no steps",
    )


def test_split_devices_is_honoured_by_a_loaded_trace_too(tmp_path: Path) -> None:
    """The one analyze path: a loaded Trace and the same files give the same ranks (a JAX host file with
    two devices: one rank per device) and the same warnings."""
    from stepscope.trace.xspace_pb import xspace_class

    space = xspace_class()()
    for dev in (0, 1):  # each chip: one 10 us op at 1 + dev us in its step "7"
        plane = space.planes.add(id=dev + 1, name=f"/device:TPU:{dev}".encode())
        plane.event_metadata[1].id, plane.event_metadata[1].name = 1, b"fusion.1"
        plane.event_metadata[9].id, plane.event_metadata[9].name = 9, b"7"
        plane.lines.add(id=1, name=b"Steps", timestamp_ns=1_000).events.add(
            metadata_id=9, offset_ps=0, duration_ps=60_000_000
        )
        ops = plane.lines.add(id=2, name=b"XLA Ops", timestamp_ns=1_000)
        ops.events.add(metadata_id=1, offset_ps=(1 + dev) * 1_000_000, duration_ps=10_000_000)
    xplane = tmp_path / "host.xplane.pb"
    xplane.write_bytes(space.SerializeToString())
    files, mem = analyze([str(xplane)], workers=1), analyze(stepscope.load(xplane))
    assert [(r.rank, r.device) for r in mem.ranks] == [
        (0, "(device 0 of host.xplane.pb)"),
        (1, "(device 1 of host.xplane.pb)"),
    ]
    assert [(r.rank, r.device, r.steps) for r in files.ranks] == [(r.rank, r.device, r.steps) for r in mem.ranks]
    assert [s.step_time_ns for r in mem.ranks for s in r.steps] == [10_000, 10_000]
    assert files.warnings == mem.warnings
