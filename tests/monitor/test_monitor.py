"""The in-job monitor without torch: what it records, its bounds, and that it never raises."""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from stepscope.cli import main
from stepscope.monitor import Monitor
from stepscope.monitor.store import load_run


def test_records_steps_tags_gc_and_data(tmp_path: Path) -> None:
    def slow_loader():  # type: ignore[no-untyped-def]
        for i in range(10):
            time.sleep(0.004)  # at least 4 ms inside next()
            yield i

    with Monitor(tmp_path, level=1, detect=False, tokens_per_step=100) as mon:
        for i in mon.loader(slow_loader()):
            if i == 5:
                gc.collect()
            if i == 7:
                mon.tag("checkpoint")
            mon.step(tags=("eval",) if i == 8 else ())
    run = load_run(tmp_path)
    s = run.steps
    assert run.n_steps == 10
    assert list(s["step"]) == list(range(10))
    assert list(s["tags"]) == ["warmup"] * 3 + ["", "", "", "", "checkpoint", "eval", ""]
    assert (s["data_ns"] >= 4e6).all()
    assert s["gc_count"][5] >= 1 and s["gc_ns"][5] > 0
    assert np.isnan(s["forward_ns"]).all()  # no model watched: not measured, not 0
    assert (s["tokens"] == 100).all()
    # consecutive steps partition time: each starts where the previous ended
    assert (np.diff(s["start_unix_ns"]) == s["dur_ns"][:-1]).all()
    assert run.meta[0]["level"] == 1 and run.meta[0]["dropped_records"] == 0


def test_step_numbers_from_the_job(tmp_path: Path) -> None:
    with Monitor(tmp_path, detect=False, start_step=1000) as mon:
        mon.step()
        mon.step(step=2000)
        mon.step()
    assert list(load_run(tmp_path).steps["step"]) == [1000, 2000, 2001]


def test_bounded_queue_counts_drops(tmp_path: Path) -> None:
    # the writer never flushes during the loop (interval 1000 s): 16 records wait, 84 are dropped
    with Monitor(tmp_path, detect=False, queue_size=16, flush_interval_s=1000.0) as mon:
        for _ in range(100):
            mon.step()
        assert mon.dropped == 84
    rep_json = _report_json(tmp_path)
    assert rep_json["steps_recorded"] == 16
    assert rep_json["dropped_records"] == 84


def test_unwritable_run_dir_degrades_without_raising(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="stepscope.monitor"):
        with Monitor(blocker / "run", detect=False) as mon:
            for _ in range(5):
                mon.step()
    warnings = [r for r in caplog.records if "not monitored" in r.getMessage()]
    assert len(warnings) == 1


def test_a_failing_sink_never_reaches_the_loop(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="stepscope.monitor"):
        with Monitor(tmp_path, detect=False, flush_interval_s=0.01) as mon:
            assert mon._writer is not None

            def broken(**kwargs: object) -> None:
                raise OSError("disk full")

            mon._writer.sink.write = broken  # type: ignore[method-assign]
            for _ in range(20):
                mon.step()
                time.sleep(0.002)
    assert any("disk full" in r.getMessage() for r in caplog.records)
    assert mon.dropped == 20


def test_jsonl_sink_and_a_cut_last_line(tmp_path: Path) -> None:
    with Monitor(tmp_path, detect=False, sink="jsonl") as mon:
        for _ in range(5):
            mon.step()
    f = tmp_path / "rank-00000.jsonl"
    with f.open("a") as out:
        out.write('{"t": "step", "rank": 0, "ste')  # killed while writing
    run = load_run(tmp_path)
    assert run.n_steps == 5
    assert any("cut short" in w for w in run.warnings)


_CHILD = """
import sys, time
from stepscope.monitor import Monitor
mon = Monitor(sys.argv[1], detect=False, flush_interval_s=0.02).start()
while True:
    mon.step()
    time.sleep(0.002)
"""


def test_kill_9_loses_no_flushed_step(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)])
    try:
        db = tmp_path / "rank-00000.db"
        seen = 0
        for _ in range(600):  # a hang guard, not a timing assertion
            time.sleep(0.05)
            if db.exists():
                seen = load_run(tmp_path, skip_unreadable=True).n_steps  # tables may not exist yet
                if seen >= 50:
                    break
        assert seen >= 50
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    run = load_run(tmp_path)
    steps = run.steps["step"]
    assert steps.size >= seen  # everything read before the kill is still there
    assert list(steps) == list(range(steps.size))  # and nothing is missing in between
    con = sqlite3.connect(tmp_path / "rank-00000.db")
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()


def _report_json(run_dir: Path) -> dict:  # type: ignore[type-arg]
    out = run_dir.parent / f"{run_dir.name}-report.json"
    assert main(["monitor", "report", str(run_dir), "--json", str(out)]) == 0
    return dict(json.loads(out.read_text()))


def test_report_json_shape(tmp_path: Path) -> None:
    with Monitor(tmp_path, detect=False) as mon:
        for _ in range(10):
            time.sleep(0.005)  # steps of a known length: no step after the 3 tagged ones reads as warm-up
            mon.step()
    d = _report_json(tmp_path)
    assert d["steps_recorded"] == 10
    assert d["anomalies"] == []
    assert d["schema"] == "stepscope.monitor/1"
    assert d["ranks"][0]["steps"] == 10 and d["ranks"][0]["excluded"] == 3


