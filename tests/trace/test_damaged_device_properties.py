"""A trace's deviceProperties are untrusted: a damaged entry (not a list, a memory size that is
text, absurd or negative, a name that is not a string) costs only that information, never a
traceback, and never reaches the report as the device's memory."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from stepscope.catalog.hardware import detect_from_properties, reported_memory_bytes
from stepscope.cli import main

TRACE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "a100_nccl_rank0.json.gz"
A100_40_BYTES = 42_297_524_224  # the catalog's measured figure for this trace's device


def _trace() -> dict[str, Any]:
    with gzip.open(TRACE) as f:
        return dict(json.loads(f.read()))


@pytest.mark.parametrize(
    "mem,expected",
    [
        (85_018_279_936, 85_018_279_936.0),
        (1e308, None),
        (-1, None),
        ("abc", None),
        (True, None),
        (None, None),
        (2**70, None),
        (5.0, None),
    ],
)
def test_reported_memory_is_a_plausible_number_or_none(mem: Any, expected: float | None) -> None:
    assert reported_memory_bytes({"totalGlobalMem": mem}) == expected


def test_detection_by_properties_survives_a_text_memory_size() -> None:
    props = {"computeMajor": 8, "computeMinor": 0, "numSms": 108, "totalGlobalMem": "abc"}
    hw = detect_from_properties(props)
    assert hw is not None and hw.name == "A100-SXM-40GB"  # the 80 GB check needs a number
    assert detect_from_properties({**props, "numSms": 1e400}) is None


@pytest.mark.parametrize("props", [5, "x", None, {"name": "H100"}, [5, "y"]])
def test_device_properties_that_are_not_a_list_of_objects(
    tmp_path: Path, props: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _trace()
    doc["deviceProperties"] = props
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["analyze", str(path), "-q", "--json", str(tmp_path / "r.json")]) == 0
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("mem", [1e308, -1, "abc", 2**70])
def test_an_implausible_memory_size_is_not_reported(tmp_path: Path, mem: Any) -> None:
    doc = _trace()
    doc["deviceProperties"][0]["totalGlobalMem"] = mem
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "r.json"
    assert main(["analyze", str(path), "-q", "--json", str(out)]) == 0
    hw = json.loads(out.read_text(encoding="utf-8"))["ranks"][0]["hardware"]
    assert hw["name"] == "A100-SXM-40GB" and hw["memory_bytes"] == A100_40_BYTES  # the catalog's, not the field's
