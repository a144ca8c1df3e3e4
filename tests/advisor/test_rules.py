"""Each advisor rule on a small hand-built trace that triggers it and one that must not; savings by
hand (times in us; each trace has 6 steps of a fixed pattern, the last ending at its own work)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.advisor.engine import advise
from stepscope.analysis.api import analyze

from .. import synth

US = 1000
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
WORKERS_LOADER = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
N = 6


def _run(tmp_path: Path, events: list[dict[str, Any]]):
    return analyze(stepscope.load(synth.write(tmp_path / "t.json", events)))


def _by_id(a) -> dict[str, Any]:
    return {f.id: f for f in a.findings}


def _input_bound(loader_us: float, loader: str = LOADER) -> list[dict[str, Any]]:
    """Step k (CPU [100k, 100k+100)): the loader runs [100k, 100k+L), then a 58 us GEMM launched at
    100k+41 runs from 100k+42. Each window but the last: 100 us, compute 58; of the 42 us gap the
    loader covers L (input wait), the rest is host-bound (ended by a launch after it began)."""
    ev = []
    for k in range(N):
        t = 100 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 100))
        if loader_us:
            ev.append(synth.cpu(loader, t, loader_us))
        ev += synth.launch(GEMM, t + 41, t + 42, 58)
    return ev


@pytest.mark.parametrize(
    ("loader", "rule"),
    [(LOADER, "io.loader_in_process"), (WORKERS_LOADER, "io.input_wait")],
    ids=["in_process", "workers"],
)
def test_input_wait_is_found_with_its_saving(tmp_path: Path, loader: str, rule: str) -> None:
    """L = 40: steps 1-5 wait 40 us for input, 2 us host-bound; step 6 is its 58 us GEMM.
    Mean input wait per step = 5 x 40 / 6 = 33.333 us; mean step = (500 + 58) / 6 = 93 us.
    Saving: low 0.5, mid 0.9, high 1.0 of 33.333 us. A single-process loader (num_workers=0) is
    named as such; a loader with workers that still makes the device wait is input wait."""
    found = _by_id(_run(tmp_path, _input_bound(40, loader)))
    f = found[rule]
    (other,) = {"io.loader_in_process", "io.input_wait"} - {rule}
    assert other not in found
    assert f.category == "io" and f.ranks == (0,) and f.saving_method == "measured"
    wait = 5 * 40 * US / 6
    assert f.evidence["idle_input_wait_ns"] == pytest.approx(wait, abs=1)
    assert f.step_ns == pytest.approx(558 * US / 6)
    assert (f.saving.low_ns, f.saving.mid_ns, f.saving.high_ns) == (int(0.5 * wait), int(0.9 * wait), int(wait))
    assert any(a.stack == "pytorch" and "num_workers" in a.change for a in f.actions)


def test_no_loader_no_input_wait(tmp_path: Path) -> None:
    """Same steps without a loader: the 42 us gaps are host-bound, not input wait."""
    ids = _by_id(_run(tmp_path, _input_bound(0)))
    assert "io.input_wait" not in ids
    # host-bound: 5 x 42 / 6 = 35 us of 93 us (38%), over the 10% threshold; saving mid 0.6 x 35 us
    f = ids["cpu.host_bound"]
    assert f.evidence["idle_host_bound_ns"] == pytest.approx(35 * US, abs=1)
    assert f.saving.mid_ns == int(0.6 * 35 * US)


def test_compute_bound_trace_raises_no_alarm(tmp_path: Path) -> None:
    """Back-to-back GEMMs, launched well ahead: no idle, no communication. Only the largest-consumer
    card, which claims no saving."""
    ev = []
    for k in range(N):
        t = 100 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 100))
        ev += synth.launch(GEMM, t + 1, t + 10, 100)
    a = _run(tmp_path, ev)
    assert [f.id for f in a.findings] == ["compute.largest_kernel"]
    (f,) = a.findings
    assert f.saving_method == "none" and f.saving.high_ns == 0


def _comm(hidden_us: float) -> list[dict[str, Any]]:
    """Each step: a 60 us GEMM [t+2, t+62) then an all-reduce of 30 us on stream 20 starting at
    t+62-hidden (so ``hidden`` us of it under the GEMM), the next step's GEMM after it ends."""
    ev = []
    for k in range(N):
        t = 100 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 100))
        ev += synth.launch(GEMM, t + 1, t + 2, 60)
        start = t + 62 - hidden_us
        ev += synth.launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", t + 1, start, 30, stream=20)
        ev += synth.launch("elementwise_kernel", t + 1, start + 30, 8)  # after the all-reduce
    return ev


