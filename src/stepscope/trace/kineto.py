"""Kineto / torch.profiler Chrome-trace JSON -> the normalized event table (see ``schema.py``).

Two readers give the same table: the C scanner (``_fastkineto.c``, built by setup.py when a
compiler is present) and the portable msgspec reader (``kineto_portable.py``). Both stream the
file in blocks, so memory stays bounded whatever the file size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .columns import FileRead, columns_to_tables, file_read
from .jsonsalvage import EVENT_BOUNDARY
from .jsonstream import BLOCK_BYTES, StreamState, event_text_blocks, parse_trailer
from .kineto_portable import read_portable

try:  # the optional C scanner (setup.py); the portable msgspec path is used without it
    from . import _fastkineto as _fast  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _fast = None

__all__ = ["FileRead", "read_kineto"]


def read_kineto(
    path: str | Path,
    *,
    rank: int = 0,
    include_python: bool = False,
    block: int = BLOCK_BYTES,
    force_portable: bool = False,
) -> FileRead:
    """Read one Kineto trace file into the event table (all rows get ``rank``).

    Uses the C scanner when it is built (``_fastkineto``), else msgspec; both give the same table.
    """
    p = Path(path)
    if _fast is not None and not force_portable:
        try:
            return _read_fast(p, rank, include_python, block)
        except _FastPathFailed:
            pass  # odd content: the portable path below decides (and recovers what it can)
    return read_portable(p, rank, include_python, block)


def _columns_from_c(raw: dict[str, Any]) -> dict[str, Any]:
    """Raw columns from the C scanner's buffers (no per-event Python objects)."""
    cols: dict[str, Any] = {}
    for key, val in raw.items():
        if isinstance(val, tuple):
            data, offs, valid = val
            v = np.frombuffer(valid, dtype=np.uint8)
            bitmap = pa.py_buffer(np.packbits(v, bitorder="little").tobytes())
            arr = pa.StringArray.from_buffers(len(v), pa.py_buffer(offs), pa.py_buffer(data), bitmap)
            try:
                arr.validate(full=True)  # the scanner copies bytes as they are: check UTF-8
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


class _FastPathFailed(Exception):
    pass


class _BlockScanner:
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

    def scan(self, buf: bytes | memoryview) -> tuple[int, int]:
        """Scan ``buf``: (bytes consumed, status: 1 when the array closed). An event that is not
        valid JSON (status -1 at its start) is skipped to the next event boundary and counted,
        once per run of failures (a boundary inside one of its strings can make the scan fail
        twice on it). With no boundary after it in ``buf`` the portable reader takes the file."""
        assert _fast is not None
        off = 0
        while True:
            n, consumed, status, raw = _fast.parse(buf[off:] if off else buf, self.include_python)
            if n:
                cols = _columns_from_c(raw)
                self.tables.append(columns_to_tables(cols, self.rank, self.include_python, prefiltered=True))
            if status >= 0:
                return off + consumed, status
            m = EVENT_BOUNDARY.search(buf, off + consumed + 1)
            if m is None:
                raise _FastPathFailed
            self.skipped += 0 if off and not n else 1  # off > 0: this failure continues the last one
            off = m.end() - 1

    def feed(self, data: bytes | bytearray) -> None:
        """Scan the next block of text."""
        if self.closed:
            self.tail += bytes(data)
            return
        view = memoryview(bytes(data) if isinstance(data, bytearray) else data)
        if self.rem:
            rest = self._complete_cut_event(view)
            if rest is None:
                return
            view = rest
        consumed, status = self.scan(view)
        if status == 1:
            self.closed, self.tail, self.rem = True, bytes(view[consumed + 1 :]), b""
        else:
            self.rem = bytes(view[consumed:])

    def _complete_cut_event(self, view: memoryview) -> memoryview | None:
        """Scan ``rem`` with the first bytes of the block ``view``: the rest of the block to scan,
        or None when nothing of it is left to scan now."""
        head = self.rem + bytes(view[: self.head_bytes])
        consumed, status = self.scan(head)
        if status == 1:
            self.closed, self.tail, self.rem = True, head[consumed + 1 :] + bytes(view[self.head_bytes :]), b""
            return None
        if len(view) <= self.head_bytes:
            self.rem = head[consumed:]
            return None
        if consumed < len(self.rem):  # one event longer than the head: join the whole block (rare)
            return memoryview(head[consumed:] + bytes(view[self.head_bytes :]))
        return view[consumed - len(self.rem) :]


def _read_fast(p: Path, rank: int, include_python: bool, block: int) -> FileRead:
    """C scanner path: each block scanned in place (``_BlockScanner``), its columns put in Arrow."""
    scanner = _BlockScanner(rank, include_python, block)
    state = StreamState()
    for data, state in event_text_blocks(p, block=block):  # noqa: B007  (the last state is read below)
        scanner.feed(data)
    if not scanner.closed:
        state.truncated = True  # the event array never closes: a job killed mid-write
    elif not state.truncated:
        state.header.update(parse_trailer(scanner.tail))
    return file_read(str(p), scanner.tables, state, scanner.skipped)
