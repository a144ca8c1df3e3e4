"""`analyze -o FILE`: the renderer chosen by the extension, the old options as aliases writing the
same bytes, standard output, and the one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main
from stepscope.errors import ConfigError
from stepscope.report.registry import RENDERERS, by_name, for_path

from .. import synth

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "a100_nccl_rank0.json.gz"


def _two_ranks(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    for r in (0, 1):
        synth.write(run / f"rank{r}.json", synth.basic_events(), rank=r)
    return run


def test_extension_picks_the_renderer_longest_suffix_first() -> None:
    assert for_path("analysis", "r.json").name == "json"
    assert for_path("analysis", "out/R.HTML").name == "html"
    assert for_path("analysis", "roof.png").name == "png"
    assert for_path("analysis", "cp.perfetto.json").name == "perfetto"
    assert for_path("analysis", "summary.md").name == "markdown"
    with pytest.raises(ConfigError, match=r"names no output format.*\.perfetto\.json"):
        for_path("analysis", "report.txt")
    with pytest.raises(ConfigError, match="the formats are json, html, png, perfetto, markdown"):
        by_name("analysis", "pdf")


def test_registry_names_are_unique_per_subject() -> None:
    keys = [(r.subject, r.name) for r in RENDERERS]
    assert len(keys) == len(set(keys))
    exts = [(r.subject, e) for r in RENDERERS for e in r.extensions]
    assert len(exts) == len(set(exts))


def test_o_writes_the_same_files_as_the_aliases(tmp_path: Path) -> None:
    run = _two_ranks(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    args = ["analyze", str(run), "-q", "--workers", "1"]
    old = ["--json", str(a / "r.json"), "--html", str(a / "r.html"), "--critical-path-trace", str(a / "cp.json")]
    assert main([*args, *old]) == 0
    new = ["-o", str(b / "r.json"), "-o", str(b / "r.html"), "-o", str(b / "cp.perfetto.json")]
    assert main([*args, *new]) == 0
    assert (a / "r.json").read_bytes() == (b / "r.json").read_bytes()
    assert (a / "r.html").read_bytes() == (b / "r.html").read_bytes()
    assert (a / "cp.json").read_bytes() == (b / "cp.perfetto.json").read_bytes()
    assert json.loads((b / "cp.perfetto.json").read_text())["stepscope_output"] == "critical-path"


def test_png_alias_and_o_agree(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from ..analysis.test_roofline import _mm_trace

    trace = str(_mm_trace(tmp_path))
    assert main(["analyze", trace, "-q", "--roofline-png", str(tmp_path / "a.png")]) == 0
    assert main(["analyze", trace, "-q", "-o", str(tmp_path / "b.png")]) == 0
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


def test_o_dash_takes_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert main(["analyze", str(EXAMPLE), "-q", "--json", str(out)]) == 0
    capsys.readouterr()
    assert main(["analyze", str(EXAMPLE), "-o", "-", "--format", "json"]) == 0
    assert capsys.readouterr().out == out.read_text(encoding="utf-8") + "\n"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-o", "-"], "-o - needs --format NAME (e.g. -o - --format json; the formats are json, html,"),
        (["--format", "json"], "--format names the format of -o -"),
        (["-o", "-", "--format", "png"], "-o - --format png cannot go to standard output (it is binary)"),
        (["--roofline-png", "-"], "--roofline-png cannot go to standard output (it is binary)"),
        (["-o", "-", "--format", "terminal"], "--format terminal is not a file format"),
        (["-o", "r.txt"], "the extension of 'r.txt' names no output format (end the file name with .json or"),
        (
            ["-o", "-", "--format", "html", "--json", "-"],
            "only one output can go to standard output, not --json and -o -",
        ),
    ],
)
def test_output_errors_are_one_line(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(EXAMPLE), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_critical_path_trace_of_one_rank_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(EXAMPLE), "-q", "-o", str(tmp_path / "cp.perfetto.json")]) == 2
    err = capsys.readouterr().err
    assert "a critical path trace needs 2 or more ranks" in err and err.count("\n") == 1
    assert not (tmp_path / "cp.perfetto.json").exists()


def test_unwritable_output_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(EXAMPLE), "-q", "-o", str(tmp_path / "no" / "r.html")]) == 1
    err = capsys.readouterr().err
    assert "cannot write output" in err and err.count("\n") == 1


def test_terminal_report_lists_every_file_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _two_ranks(tmp_path)
    assert (
        main(["analyze", str(run), "--json", str(tmp_path / "r.json"), "-o", str(tmp_path / "cp.perfetto.json")]) == 0
    )
    tail = capsys.readouterr().out.splitlines()[-2:]
    assert tail == [
        f"wrote JSON report: {tmp_path / 'r.json'}",
        f"wrote PERFETTO report: {tmp_path / 'cp.perfetto.json'}",
    ]
