"""Files stepscope has no reader for are refused (exit 2, one line naming the file's kind), not read
as something else; and a missing optional extra is named."""

from __future__ import annotations

import builtins
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.errors import ConfigError, TraceFormatError
from tests import synth

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
ASCEND = FIXTURES / "msprof-analyze/test/ut/advisor/timeline_advice/trace_view.json"
XPROF = FIXTURES / "xprof/plugin/trace_viewer/tf_trace_viewer/data/trace.json"


def test_fixtures_are_what_the_tests_say() -> None:
    """The Ascend fixture is a top-level list naming an "Ascend Hardware" process; the xprof one a
    traceEvents object whose categories are PERF/PREF/SAMPLE/__metadata (no profiler op events)."""
    asc = json.loads(ASCEND.read_text())
    assert isinstance(asc, list)
    names = {e["args"]["name"] for e in asc if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert "Ascend Hardware" in names
    xp = json.loads(XPROF.read_text())
    assert {e.get("cat") for e in xp["traceEvents"]} == {"PERF", "PREF", "SAMPLE", "__metadata"}


@pytest.mark.parametrize(("path", "words"), [(XPROF, "xprof/TensorFlow")])
def test_foreign_json_is_refused_by_load(path: Path, words: str) -> None:
    with pytest.raises(TraceFormatError) as ei:
        stepscope.load(path)
    assert words in str(ei.value) and ei.value.fix


@pytest.mark.parametrize(("path", "words"), [(XPROF, "xprof/TensorFlow")])
def test_cli_exits_2_with_one_line(path: Path, words: str) -> None:
    cmd = [sys.executable, "-c", "import sys; from stepscope.cli import main; sys.exit(main())", "analyze", str(path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and lines[0].startswith("stepscope: error: ")


def test_ascend_marker_in_a_gzipped_list(tmp_path: Path) -> None:
    """Two CPU ops and an "Ascend Hardware" process name, gzipped, but no NPU task: refused (it would
    read as a CPU-only trace)."""
    ev: list[dict[str, Any]] = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 6, "dur": 2},
        {"ph": "M", "name": "process_name", "pid": 800, "tid": 0, "args": {"name": "Ascend Hardware"}},
    ]
    p = tmp_path / "trace_view.json.gz"
    p.write_bytes(gzip.compress(json.dumps(ev).encode()))
    with pytest.raises(TraceFormatError, match="Ascend NPU timeline .* without NPU task rows"):
        stepscope.load(p)


def test_cpu_only_kineto_trace_still_reads(tmp_path: Path) -> None:
    """A CPU-only trace of PyTorch ops, even a bare list without the Kineto header, is not refused."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]
    p = tmp_path / "cpu.json"
    p.write_text(json.dumps(ev))
    assert stepscope.load(p).num_events == 1


def test_gpu_trace_naming_cann_still_reads(tmp_path: Path) -> None:
    """A GPU trace is never scanned for the Ascend names: a kernel called "CANN" reads."""
    ev = synth.basic_events() + [{"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "CANN"}}]
    t = stepscope.load(synth.write(tmp_path / "t.json", ev))
    assert t.num_events > 0


def test_to_polars_without_polars_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = stepscope.load(synth.write(tmp_path / "t.json", synth.basic_events()))
    real_import = builtins.__import__

    def no_polars(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "polars" or name.startswith("polars."):
            raise ModuleNotFoundError("No module named 'polars'", name="polars")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "polars", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_polars)
    with pytest.raises(ConfigError) as ei:
        t.to_polars()
    assert ei.value.fix == 'pip install "stepscope[polars]"'


@pytest.mark.parametrize(
    ("name", "table", "words", "fix"),
    [
        ("run.db", "rocpd_kernel_dispatch", "a rocpd database", "--output-format json"),
        ("ascend_pytorch_profiler_0.db", "TASK", "an Ascend profiler database", "ExportType.Text"),
        ("prof.sqlite", "PYTORCH_API", "an Ascend profiler database", "ExportType.Text"),
    ],
)
def test_other_profilers_databases_are_named(tmp_path: Path, name: str, table: str, words: str, fix: str) -> None:
    """rocprofv3's rocpd and the Ascend profiler's database export: refused, saying what they are
    and which export stepscope reads."""
    import sqlite3

    p = tmp_path / name
    con = sqlite3.connect(p)
    con.execute(f"CREATE TABLE {table} (id INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(TraceFormatError, match=words) as ei:
        stepscope.load(p)
    assert ei.value.fix and fix in ei.value.fix
