"""Step annotations that nest: the outer one is the step, and the inner one is named in a warning
(it used to vanish without a word). The same marker recorded twice, one inside the other (JAX's
PjitFunction), stays one step without a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main

from .. import synth


def test_a_nested_profiler_step_is_named_in_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = [synth.step("ProfilerStep#1", 0, 2000), synth.step("ProfilerStep#2", 500, 500)]
    ev += synth.launch("gemm", 10, 100, 200) + synth.launch("gemm", 600, 700, 200)
    p = synth.write(tmp_path / "t.json", ev)
    out = tmp_path / "o.json"
    assert main(["analyze", str(p), "-q", "--json", str(out)]) == 0
    assert [s["name"] for s in json.loads(out.read_text())["ranks"][0]["steps"]] == ["ProfilerStep#1"]
    err = capsys.readouterr().err
    assert "'ProfilerStep#2' lies inside 'ProfilerStep#1'" in err


def test_the_same_marker_twice_is_one_step_without_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ev = [synth.step("ProfilerStep#1", 0, 1000), synth.step("ProfilerStep#1", 10, 900)]
    ev += synth.launch("gemm", 20, 100, 200)
    p = synth.write(tmp_path / "t.json", ev)
    assert main(["analyze", str(p), "-q", "--json", str(tmp_path / "o.json")]) == 0
    assert "lies inside" not in capsys.readouterr().err
