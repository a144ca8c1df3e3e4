"""Paths the operating system refuses (a name longer than it allows) or that are not what the flag
needs: one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "a100_nccl_rank0.json.gz"
LONG = "z" * 300  # past NAME_MAX (255) on Linux: stat() fails with ENAMETOOLONG instead of "no such file"


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", LONG],
        ["plan", "--model", LONG, "--hardware", "h100", "--devices", "8", "--global-batch", "8", "--seq-len", "1024"],
    ],
    ids=["trace", "model"],
)
def test_a_name_too_long_is_one_line(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("name", ["not-a-dir", "long"])
def test_a_cache_dir_that_cannot_be_used_is_skipped_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    f = tmp_path / "not-a-dir"
    f.write_text("x", encoding="utf-8")
    cache = str(f) if name == "not-a-dir" else LONG
    assert main(["analyze", str(EXAMPLE), "--cache-dir", cache, "-q", "--json", str(tmp_path / "o.json")]) == 0
    err = capsys.readouterr().err
    assert "not cached: cannot write to the cache directory" in err and "Traceback" not in err