def test_exposed_communication_is_found_when_little_is_hidden(tmp_path: Path) -> None:
    """hidden 0: every step exposes the 30 us all-reduce; of 6 steps the exposed mean is 30 us, and
    compute not already hiding communication (68 us) can hide all of it: saving mid 0.6 x 30 us."""
    f = _by_id(_run(tmp_path, _comm(0)))["parallel.exposed_comm"]
    assert f.evidence["exposed_comm_ns"] == pytest.approx(30 * US, abs=1)
    assert f.saving.mid_ns == int(0.6 * 30 * US) and f.saving.high_ns == 30 * US


def test_mostly_hidden_communication_is_not_told_to_overlap(tmp_path: Path) -> None:
    """hidden 29 of 30 us (97%, as DeepSeek-V3's expert-parallel all-to-all): 1 us exposed per
    ~100 us step, under the 5% threshold."""
    assert "parallel.exposed_comm" not in _by_id(_run(tmp_path, _comm(29)))


def test_sync_wait_is_found(tmp_path: Path) -> None:
    """Each step: GEMM A [t+2, t+40), GEMM B launched at t+3 but starting t+70 (behind an event on
    its stream), a cudaStreamSynchronize [t+30, t+80) in flight over the gap [t+40, t+70): 30 us of
    sync wait in every step (the last one too: its window ends with B); saving mid 0.9 x 30 us."""
    ev = []
    for k in range(N):
        t = 100 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 100))
        ev += synth.launch(GEMM, t + 1, t + 2, 38)
        ev += synth.launch("gemm_b", t + 3, t + 70, 30)
        ev.append(synth.cpu("cudaStreamSynchronize", t + 30, 50, cat="cuda_runtime"))
    f = _by_id(_run(tmp_path, ev))["cpu.sync"]
    assert f.evidence["idle_sync_wait_ns"] == pytest.approx(30 * US, abs=1)
    assert f.saving.mid_ns == int(0.9 * 30 * US)


def test_findings_are_ordered_by_saving_and_rerun_gives_the_same(tmp_path: Path) -> None:
    a = _run(tmp_path, _input_bound(40))
    mids = [f.saving.mid_ns for f in a.findings]
    assert mids == sorted(mids, reverse=True)
    assert advise(a) == a.findings


def _paused(host_busy: bool) -> list[dict[str, Any]]:
    """10 ms steps: a 6 ms GEMM launched at t+1 us runs [t+2, t+6002) us; the next step's GEMM is
    launched at t+10001: a 4 ms gap. ``host_busy``: a CPU op runs through the gap (the host was
    working: host-bound, not a pause); else the host records nothing in it (a GC pause)."""
    ev = []
    for k in range(N):
        t = 10_000 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 10_000))
        ev += synth.launch(GEMM, t + 1, t + 2, 6_000)
        if host_busy:
            ev.append(synth.cpu("aten::index_put_", t + 6_002, 3_990))
    return ev


def test_a_silent_host_pause_is_found(tmp_path: Path) -> None:
    """Steps 1-5 each hold a 4 ms silent gap, the last none: mean 5 x 4000 / 6 = 3333.3 us of a
    9333.3 us mean step; saving mid 0.8 x 3333.3 us."""
    f = _by_id(_run(tmp_path, _paused(False)))["cpu.silent_host"]
    silent = 5 * 4_000 * US / 6
    assert f.evidence["silent_ns"] == pytest.approx(silent, abs=1)
    assert f.saving.mid_ns == int(0.8 * silent)


