"""Step windows that partition the device timeline, by hand (times in us)."""

from __future__ import annotations

from pathlib import Path

import stepscope
from stepscope.analysis.api import analyze

from .. import synth

US = 1000
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _analyze(tmp_path: Path, events):
    return analyze(stepscope.load(synth.write(tmp_path / "t.json", events)))


def test_windows_partition_time_with_spill_over_input_gap_and_last_step(tmp_path: Path) -> None:
    """Step 1 (CPU [0,100)): A1 [20,120); C1, launched at 50 on a side stream, runs [300,360).
    Step 2 (CPU [100,400)): the data loader runs on the CPU [110,280); A2, launched at 290, runs
    [295,395). Step 3 (CPU [400,600)): A3 [420,500), B3 [510,540) launched at 420.

    Windows: [20,295), [295,420), [420,540) (the last ends at the end of its own work).
    Step 1: busy 100, idle [120,295) = 175, of which the loader covers [120,280) = 160 (input wait);
    the rest, 15, ends with A2 launched at 290 > 120: host-bound.
    Step 2: A2 and C1 (step 1's spill-over, 60) -> busy [295,395) = 100; idle [395,420) = 25, ended
    by A3 launched at 410 > 395: host-bound.
    Step 3: busy 80 + 30; idle [500,510) = 10, ended by B3 launched at 420 (in time, no sync): other."""
    ev = [synth.step("ProfilerStep#1", 0, 100), synth.step("ProfilerStep#2", 100, 300)]
    ev.append(synth.step("ProfilerStep#3", 400, 200))
    ev += synth.launch(GEMM, 10, 20, 100)
    ev += synth.launch(GEMM, 50, 300, 60, stream=20)
    ev.append(synth.cpu(LOADER, 110, 170))
    ev += synth.launch(GEMM, 290, 295, 100)
    ev += synth.launch(GEMM, 410, 420, 80)
    ev += synth.launch(GEMM, 420, 510, 30)
    r = _analyze(tmp_path, ev).ranks[0]
    s1, s2, s3 = r.steps
    assert [(s.window_start_ns, s.window_end_ns) for s in r.steps] == [
        (20 * US, 295 * US),
        (295 * US, 420 * US),
        (420 * US, 540 * US),
    ]
    assert [s.step_time_ns for s in r.steps] == [275 * US, 125 * US, 120 * US]
    assert [s.compute_ns for s in r.steps] == [100 * US, 100 * US, 110 * US]
    assert [s.idle_ns for s in r.steps] == [175 * US, 25 * US, 10 * US]
    assert [s.spill_over_ns for s in r.steps] == [0, 60 * US, 0]
    c1, c2, c3 = (s.idle_causes for s in r.steps)
    assert (c1.input_wait_ns, c1.host_bound_ns, c1.wait_ns, c1.other_ns) == (160 * US, 15 * US, 0, 0)
    assert (c2.input_wait_ns, c2.host_bound_ns, c2.wait_ns, c2.other_ns) == (0, 25 * US, 0, 0)
    assert (c3.input_wait_ns, c3.host_bound_ns, c3.wait_ns, c3.other_ns) == (0, 0, 0, 10 * US)
    for s in r.steps:
        assert s.compute_ns + s.exposed_comm_ns + s.exposed_memcpy_ns + s.idle_ns == s.step_time_ns
    assert not any(s.warmup for s in r.steps)
    # busy: [20,120) + [295,395) (C1 inside it) + [420,500) + [510,540)
    assert (r.step_stats.outside_steps_ns, r.step_stats.device_busy_ns) == (0, 310 * US)


def _outside(tmp_path: Path, before_us: float):
    """One step (CPU [100,200)) whose kernel runs [120,220); a kernel launched before it (at 10, no
    step) runs ``before_us`` from 20: it lies outside every window."""
    ev = [synth.step("ProfilerStep#1", 100, 100)]
    ev += synth.launch(GEMM, 110, 120, 100)
    ev += synth.launch(GEMM, 10, 20, before_us)
    return _analyze(tmp_path, ev)


def test_work_outside_every_window_is_reported_with_a_warning_above_5_percent(tmp_path: Path) -> None:
    a = _outside(tmp_path, 60)  # busy 160, outside 60: 37.5%
    st = a.ranks[0].step_stats
    assert (st.device_busy_ns, st.outside_steps_ns) == (160 * US, 60 * US)
    assert st.outside_steps_ratio == 60 / 160
    assert any("outside every step window" in w for w in a.warnings)


def test_work_outside_the_windows_below_5_percent_is_reported_without_a_warning(tmp_path: Path) -> None:
    a = _outside(tmp_path, 4)  # busy 104, outside 4: 3.8%
    st = a.ranks[0].step_stats
    assert (st.device_busy_ns, st.outside_steps_ns) == (104 * US, 4 * US)
    assert not any("outside every step window" in w for w in a.warnings)
