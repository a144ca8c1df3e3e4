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