def test_report_of_a_missing_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["monitor", "report", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a directory" in err
    assert main(["monitor", "report", str(tmp_path)]) == 2  # a directory with no records
    assert "no monitor records" in capsys.readouterr().err


def test_corrupt_database_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rank-00000.db").write_bytes(b"this is not sqlite" * 100)
    assert main(["monitor", "report", str(tmp_path)]) == 2
    assert "not a readable monitor database" in capsys.readouterr().err


def test_import_then_report(tmp_path: Path) -> None:
    logs = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "torchtitan_sample.log"
    out = tmp_path / "run"
    assert main(["monitor", "import", str(logs), "-o", str(out)]) == 0
    d = _report_json(out)
    assert d["steps_recorded"] > 0


def test_prometheus_exporter_in_the_job(tmp_path: Path) -> None:
    pytest.importorskip("prometheus_client")
    import urllib.request

    with Monitor(tmp_path, detect=False, flush_interval_s=0.01, prometheus_port=0) as mon:
        for _ in range(7):
            mon.step()
        assert mon._exporter is not None
        url = f"http://127.0.0.1:{mon._exporter.port}/metrics"
        text = ""
        for _ in range(400):  # the writer thread feeds the exporter; a hang guard, not a timing
            time.sleep(0.01)
            text = urllib.request.urlopen(url, timeout=5).read().decode()
            if 'stepscope_steps_total{rank="0"} 7.0' in text:
                break
    assert 'stepscope_steps_total{rank="0"} 7.0' in text
    # the 3 warm-up steps stay out of the duration histogram
    assert 'stepscope_step_duration_seconds_count{rank="0"} 4.0' in text


def test_jax_device_time_without_blocking(tmp_path: Path) -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    f = jax.jit(lambda x: (x @ x).sum())
    x = jnp.ones((64, 64))
    with Monitor(tmp_path, detect=False, flush_interval_s=0.01) as mon:
        for _ in range(6):
            y = f(x)
            mon.step(wait_for=y)
    dev = load_run(tmp_path).devices
    # periods between consecutive completions: 5 for 6 steps, each positive
    assert list(dev["step"]) == [1, 2, 3, 4, 5]
    assert (dev["device_ns"] > 0).all()


def test_mfu_from_the_catalog(tmp_path: Path) -> None:
    from stepscope.catalog.hardware import by_name

    peak = by_name("h100").peak_tflops["bf16"]
    assert peak is not None
    with Monitor(tmp_path, detect=False, hardware="h100", flops_per_token=1e9, tokens_per_step=1000) as mon:
        for _ in range(8):
            time.sleep(0.002)
            mon.step()
    d = _report_json(tmp_path)
    r = d["ranks"][0]
    # MFU = tokens/s x FLOPs per token / peak, from the report's own tokens/s
    assert r["mfu"] == pytest.approx(r["tokens_per_s"] * 1e9 / (peak * 1e12), rel=1e-3)


def test_unknown_hardware_is_refused_at_construction(tmp_path: Path) -> None:
    from stepscope.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown hardware"):
        Monitor(tmp_path, hardware="h1000")


def test_auto_sink_is_json_lines_across_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 2 ranks per node, 4 ranks: the job spans nodes, whose leader cannot read another host's WAL
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with Monitor(tmp_path / "multi", detect=False, rank=3, world_size=4) as mon:
        mon.step()
    assert (tmp_path / "multi" / "rank-00003.jsonl").is_file()
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    with Monitor(tmp_path / "single", detect=False, rank=3, world_size=4) as mon:
        mon.step()
    assert (tmp_path / "single" / "rank-00003.db").is_file()


def _plan(run_dir: Path, start: int, steps: int, ranks: list[int]) -> Path:
    d = run_dir / "captures" / "capture-test"
    d.mkdir(parents=True)
    (d / "plan.json").write_text(
        json.dumps({"id": "capture-test", "start_step": start, "steps": steps, "ranks": ranks, "reason": "test"})
    )
    return d


def _wait_for_plan(mon: Monitor) -> None:
    """Until the writer thread has read the plan (a hang guard, not a timing)."""
    for _ in range(2000):
        if mon._capture is not None and mon._capture._plan is not None:
            return
        time.sleep(0.005)
    raise AssertionError("the plan was never read")


def test_jax_capture_is_an_xplane_profile(tmp_path: Path) -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from stepscope.monitor import CaptureConfig

    d = _plan(tmp_path, start=10, steps=2, ranks=[0])
    f = jax.jit(lambda x: (x @ x).sum())
    x = jnp.ones((64, 64))
    cap = CaptureConfig(backend="jax", analyze=False)
    with Monitor(tmp_path, detect=False, flush_interval_s=0.01, capture=cap) as mon:
        _wait_for_plan(mon)
        for _ in range(30):
            mon.step(wait_for=f(x))
    done = json.loads((d / "rank-0.done").read_text())
    assert done["trace"] == "rank-0"
    assert list((d / "rank-0").rglob("*.xplane.pb"))
    tags = list(load_run(tmp_path).steps["tags"])
    assert tags[10] == "profiling" and tags[11] == "profiling" and tags[9] == ""
    assert main(["analyze", str(d / "rank-0"), "--json", str(tmp_path / "a.json")]) == 0


def test_late_plan_is_marked_failed(tmp_path: Path) -> None:
    with Monitor(tmp_path, detect=False, flush_interval_s=0.01) as mon:
        for _ in range(5):
            mon.step()
        d = _plan(tmp_path, start=3, steps=2, ranks=[0])  # step 3 has passed
        _wait_for_plan(mon)
        mon.step()
    reason = json.loads((d / "rank-0.failed").read_text())["reason"]
    assert "after its start step 3" in reason
