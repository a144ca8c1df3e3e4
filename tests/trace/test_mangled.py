"""Mangled input never escapes as a traceback: it is read (with warnings) or refused with a
StepscopeError. Deterministic mutations of a real trace, on both readers."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

import stepscope
from stepscope.analysis.api import analyze
from stepscope.errors import StepscopeError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "a100_nccl_rank0.json.gz"


def _mutants() -> list[tuple[str, bytes]]:
    text = gzip.decompress(EXAMPLE.read_bytes())[:400_000]  # a prefix is itself a "truncated" trace
    rng = random.Random(1234)
    out = [(f"cut{i}", text[: rng.randrange(len(text))]) for i in range(12)]
    for i in range(12):
        b = bytearray(text)
        for _ in range(rng.randrange(1, 20)):
            b[rng.randrange(len(b))] = rng.choice(b'{}[]",:\\0xZ \n\xff\xc3')
        out.append((f"flip{i}", bytes(b)))
    out.append(("nul", b"\0" * 1000))
    out.append(("list-of-numbers", b"[1, 2, 3]"))
    out.append(("events-not-objects", b'{"traceEvents": [1, "x", null, {"ph": "X", "ts": 1, "dur": 2}]}'))
    out.append(
        ("bad-utf8-name", b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "\xff\xfe", "ts": 1, "dur": 2}]}')
    )
    return out


@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("name,data", _mutants(), ids=[m[0] for m in _mutants()])
def test_mangled_input_is_handled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, portable: bool, name: str, data: bytes
) -> None:
    from stepscope.trace import kineto

    if portable:
        monkeypatch.setattr(kineto, "_fast", None)
    p = tmp_path / f"{name}.json"
    p.write_bytes(data)
    try:
        result = analyze(stepscope.load(p))
    except StepscopeError as exc:
        assert str(p) in exc.one_line()
        return
    for r in result.ranks:
        for s in r.steps:
            assert s.compute_ns + s.exposed_comm_ns + s.exposed_memcpy_ns + s.idle_ns == s.step_time_ns
