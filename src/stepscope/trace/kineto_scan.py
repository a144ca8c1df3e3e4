"""The C scanner (``_fastkineto.c``) over consecutive blocks of a Kineto file's event-array text.

Each block is scanned in place and its columns put in Arrow (no per-event Python object). Used by
the one-thread reader (``kineto``) and by each thread of the ranged reader (``kineto_parallel``).
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from .columns import FileRead, columns_to_tables
from .jsonsalvage import EVENT_BOUNDARY, MAX_JOIN
from .jsonstream import array_end
from .kineto_portable import salvage_region
from .limits import MAX_EVENT_BYTES
from .memory import FIELDS as MEMORY_FIELDS
from .memory import MemoryEvents

TAIL_CUT_WARNING = (
    f"the text after the event list is longer than {MAX_EVENT_BYTES >> 20} MiB: only its start was read "
    "(header keys there, such as distributedInfo, may be missing)"
)
#: event boundaries past a damaged event handed to the salvage with it (more than the pieces one
#: event may be cut into, ``jsonsalvage.MAX_JOIN``, so its joins see what the portable reader sees)
SALVAGE_SPAN = MAX_JOIN + 2


try:  # the optional C scanner (setup.py); the portable msgspec path is used without it
    from . import _fastkineto as _fast  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _fast = None

__all__ = ["BlockScanner", "FastPathFailed"]


def _ascii(data: Any) -> bool:
    """Every byte below 0x80 (one vectorized pass; such text is valid UTF-8)."""
    b = np.frombuffer(data, dtype=np.uint8)
    return b.size == 0 or int(b.max()) < 0x80


def _columns_from_c(raw: dict[str, Any]) -> dict[str, Any]:
    """Raw columns from the C scanner's buffers (no per-event Python objects)."""
    cols: dict[str, Any] = {}
    for key, val in raw.items():
        if isinstance(val, tuple):
            data, offs, valid = val
            v = np.frombuffer(valid, dtype=np.uint8)
            bitmap = pa.py_buffer(np.packbits(v, bitorder="little").tobytes())
            arr = pa.StringArray.from_buffers(len(v), pa.py_buffer(offs), pa.py_buffer(data), bitmap)
            try:  # the scanner copies bytes as they are: check UTF-8 (plain ASCII always is)
                arr.validate(full=not _ascii(data))
            except pa.ArrowInvalid:
                binary = pa.Array.from_buffers(pa.binary(), len(v), [bitmap, pa.py_buffer(offs), pa.py_buffer(data)])
                arr = pa.array(
                    [None if x is None else x.decode("utf-8", "replace") for x in binary.to_pylist()], pa.string()
                )
            cols[key] = arr
        else:
            cols[key] = np.frombuffer(val, dtype=np.int64)
    for key in ("ts", "dur"):
        cols[key] = np.where(cols[key] == np.iinfo(np.int64).min, -1, cols[key])
    return cols


class FastPathFailed(Exception):
    pass


