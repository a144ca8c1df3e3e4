"""One uncompressed file scanned by several threads gives the table one thread gives, row for row;
a cut that is not an event boundary, damage or truncation sends the file to the one-thread path."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from stepscope.cli import main
from stepscope.trace import kineto, kineto_parallel
from stepscope.trace.columns import FileRead
from stepscope.trace.kineto import read_kineto
from stepscope.trace.kineto_parallel import read_parallel

from .. import synth

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(kineto._fast is None, reason="C scanner not built")


def _same(a: FileRead, b: FileRead) -> None:
    assert a.table.equals(b.table)
    assert a.header == b.header
    assert (a.truncated, a.skipped_events, a.bytes_read) == (b.truncated, b.skipped_events, b.bytes_read)
    assert (a.comm_args is None) == (b.comm_args is None)
    if a.comm_args is not None and b.comm_args is not None:
        assert a.comm_args.equals(b.comm_args)


def _events(n: int) -> list[dict]:
    ev = [synth.step("ProfilerStep#1", 0, n * 10 + 100)]
    for i in range(n):
        ev += synth.launch(f"k{i % 7}", 5 + i * 10, 10 + i * 10, 5, note="}, {")
    return ev


@pytest.mark.parametrize("workers", [2, 3, 7])
def test_threads_give_the_one_thread_table(tmp_path: Path, workers: int) -> None:
    ev = _events(3000)
    p = synth.write(tmp_path / "t.json", ev)
    one = read_kineto(p, block=4096, workers=1)
    assert one.table.num_rows == len(ev)
    par = read_parallel(p, 0, False, 4096, workers)
    assert par is not None  # every cut here falls between events
    _same(par, one)
    assert par.header["traceName"] == str(p)  # the trailer after the array


def test_a_cut_inside_a_string_falls_back(tmp_path: Path) -> None:
    # the middle of the file is one long name full of boundaries: the cut lands inside it
    ev = _events(100)
    ev.insert(100, synth.cpu("x" + "}, {" * 50_000, 3, 1))
    ev += _events(100)[1:]
    p = synth.write(tmp_path / "t.json", ev)
    assert read_parallel(p, 0, False, 4096, 2) is None
    _same(read_kineto(p, block=4096, workers=2), read_kineto(p, block=4096, workers=1))


def test_damage_and_truncation_read_as_with_one_thread(tmp_path: Path) -> None:
    text = synth.write(tmp_path / "t.json", _events(2000)).read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[: len(text) * 3 // 4])
    one = read_kineto(cut, block=4096, workers=1)
    assert one.truncated
    _same(read_kineto(cut, block=4096, workers=3), one)
    bad = tmp_path / "bad.json"
    i = text.index(b'"cudaLaunchKernel"', len(text) * 2 // 3)
    bad.write_bytes(text[:i] + b"@" + text[i + 1 :])  # one event is no longer JSON
    one = read_kineto(bad, block=4096, workers=1)
    assert one.skipped_events == 1
    assert read_parallel(bad, 0, False, 4096, 3) is None
    _same(read_kineto(bad, block=4096, workers=3), one)


def test_real_trace_per_step_results_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "rank0.json"
    p.write_bytes(gzip.decompress((ROOT / "examples/traces/a100_nccl_rank0.json.gz").read_bytes()))
    one = read_kineto(p, block=1 << 16, workers=1)
    par = read_parallel(p, 0, False, 1 << 16, 4)
    assert par is not None
    _same(par, one)
    outs = []
    for n in (1, 4):
        monkeypatch.setattr(kineto, "parallel_workers", lambda path, n=n: n)
        out = tmp_path / f"w{n}.json"
        assert main(["analyze", str(p), "--json", str(out), "-q"]) == 0
        outs.append(json.loads(out.read_text())["ranks"][0]["steps"])
    assert outs[0] == outs[1]
    assert len(outs[0]) == 3


def test_small_or_compressed_files_use_one_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope.executor import CPU_SHARE_ENV

    monkeypatch.setenv(CPU_SHARE_ENV, "3")  # this job's share of the CPUs
    p = synth.write(tmp_path / "t.json", _events(10))
    assert kineto_parallel.parallel_workers(p) == 1  # under PARALLEL_MIN_BYTES
    assert kineto_parallel.parallel_workers(p, min_bytes=0) == 3
    gz = synth.write(tmp_path / "t.json.gz", _events(10), gz=True)
    assert kineto_parallel.parallel_workers(gz, min_bytes=0) == 1


def test_files_read_side_by_side_split_the_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope.executor import CPU_SHARE_ENV, cpus_for_one_job, run_all

    monkeypatch.delenv(CPU_SHARE_ENV, raising=False)
    cpus = os.cpu_count() or 1
    shares = run_all(_cpus, [0, 1], workers=2)  # worker processes: each job gets its share
    assert shares == [max(1, cpus // 2)] * 2
    monkeypatch.setenv(CPU_SHARE_ENV, "3")
    assert cpus_for_one_job() == 3


def _cpus(_job: int) -> int:
    from stepscope.executor import cpus_for_one_job

    return cpus_for_one_job()
