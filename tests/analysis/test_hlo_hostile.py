"""Hostile HLO text: a call chain thousands deep, dimensions of hundreds of digits, a file cut
inside a computation. A result or one line, never a traceback; a cut file says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope.analysis.xla.hlo_cost import CostModel
from stepscope.cli import main
from stepscope.trace.hlo import parse_hlo_text, parse_shapes


def _chain(n: int) -> str:
    """ENTRY f0 calls f1 calls ... f(n-1), which adds two f32[4]: 4 FLOPs in all."""
    parts = ["HloModule m\n"]
    for i in range(n - 1, -1, -1):
        head = ("ENTRY " if i == 0 else "") + f"%f{i} (p: f32[4]) -> f32[4] {{"
        op = f"call(f32[4]{{0}} %p), to_apply=%f{i + 1}" if i + 1 < n else "add(f32[4]{0} %p, f32[4]{0} %p)"
        parts.append(f"{head}\n  %p = f32[4]{{0}} parameter(0)\n  ROOT %r = f32[4]{{0}} {op}\n}}\n")
    return "\n".join(parts)


def test_a_call_chain_thousands_deep_is_summed_without_recursion() -> None:
    module = parse_hlo_text(_chain(5000))
    assert CostModel(module).computation_flops("f0") == 4.0


def test_a_dimension_of_hundreds_of_digits_is_left_out() -> None:
    assert parse_shapes("f32[" + "9" * 400 + ",4]{1,0} f32[2,3]")[0].dims == (2, 3)
    assert parse_shapes("f32[4294967296,4294967296]") == ()  # 2^64 elements: beyond any array


def test_a_cut_file_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "cut.hlo"
    text = (
        "HloModule m\n\nENTRY %e (p: f32[64,64]) -> f32[64,64] {\n  %p = f32[64,64]{1,0} parameter(0)\n"
        "  ROOT %q = f32[64,64]{1,0} dot(f32[64,64]{1,0} %p, f32[64,64]{1,0} %p), lhs_contracting_dims={1}, "
        "rhs_contracting_dims={0}\n}\n"
    )
    p.write_text(text[:-3])  # the closing brace and the end of the dot's line are lost
    assert main(["hlo", str(p)]) == 0
    assert "ends inside a computation" in capsys.readouterr().err
    assert parse_hlo_text(text).truncated is False
