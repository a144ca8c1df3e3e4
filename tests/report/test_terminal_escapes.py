"""A trace cannot drive the user's terminal: control characters in any trace string (kernel, op,
annotation, device and process-group names, the file name) reach the terminal report, warnings
and error lines only escaped (``\\x1b``), never as control characters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main
from stepscope.textsafe import printable

from .. import synth

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # write the clipboard
CLEAR = "\x1b[2J\x1b[H"  # clear the screen
TITLE = "\x1b]0;owned\x07"  # retitle the window
BAD = OSC52 + CLEAR + TITLE + "\r\x9b31m"


def _hostile_trace(tmp_path: Path, name: str = "t.json") -> Path:
    ev = [synth.step("ProfilerStep#1", 0, 1000), synth.step("ProfilerStep#2", 1000, 1000)]
    for k in range(2):
        base = k * 1000
        ev.append(synth.cpu("aten::mm" + BAD, base + 5, 100, **{"External id": 900 + k}))
        ev += synth.launch("gemm" + BAD, base + 10, base + 100, 200, ext=900 + k)
        ev += synth.launch("ncclDevKernel_AllReduce" + BAD, base + 20, base + 350, 200, stream=20)
    ev.append(synth.cpu("annotation" + BAD, 5, 10, cat="user_annotation"))
    p = synth.write(tmp_path / name, ev)
    doc = json.loads(p.read_text())
    doc["deviceProperties"][0]["name"] = "NVIDIA H100" + BAD
    p.write_text(json.dumps(doc))
    return p


def _no_controls(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text and "\r" not in text


def test_printable_escapes_every_control_character() -> None:
    assert printable("a\x1b[2Jb\x07\r\n\t\x7f\x9bc") == "a\\x1b[2Jb\\x07\\x0d\\x0a\\x09\\x7f\\x9bc"
    assert printable("plain ünïcode [red]") == "plain ünïcode [red]"


@pytest.mark.parametrize("ranks", [1, 2])
def test_terminal_report_shows_hostile_names_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ranks: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    paths = [str(_hostile_trace(tmp_path, f"rank{r}.json")) for r in range(ranks)]
    assert main(["analyze", *paths, "--workers", "1", "--top", "50"]) == 0
    out = capsys.readouterr()
    _no_controls(out.out + out.err)
    assert "\\x1b]52;c;" in out.out  # the kernel name is still shown, escaped


def test_warning_and_error_lines_escape_the_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / ("x" + CLEAR + ".json")
    bad.write_text("not json")
    assert main(["analyze", str(bad)]) == 2
    err = capsys.readouterr().err
    _no_controls(err)
    assert "\\x1b[2J" in err
