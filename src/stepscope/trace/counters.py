"""CUPTI range-profiler counters (``cuda_profiler_range`` events): measured FLOPs per kernel.

Kineto's CUPTI range profiler records one event per kernel (replayed to collect counters) with
``smsp__sass_thread_inst_executed_op_{d,f,h}{add,mul,fma}_pred_on.sum`` in its args. Measured
FLOPs = add + mul + 2 * fma per precision (tensor-core instructions are not in these counters).
DRAM counters (``dram__bytes_read.sum`` / ``dram__bytes_write.sum``) are used when present.
These traces are small (the profiler replays each kernel), so they are decoded with plain msgspec.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from .jsonstream import open_text_events
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
    cat: str | None = None
    name: str = ""
    ts: msgspec.Raw = msgspec.Raw(b"0")
    dur: msgspec.Raw = msgspec.Raw(b"0")
    args: dict[str, Any] = {}


def read_counter_ranges(path: str | Path) -> list[CounterRange]:
    out = []
    for e in open_text_events(Path(path), _Ev):
        if e.cat != "cuda_profiler_range":
            continue
        flops: dict[str, float] = {}
        for p, dtype in _PREC.items():
            key = "smsp__sass_thread_inst_executed_op_{}{}_pred_on.sum"
            add, mul, fma = (float(e.args.get(key.format(p, op), 0) or 0) for op in ("add", "mul", "fma"))
            if add or mul or fma:
                flops[dtype] = add + mul + 2 * fma
        rd, wr = e.args.get("dram__bytes_read.sum"), e.args.get("dram__bytes_write.sum")
        dram = float(rd or 0) + float(wr or 0) if (rd is not None or wr is not None) else None
        ts, dur = raw_lines_to_ns(bytes(e.ts) + b"\n" + bytes(e.dur), 2).tolist()
        out.append(CounterRange(e.name, ts, dur, flops, dram))
    return out
