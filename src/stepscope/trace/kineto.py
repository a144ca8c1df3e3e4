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


def _read_fast(p: Path, rank: int, include_python: bool, block: int) -> FileRead:
    """C scanner path: scan each block in place, convert its columns to Arrow.

    The event cut by a block boundary is completed by scanning ``carry + first bytes of the next
    block`` (a small copy), after which the rest of the block is scanned without copying it.
    """
    assert _fast is not None
    tables: list[tuple[pa.Table, pa.Table | None]] = []
    state = StreamState()
    closed = False
    tail = b""
    rem = b""
    head_bytes = max(64, min(1 << 20, block // 8))

    skipped = 0

    def scan(buf: bytes | memoryview) -> tuple[int, int]:
        """Scan ``buf``; an event that is not valid JSON (status -1 at its start) is skipped to the
        next event boundary and counted, once per run of failures (a boundary inside one of its
        strings can make the scan fail twice on it). With no boundary after it in ``buf`` the
        portable reader takes the file."""
        nonlocal skipped
        off = 0
        while True:
            n, consumed, status, raw = _fast.parse(buf[off:] if off else buf, include_python)
            if n:
                tables.append(columns_to_tables(_columns_from_c(raw), rank, include_python, prefiltered=True))
            if status >= 0:
                return off + consumed, status
            m = EVENT_BOUNDARY.search(buf, off + consumed + 1)
            if m is None:
                raise _FastPathFailed
            skipped += 0 if off and not n else 1  # off > 0: this failure continues the last one
            off = m.end() - 1

    for data, state in event_text_blocks(p, block=block):  # noqa: B007  (the last state is read below)
        if closed:
            tail += bytes(data)
            continue
        view = memoryview(bytes(data) if isinstance(data, bytearray) else data)
        if rem:
            head = rem + bytes(view[:head_bytes])
            consumed, status = scan(head)
            if status == 1:
                closed, tail, rem = True, head[consumed + 1 :] + bytes(view[head_bytes:]), b""
                continue
            if len(view) <= head_bytes:
                rem = head[consumed:]
                continue
            if consumed < len(rem):  # one event longer than the head: join the whole block (rare)
                view = memoryview(head[consumed:] + bytes(view[head_bytes:]))
            else:
                view = view[consumed - len(rem) :]
        consumed, status = scan(view)
        if status == 1:
            closed, tail, rem = True, bytes(view[consumed + 1 :]), b""
            continue
        rem = bytes(view[consumed:])
    if not closed:
        state.truncated = True  # the event array never closes: a job killed mid-write
    elif not state.truncated:
        state.header.update(parse_trailer(tail))
    return file_read(str(p), tables, state, skipped)
