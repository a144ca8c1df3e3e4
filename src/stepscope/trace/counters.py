"""CUPTI range-profiler counters (``cuda_profiler_range`` events): measured FLOPs per kernel.

Kineto's CUPTI range profiler records one event per kernel (replayed to collect counters) with
``smsp__sass_thread_inst_executed_op_{d,f,h}{add,mul,fma}_pred_on.sum`` in its args. Measured
FLOPs = add + mul + 2 * fma per precision (tensor-core instructions are not in these counters).
DRAM counters (``dram__bytes_read.sum`` / ``dram__bytes_write.sum``) are used when present.
The file is streamed (``jsonstream.iter_event_chunks``): its events are validated as raw text and
only those whose text names the counter category are converted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from .jsonstream import iter_event_chunks
from .limits import MAX_NAME_BYTES
from .numparse import raw_lines_to_ns

_PREC = {"d": "fp64", "f": "fp32", "h": "fp16"}


@dataclass(frozen=True)
class CounterRange:
    name: str
    ts_ns: int
    dur_ns: int
    flops: dict[str, float]  # by precision
    dram_bytes: float | None


class _Ev(msgspec.Struct):
    cat: Any = None
    name: Any = ""
    ts: msgspec.Raw = msgspec.Raw(b"0")
    dur: msgspec.Raw = msgspec.Raw(b"0")
    args: Any = None


_PIECE = msgspec.json.Decoder(list[msgspec.Raw])
_EVENT = msgspec.json.Decoder(_Ev)
_MARK = b"cuda_profiler_range"


def _decode(text: bytes) -> list[msgspec.Raw]:
    """One piece of the event array as raw events (validated, not converted); nesting too deep
    for the decoder fails the piece like any invalid JSON (the stream then splits it)."""
    try:
        return _PIECE.decode(text)
    except RecursionError:
        raise msgspec.DecodeError("nested too deep") from None


def _counter_events(path: Path) -> Iterator[_Ev]:
    """The ``cuda_profiler_range`` events, converted only when their text names them."""
    for pieces, _state in iter_event_chunks(path, _decode):
        for raw in pieces:
            if _MARK in bytes(raw):
                try:
                    e = _EVENT.decode(raw)
                except (msgspec.DecodeError, RecursionError):
                    continue
                if e.cat == "cuda_profiler_range":
                    yield e


#: a counter of instructions or bytes above this is damaged (1e18 is 1,000 s of a 1 PFLOP/s device)
_MAX_COUNT = 1e18


def _number(v: Any) -> float:
    """A counter value: an int or float in [0, 1e18], else 0 (a string, a list, null, a negative
    or absurd count: damaged)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= _MAX_COUNT:
        return float(v)
    return 0.0


def read_counter_ranges(path: str | Path) -> list[CounterRange]:
    """The file's ``cuda_profiler_range`` events, streamed (``jsonstream.iter_event_chunks``)."""
    out = []
    for e in _counter_events(Path(path)):
        args = e.args if isinstance(e.args, dict) else {}
        flops: dict[str, float] = {}
        for p, dtype in _PREC.items():
            key = "smsp__sass_thread_inst_executed_op_{}{}_pred_on.sum"
            add, mul, fma = (_number(args.get(key.format(p, op))) for op in ("add", "mul", "fma"))
            if add or mul or fma:
                flops[dtype] = add + mul + 2 * fma
        rd, wr = args.get("dram__bytes_read.sum"), args.get("dram__bytes_write.sum")
        dram = _number(rd) + _number(wr) if (rd is not None or wr is not None) else None
        ts, dur = raw_lines_to_ns(bytes(e.ts) + b"\n" + bytes(e.dur), 2).tolist()
        out.append(CounterRange(str(e.name)[:MAX_NAME_BYTES], ts, dur, flops, dram))
    return out
