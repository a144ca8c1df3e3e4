"""Allocator events (``[memory]``): read from Kineto JSON, kept by the Parquet cache, and read from
a real trace (figures checked against a plain json.load of the same file)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stepscope
from stepscope.trace.memory import MemoryEvents, read_memory_events

from .. import synth

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
QWEN_H100 = FIXTURES / "TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


def mem(
    ts: float, nbytes: int, allocated: int | None, reserved: int | None, dev: int = 0, dtype: int = 1
) -> dict[str, Any]:
    args: dict[str, Any] = {"Bytes": nbytes, "Addr": 1234, "Device Id": dev, "Device Type": dtype}
    if allocated is not None:
        args["Total Allocated"] = allocated
    if reserved is not None:
        args["Total Reserved"] = reserved
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "s": "t",
        "name": "[memory]",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "args": args,
    }


def _events() -> list[dict[str, Any]]:
    ev = synth.basic_events()
    ev += [
        mem(5.5, 1024, 1024, 2048),
        mem(6.25, -1024, 0, 2048),
        mem(7, 16, None, None, dev=-1, dtype=0),  # host memory, older layout: no totals
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 8, "args": ["damaged"]},  # args not an object
    ]
    return ev


def test_memory_events_are_read_with_their_totals(tmp_path: Path) -> None:
    m = read_memory_events(synth.write(tmp_path / "t.json", _events()))
    assert m.ts_ns.tolist() == [5500, 6250, 7000]
    assert m.delta_bytes.tolist() == [1024, -1024, 16]
    assert m.total_allocated.tolist() == [1024, 0, -1]
    assert m.total_reserved.tolist() == [2048, 2048, -1]
    assert m.device_type.tolist() == [1, 1, 0] and m.device_id.tolist() == [0, 0, -1]


def test_load_attaches_them_per_rank_and_the_cache_keeps_them(tmp_path: Path) -> None:
    p = synth.write(tmp_path / "t.json", _events(), rank=3)
    first = stepscope.load(p, cache_dir=str(tmp_path / "cache"))
    again = stepscope.load(p, cache_dir=str(tmp_path / "cache"))  # from the Parquet entry
    for t in (first, again):
        assert t.memory[3].total_allocated.tolist() == [1024, 0, -1]


def test_a_trace_without_memory_events_has_none(tmp_path: Path) -> None:
    assert stepscope.load(synth.write(tmp_path / "t.json", synth.basic_events())).memory == {}


def test_encoding_round_trips_and_damage_is_refused() -> None:
    m = MemoryEvents(
        **{
            f: np.arange(3, dtype=np.int64) * (i + 1)
            for i, f in enumerate(
                ("ts_ns", "device_type", "device_id", "delta_bytes", "total_allocated", "total_reserved")
            )
        }
    )
    back = MemoryEvents.decode(m.encode())
    assert back.total_reserved.tolist() == [0, 6, 12]
    with pytest.raises(ValueError):
        MemoryEvents.decode(b"not base64 !")


def test_real_trace_matches_a_plain_json_read() -> None:
    """Qwen1.5-0.5B on H100 (TraceLens test trace): the events and peaks json.load finds."""
    doc = json.load(gzip.open(QWEN_H100))
    want = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    m = read_memory_events(QWEN_H100)
    assert m.size == len(want)
    cuda = [e["args"] for e in want if e["args"].get("Device Type") == 1]
    sel = m.device_type == 1
    assert int(m.total_reserved[sel].max()) == max(a["Total Reserved"] for a in cuda)
    assert int(m.total_allocated[sel].max()) == max(a["Total Allocated"] for a in cuda)


def test_the_c_scanner_reads_them_in_its_own_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The C scanner's allocator events, with no second pass over the file; figures as Python's
    JSON gives them: whole numbers written as 1e3 or 2048.0 count, fractions, strings, booleans
    and values beyond int64 are absent (-1). Expected values by hand."""
    from stepscope.trace import kineto, side_events

    if kineto._fast is None:
        pytest.skip("C scanner not built")
    odd = mem(9, 1, 1, 1)
    odd["args"].update({"Bytes": 1e3, "Total Allocated": 2048.0, "Total Reserved": 1.5, "Device Id": "0"})
    odd["args"]["Device Type"] = True
    big = mem(10, -(2**63), 2**63, 99999999999999999999, dev=3)
    untimed = mem(11, 5, 5, 5)
    del untimed["ts"]
    path = synth.write(tmp_path / "t.json", [*_events(), odd, big, untimed])
    monkeypatch.setattr(side_events, "read_memory_events", lambda p: pytest.fail("second pass"))
    m = stepscope.load(path).memory[0]
    assert m.ts_ns.tolist() == [5500, 6250, 7000, 9000, 10000]
    assert m.delta_bytes.tolist() == [1024, -1024, 16, 1000, -(2**63)]
    assert m.total_allocated.tolist() == [1024, 0, -1, 2048, -1]
    assert m.total_reserved.tolist() == [2048, 2048, -1, -1, -1]
    assert m.device_id.tolist() == [0, 0, -1, -1, 3]
    assert m.device_type.tolist() == [1, 1, 0, -1, 1]
    portable = read_memory_events(path)  # the second pass agrees
    assert all(np.array_equal(getattr(m, f), getattr(portable, f)) for f in ("ts_ns", "delta_bytes", "total_reserved"))
