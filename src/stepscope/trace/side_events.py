"""Second passes over a Kineto file for events the event table holds only as rows: CUPTI
range-profiler counters (``counters.py``) and allocator events (``memory.py``). Each runs only when
the table shows such rows, so a trace without them costs nothing more. The C scanner reads the
allocator events in its own pass (``kineto_scan.with_memory``): then none is needed for them."""

from __future__ import annotations

from dataclasses import replace

from .columns import FileRead
from .counters import read_counter_ranges
from .dictcol import dict_mask
from .memory import MEMORY_EVENT, read_memory_events


def with_side_events(fr: FileRead) -> FileRead:
    """``fr`` with its counters and allocator events, where the table has their rows."""
    if not fr.table.num_rows:
        return fr
    if dict_mask(fr.table["kind"], lambda k: k == "counter_range").any():
        fr = replace(fr, counters=tuple(read_counter_ranges(fr.path)))
    if fr.memory is None and dict_mask(fr.table["name"], lambda n: n == MEMORY_EVENT).any():
        fr = replace(fr, memory=read_memory_events(fr.path))
    return fr
