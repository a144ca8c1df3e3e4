"""Events kept around damaged text in a Chrome-trace event array (a flipped byte, a writer's bug,
a file cut mid-write): the text is split at event boundaries (``}`` ``,`` ``{`` with only
whitespace between) and the pieces that decode are kept, exactly as a clean file gives them.
Only damaged files come here; ``jsonstream`` calls it where a decode fails.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from typing import TypeVar

import msgspec
import numpy as np

EVENT_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
MAX_JOIN = 16  # pieces one event may be cut into by boundaries inside its strings

T = TypeVar("T")


def event_end_before(buf: bytearray, decode: Callable[[bytes], T], before: int) -> int | None:
    """The end (just after the ``}``) of the last event that closes before ``before``: of the last
    boundaries there, the first whose preceding piece decodes alone (a boundary inside a string
    cuts an event in two), else the last one."""
    tail: deque[re.Match[bytes]] = deque(EVENT_BOUNDARY.finditer(buf, 0, before), maxlen=MAX_JOIN + 1)
    if not tail:
        return None
    for prev, b in reversed(list(zip(tail, list(tail)[1:]))):
        try:
            decode(b"[" + bytes(buf[prev.end() - 1 : b.start() + 1]) + b"]")
        except msgspec.DecodeError:
            continue
        return b.start() + 1
    return tail[-1].start() + 1


def salvage(buf: bytearray, decode: Callable[[bytes], T], end: int) -> tuple[list[T], int]:
    """Decode ``buf[:end]`` (whole events) around the ones that are not valid JSON (a flipped
    byte, a writer's bug). The text is split at event boundaries, groups of pieces decoded, and a
    group that fails halved until the failing pieces stand alone. A lone piece that fails is
    either corrupt or part of an event a boundary inside one of its strings cut (a kernel name
    with "}, {" in it): consecutive failing pieces are rejoined, and what still fails is dropped.
    Returns the decoded groups in text order and the number of dropped events (a run of dropped
    pieces is one). Every decode is of a contiguous slice of the original text, so the events kept
    are exactly what a clean file gives. About 2 x the text is decoded per corrupt event."""
    bounds = list(EVENT_BOUNDARY.finditer(buf, 0, end))
    starts = [0] + [m.end() - 1 for m in bounds]
    stops = [m.start() + 1 for m in bounds] + [end]

    def pieces(lo: int, hi: int) -> T:
        return decode(b"[" + bytes(buf[starts[lo] : stops[hi - 1]]) + b"]")

    good: list[tuple[int, T]] = []
    failed: list[int] = []
    pending = [(0, len(starts))]
    while pending:
        lo, hi = pending.pop()
        try:
            good.append((lo, pieces(lo, hi)))
        except msgspec.DecodeError:
            if hi - lo == 1:
                failed.append(lo)
            else:
                pending += [((lo + hi) // 2, hi), (lo, (lo + hi) // 2)]
    failed.sort()
    i, last_dropped, dropped = 0, -2, 0
    while i < len(failed):
        lo, joined = failed[i], False
        run = 1
        while i + run < len(failed) and failed[i + run] == lo + run and run < MAX_JOIN:
            run += 1
        for k in range(2, run + 1):  # lo alone failed already
            try:
                good.append((lo, pieces(lo, lo + k)))
            except msgspec.DecodeError:
                continue
            i, joined = i + k, True
            break
        if not joined:
            lead = _leading_event(buf, starts[lo], stops[lo], decode)
            if lead is not None:  # a whole event, then damaged text: keep the event (as the C scanner does)
                good.append((lo, lead))
            dropped += int(lo != last_dropped + 1)  # a run of dropped pieces is one event
            last_dropped = lo
            i += 1
    good.sort(key=lambda t: t[0])
    return [v for _, v in good], dropped


def _leading_event(buf: bytearray, start: int, stop: int, decode: Callable[[bytes], T]) -> T | None:
    """The complete, valid event object that opens ``buf[start:stop]`` when damaged text follows
    it (the C scanner reads such an event, then skips the damage), else None."""
    from .jsontext import depth_after

    text = bytes(buf[start:stop])
    if not text.startswith(b"{"):
        return None
    closed = np.flatnonzero(depth_after(text) == 0)
    if closed.size == 0 or closed[0] + 1 >= len(text):
        return None
    try:
        return decode(b"[" + text[: closed[0] + 1] + b"]")
    except msgspec.DecodeError:
        return None