def test_a_busy_host_is_not_a_pause(tmp_path: Path) -> None:
    ids = _by_id(_run(tmp_path, _paused(True)))
    assert "cpu.silent_host" not in ids and "cpu.host_bound" in ids


BF = "c10::BFloat16"


def _adds(kernel_us: float) -> Path:
    """Each 100 us step: aten::add on two [1024, 1024] bf16 tensors launches one kernel of
    ``kernel_us``. On an H100 (3.35 TB/s) its roofline is 3 x 1024^2 x 2 B / 3.35e12 B/s = 1878 ns."""
    ev = []
    for k in range(N):
        t = 100 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 100))
        dims = {"External id": 10 + k, "Input Dims": [[1024, 1024], [1024, 1024], []], "Input type": [BF, BF, "Scalar"]}
        ev.append(synth.cpu("aten::add", t + 1, 3, **dims))
        ev += synth.launch("vectorized_elementwise_kernel", t + 2, t + 5, kernel_us, ext=10 + k)
    return ev


def _with_device(tmp_path: Path, events: list[dict[str, Any]]):
    import json

    p = synth.write(tmp_path / "t.json", events)
    doc = json.loads(p.read_text())
    doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
    p.write_text(json.dumps(doc))
    return analyze(stepscope.load(p))


def test_an_op_far_below_its_roofline_is_found(tmp_path: Path) -> None:
    """20 us against a 1878 ns roofline: efficiency 0.094, 18122 ns lost per step; saving mid
    0.875 x 18122 ns (the roofline ladder)."""
    f = _by_id(_with_device(tmp_path, _adds(20)))["compute.below_roofline"]
    assert f.saving_method == "roofline"
    assert f.evidence["roofline_lost_ns"] == pytest.approx(20_000 - 1878)
    assert f.evidence["roofline_efficiency"] == pytest.approx(1878 / 20_000)
    assert f.saving.mid_ns == int(0.875 * (20_000 - 1878))


def test_an_op_near_its_roofline_is_not(tmp_path: Path) -> None:
    assert "compute.below_roofline" not in _by_id(_with_device(tmp_path, _adds(2)))


def test_exposed_copies_are_found(tmp_path: Path) -> None:
    """Each 100 us step: a 40 us host-to-device copy, then a 50 us GEMM launched ahead: 40 us of
    exposed copy in every step (the last one too); saving mid 0.6 x 40 us."""
    ev = []
    for k in range(N):
        t = 100 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 100))
        ev += synth.launch("Memcpy HtoD (Pageable -> Device)", t + 1, t + 2, 40, cat="gpu_memcpy")
        ev += synth.launch(GEMM, t + 3, t + 42, 50)
    f = _by_id(_run(tmp_path, ev))["parallel.exposed_memcpy"]
    assert f.evidence["exposed_memcpy_ns"] == pytest.approx(40 * US, abs=1)
    assert f.saving.mid_ns == int(0.6 * 40 * US)


def _tiny(ahead_us: float) -> list[dict[str, Any]]:
    """Each 1000 us step: 250 kernels of 2 us, kernel j at t+4j+1; launched 1 us before it starts
    (``ahead_us`` 1: each 2 us gap is host-bound) or long before (``ahead_us`` 600: no host-bound gap)."""
    ev = []
    for k in range(N):
        t = 1000 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 1000))
        for j in range(250):
            start = t + 4 * j + 1
            ev += synth.launch("vectorized_elementwise_kernel", max(start - ahead_us, t), start, 2)
    return ev


