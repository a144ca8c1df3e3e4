"""The Parquet cache under pressure: two writers of one entry, a directory that cannot be
written, an edit that keeps the file's size."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stepscope.cli import main
from stepscope.trace import parquet
from stepscope.trace.kineto import read_kineto

from .. import synth


def _trace(tmp_path: Path, kernel: str = "gemm_aaaa") -> Path:
    ops = [synth.cpu(f"op{i}", 300 + i * 0.01, 0.005) for i in range(30_000)]  # a file of several MiB
    ev = [synth.step("ProfilerStep#1", 0, 1000), *ops[:15_000], *synth.launch(kernel, 10, 100, 200), *ops[15_000:]]
    return synth.write(tmp_path / "t.json", ev)


def test_two_writers_of_one_entry_do_not_collide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fr = read_kineto(_trace(tmp_path))
    dest = tmp_path / "entry.parquet"
    real = parquet.pq.write_table
    calls = []

    def write_table(table: object, where: object, **kw: object) -> None:
        calls.append(where)
        if len(calls) == 1:  # another process writes the same entry meanwhile
            parquet.write_parquet(fr, dest)
        real(table, where, **kw)

    monkeypatch.setattr(parquet.pq, "write_table", write_table)
    parquet.write_parquet(fr, dest)
    assert calls[0] != calls[1]  # each writer its own temporary file
    assert parquet.read_parquet(dest).table.num_rows == fr.table.num_rows
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []


def test_a_cache_that_cannot_be_written_is_skipped_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = tmp_path / "o.json"
    assert main(["analyze", str(_trace(tmp_path)), "--cache-dir", str(blocker / "sub"), "-q", "--json", str(out)]) == 0
    assert "not cached: cannot write to the cache directory" in capsys.readouterr().err
    assert json.loads(out.read_text())["ranks"][0]["steps"]


def test_an_edit_that_keeps_the_size_is_not_served_from_the_cache(tmp_path: Path) -> None:
    p = _trace(tmp_path)
    cache, out = tmp_path / "cache", tmp_path / "o.json"

    def kernels() -> list[str]:
        assert main(["analyze", str(p), "--cache-dir", str(cache), "-q", "--json", str(out), "--top", "5"]) == 0
        return [k["name"] for k in json.loads(out.read_text())["ranks"][0]["top_kernels"]]

    assert kernels() == ["gemm_aaaa"]
    text = p.read_bytes()
    at = text.index(b"gemm_aaaa")
    assert (1 << 20) < at < len(text) - (1 << 20)  # neither in the first nor in the last MiB
    st = p.stat()
    p.write_bytes(text.replace(b"gemm_aaaa", b"gemm_bbbb"))  # same size
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert kernels() == ["gemm_bbbb"]