class BlockScanner:
    """The C scanner over consecutive blocks of the event array's text, each scanned in place.

    The event cut by a block boundary (``rem``) is completed by scanning ``rem + first bytes of the
    next block`` (a small copy), after which the rest of the block is scanned without copying it.
    Once the array closes (``closed``), the text after it is the trailer (``tail``).
    """

    def __init__(self, rank: int, include_python: bool, block: int) -> None:
        self.rank, self.include_python = rank, include_python
        self.head_bytes = max(64, min(1 << 20, block // 8))
        self.tables: list[tuple[pa.Table, pa.Table | None]] = []
        self.skipped = 0
        self.closed = False
        self.tail = b""
        self.rem = b""
        self.discarding = False  # inside a damaged or oversized event: text is dropped to the next boundary
        self.pending = b""  # while discarding: the last text dropped (the array may end in it)
        self.tail_cut = False  # the text after the event array passed MAX_EVENT_BYTES
        self.memory: list[np.ndarray] = []  # allocator events, (n, 6) int64 per scanned piece
        self.salvaged = False  # damaged text was read by the portable salvage

    def scan(self, buf: bytes | memoryview) -> tuple[int, int]:
        """Scan ``buf``: (bytes consumed, status: 1 when the array closed). An event that is not
        valid JSON (status -1 at its start) is skipped to the next event boundary and counted,
        once per run of failures (a boundary inside one of its strings can make the scan fail
        twice on it). With no boundary after it in ``buf``, the rest of ``buf`` is dropped and the
        text skipped on to the next boundary (``discarding``); if none comes, :meth:`finish` looks
        for the array's end in the last text dropped (a damaged last event costs only itself)."""
        assert _fast is not None
        off = 0
        while True:
            n, consumed, status, raw = _fast.parse(buf[off:] if off else buf, self.include_python)
            mem = np.frombuffer(raw.pop("memory"), dtype=np.int64)
            if mem.size:
                self.memory.append(mem.reshape(-1, len(MEMORY_FIELDS)))
            if n:
                cols = _columns_from_c(raw)
                self.tables.append(columns_to_tables(cols, self.rank, self.include_python, prefiltered=True))
            if status >= 0:
                return off + consumed, status
            region = self._salvage(buf, off + consumed)
            if region is not None:  # read as the portable reader reads damage: the readers agree
                off = region
                continue
            first = not (off and not n)  # off > 0 and nothing read: this failure continues the last one
            m = EVENT_BOUNDARY.search(buf, off + consumed + 1)
            if m is None:
                self.skipped += first
                self.discarding = True
                self.pending = bytes(buf[off + consumed :])[-MAX_EVENT_BYTES:]
                return len(buf), 0
            self.skipped += first
            off = m.end() - 1

    def _salvage(self, buf: bytes | memoryview, start: int) -> int | None:
        """The damaged event at ``start`` and the events after it, up to the ``SALVAGE_SPAN``-th
        event boundary, read by the portable reader's salvage (``kineto_portable``); returns where
        scanning resumes (the next event), or None when ``buf`` ends before that boundary."""
        found = list(itertools.islice(EVENT_BOUNDARY.finditer(buf, start + 1), SALVAGE_SPAN))
        if len(found) < SALVAGE_SPAN or found[-1].start() - start > MAX_EVENT_BYTES:
            return None
        last = found[-1]
        self.salvaged = True
        tables, dropped = salvage_region(bytes(buf[start : last.start() + 1]), self.rank, self.include_python)
        self.tables.extend(tables)
        self.skipped += dropped
        return last.end() - 1

    def feed(self, data: bytes | bytearray) -> None:
        """Scan the next block of text. An event still incomplete after ``MAX_EVENT_BYTES`` is
        dropped (counted) and its text skipped to the next event boundary or the array's end."""
        if self.closed:
            if len(self.tail) < MAX_EVENT_BYTES:
                self.tail += bytes(data[: MAX_EVENT_BYTES - len(self.tail)])
            self.tail_cut = self.tail_cut or len(self.tail) >= MAX_EVENT_BYTES
            return
        view: memoryview | None = memoryview(bytes(data) if isinstance(data, bytearray) else data)
        if self.rem and view is not None:
            view = self._complete_cut_event(view)
        if self.discarding and view is not None:
            view = self._resume(view)
        if view is None:
            return
        consumed, status = self.scan(view)
        if status == 1:
            self.closed, self.tail, self.rem = True, bytes(view[consumed + 1 :]), b""
        elif self.discarding:  # the cut event was completed above; what is left is dropped text
            self.rem = b""
        else:
            self.rem = bytes(view[consumed:])
            if len(self.rem) > MAX_EVENT_BYTES:  # one event longer than any real one: drop it
                self.pending, self.rem, self.discarding = self.rem[-MAX_EVENT_BYTES:], b"", True
                self.skipped += 1

    def _resume(self, view: memoryview) -> memoryview | None:
        """While discarding: the text from the next event boundary on (None: none in ``view``, whose
        text is kept as the last text dropped). A boundary may straddle the block edge (its ``}``
        dropped, its ``{`` here): the search starts at the last ``}`` dropped."""
        buf = bytes(view)
        cut = self.pending.rfind(b"}")
        head = self.pending[cut:] if cut >= 0 else b""
        nxt = EVENT_BOUNDARY.search(head + buf)
        if nxt is None:
            self.pending = (self.pending + buf)[-MAX_EVENT_BYTES:]
            return None
        self.discarding, self.pending = False, b""
        return view[max(nxt.end() - 1 - len(head), 0) :]

    def finish(self) -> None:
        """After the last block: if the text was being dropped, the array may have ended in it."""
        if self.closed or not self.discarding:
            return
        end = array_end(self.pending, 0)
        if end is not None:
            self.closed, self.discarding, self.tail = True, False, self.pending[end:]
        self.pending = b""

    def _complete_cut_event(self, view: memoryview) -> memoryview | None:
        """Scan ``rem`` with the first bytes of the block ``view``: the rest of the block to scan,
        or None when nothing of it is left to scan now."""
        head = self.rem + bytes(view[: self.head_bytes])
        consumed, status = self.scan(head)
        if self.discarding:  # a damaged event with no boundary in the head: resume in the block
            self.rem = b""
            return view[self.head_bytes :] if len(view) > self.head_bytes else None
        if status == 1:
            self.closed, self.tail, self.rem = True, head[consumed + 1 :] + bytes(view[self.head_bytes :]), b""
            return None
        if len(view) <= self.head_bytes:
            self.rem = head[consumed:]
            return None
        if consumed < len(self.rem):  # one event longer than the head: join the whole block (rare)
            return memoryview(head[consumed:] + bytes(view[self.head_bytes :]))
        return view[consumed - len(self.rem) :]


def with_memory(fr: FileRead, scanners: list[BlockScanner]) -> FileRead:
    """``fr`` with the allocator events its scanners found, in file order. Unchanged when there
    are none, or when damaged text was skipped or salvaged: then the second pass
    (``memory.read_memory_events``) reads them as the portable reader does."""
    parts = [m for s in scanners for m in s.memory]
    if not parts or any(s.skipped or s.salvaged for s in scanners):
        return fr
    return replace(fr, memory=MemoryEvents.of_rows(np.concatenate(parts)))