def test_many_tiny_kernels_with_a_host_pacing_them_are_found(tmp_path: Path) -> None:
    """Host-bound: 250 gaps of 2 us in steps 1-5, 249 in the last (its window ends at its last
    kernel): mean 499.667 us. The launch calls of the short kernels: 250 x 2 us = 500 us per step.
    Basis: the smaller, 499.667 us; saving mid 0.75 of it."""
    f = _by_id(_run(tmp_path, _tiny(1)))["cpu.tiny_kernels"]
    basis = (5 * 500 + 498) * US / 6
    assert f.evidence["short_kernels"] == 250 and f.evidence["short_launch_host_ns"] == pytest.approx(500 * US)
    assert f.saving.mid_ns == int(0.75 * basis)


def test_tiny_kernels_launched_ahead_are_not_a_problem(tmp_path: Path) -> None:
    assert "cpu.tiny_kernels" not in _by_id(_run(tmp_path, _tiny(600)))


def test_cuda_graph_replay_keeps_the_launch_rules_quiet(tmp_path: Path) -> None:
    """The host-bound trace of ``test_no_loader_no_input_wait``, its launches made by
    cudaGraphLaunch: graph replay, whose gaps are not per-kernel launch overhead (TraceLens#728)."""
    ev = _input_bound(0)
    for e in ev:
        if e.get("name") == "cudaLaunchKernel":
            e["name"] = "cudaGraphLaunch"
    a = _run(tmp_path, ev)
    assert a.ranks[0].launch.graph_launches == N
    assert "cpu.host_bound" not in _by_id(a)


def test_fp32_gemms_are_found_with_their_gap_to_the_bf16_roofline(tmp_path: Path) -> None:
    """Each 100 us step: aten::mm of two [1024, 1024] fp32 matrices in one 60 us kernel. 2 x 1024^3
    FLOPs at the H100's bf16 peak (989.4 TFLOP/s) take 2.170 us: 57.83 us above it per step."""
    ev = []
    for k in range(N):
        t = 100 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 100))
        dims = {"External id": 10 + k, "Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["float", "float"]}
        ev.append(synth.cpu("aten::mm", t + 1, 3, **dims))
        ev += synth.launch("ampere_sgemm_128x64_nn", t + 2, t + 5, 60, ext=10 + k)
    f = _by_id(_with_device(tmp_path, ev))["compute.fp32_gemm"]
    gap = 60_000 - 2 * 1024**3 / 989.4e12 * 1e9
    assert f.evidence["fp32_gemm_ns"] == pytest.approx(60_000)
    assert f.evidence["fp32_gemm_gap_ns"] == pytest.approx(gap, rel=1e-6)
    assert f.saving.mid_ns == int(0.875 * f.evidence["fp32_gemm_gap_ns"])


def test_bf16_gemms_are_not_fp32(tmp_path: Path) -> None:
    ev = []
    for k in range(N):
        t = 100 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 100))
        dims = {"External id": 10 + k, "Input Dims": [[1024, 1024], [1024, 1024]], "Input type": [BF, BF]}
        ev.append(synth.cpu("aten::mm", t + 1, 3, **dims))
        ev += synth.launch(GEMM, t + 2, t + 5, 60, ext=10 + k)
    assert "compute.fp32_gemm" not in _by_id(_with_device(tmp_path, ev))


def test_compiling_inside_the_steps_is_found(tmp_path: Path) -> None:
    """The host-bound trace of ``test_no_loader_no_input_wait`` with torch.compile's
    "compile_inner (dynamo_timed)" range over 30 us of each 42 us gap (steps 1-5): 25 us per step
    on average, all of it idle; saving mid 0.9 x 25 us."""
    ev = _input_bound(0)
    for k in range(N - 1):
        ev.append(synth.cpu("_compile.compile_inner (dynamo_timed)", 100 * k + 100, 30, cat="user_annotation"))
    f = _by_id(_run(tmp_path, ev))["cpu.compile_in_step"]
    assert f.evidence["compile_ns"] == pytest.approx(25 * US, abs=1)
    assert f.saving.mid_ns == int(0.9 * 25 * US)
