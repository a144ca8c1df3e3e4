"""Allocator events (Kineto ``[memory]`` instant events, ``profile_memory=True``): the device's
allocated and reserved memory over time.

Each event is one allocation (``Bytes`` > 0) or free (``Bytes`` < 0) by the framework's allocator,
at the host time it happened, with the allocator's totals after it on that device:
``Total Allocated`` (bytes in live tensors) and ``Total Reserved`` (bytes the caching allocator
holds from the driver: allocated plus cached free blocks). ``Device Type`` is c10's
(0 CPU, 1 CUDA; ROCm builds report CUDA too), ``Device Id`` the device index (-1 for the host).
Older traces (2021) carry only ``Bytes``: their totals are -1.

The C scanner reads them in its own pass (``kineto_scan.with_memory``). Otherwise (the portable
reader, or damaged text the scanner skipped) :func:`read_memory_events` reads them in a second
streamed pass over the file, only when the event table has ``[memory]`` rows
(``jsonstream.iter_event_chunks``): the raw events whose text names ``[memory]`` are kept, then
decoded together in one call.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from .jsonstream import iter_event_chunks
from .numparse import raw_lines_to_ns

MEMORY_EVENT = "[memory]"
_MARK = b'"[memory]"'
#: the columns, in the order the C scanner writes each event's six figures (``_fastkineto.c``)
FIELDS = ("ts_ns", "device_type", "device_id", "delta_bytes", "total_allocated", "total_reserved")


class _Ev(msgspec.Struct):
    name: Any = None
    ts: msgspec.Raw = msgspec.Raw(b"")
    args: Any = None


#: args key -> column
#: the args keys of ``FIELDS[1:]``, in that order
_ARGS = ("Device Type", "Device Id", "Bytes", "Total Allocated", "Total Reserved")


_PIECE = msgspec.json.Decoder(list[msgspec.Raw])
_EVENTS = msgspec.json.Decoder(list[_Ev])
_EVENT = msgspec.json.Decoder(_Ev)


@dataclass(frozen=True)
class MemoryEvents:
    """Allocator events in file order, one value per event in each array (int64; -1 where the
    event does not carry the figure)."""

    ts_ns: np.ndarray
    device_type: np.ndarray
    device_id: np.ndarray
    delta_bytes: np.ndarray  # the allocation (> 0) or free (< 0)
    total_allocated: np.ndarray
    total_reserved: np.ndarray

    def __post_init__(self) -> None:
        n = self.ts_ns.size
        if any(getattr(self, f).size != n for f in FIELDS):
            raise ValueError("memory event columns of different lengths")

    @classmethod
    def of_rows(cls, rows: np.ndarray) -> MemoryEvents:
        """From ``(n, 6)`` rows in ``FIELDS`` order; events without a time are left out."""
        rows = rows[rows[:, 0] >= 0]
        return cls(**{f: np.ascontiguousarray(rows[:, i]) for i, f in enumerate(FIELDS)})

    @property
    def size(self) -> int:
        return int(self.ts_ns.size)

    def encode(self) -> bytes:
        """Compact text (base64 of zlib of the int64 columns): for a Parquet cache entry's metadata."""
        raw = np.stack([getattr(self, f).astype(np.int64) for f in FIELDS]).tobytes()
        return base64.b64encode(zlib.compress(raw, 6))

    @classmethod
    def decode(cls, text: bytes) -> MemoryEvents:
        """The inverse of :meth:`encode`; raises ``ValueError`` on damaged text."""
        try:
            raw = zlib.decompress(base64.b64decode(text, validate=True))
        except (zlib.error, ValueError) as e:
            raise ValueError(f"damaged memory events: {e}") from None
        if len(raw) % (8 * len(FIELDS)):
            raise ValueError("damaged memory events: length")
        cols = np.frombuffer(raw, dtype=np.int64).reshape(len(FIELDS), -1)
        return cls(**{f: cols[i].copy() for i, f in enumerate(FIELDS)})


def _decode(text: bytes) -> list[msgspec.Raw]:
    try:
        return _PIECE.decode(text)
    except RecursionError:
        raise msgspec.DecodeError("nested too deep") from None


def _pieces(path: Path) -> Iterator[bytes]:
    """The raw text of the events that name ``[memory]``, a piece of the event array at a time."""
    for pieces, _state in iter_event_chunks(path, _decode):
        hits = [b for b in map(bytes, pieces) if _MARK in b]
        if hits:
            yield b"[" + b",".join(hits) + b"]"


def _int(v: Any) -> int:
    """An integer figure, or -1 (absent, not an integer, a bool, or beyond int64)."""
    if isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63:
        return v
    if isinstance(v, float) and v.is_integer() and abs(v) < 9.2e18:
        return int(v)
    return -1


def _events(text: bytes) -> list[_Ev]:
    """The piece's memory events; when the piece does not decode as a whole, each event alone
    (a damaged one is skipped)."""
    try:
        got = _EVENTS.decode(text)
    except (msgspec.DecodeError, RecursionError):
        got = []
        for raw in _decode(text):
            try:
                got.append(_EVENT.decode(raw))
            except (msgspec.DecodeError, RecursionError):
                continue
    return [e for e in got if e.name == MEMORY_EVENT and isinstance(e.args, dict)]


def read_memory_events(path: str | Path) -> MemoryEvents:
    """The file's ``[memory]`` events (with a time and an args object), streamed."""
    events: list[_Ev] = []
    for text in _pieces(Path(path)):
        events += _events(text)
    ts = raw_lines_to_ns(b"\n".join(bytes(e.ts) for e in events), len(events)).astype(np.int64)
    args = [np.array([_int(e.args.get(key)) for e in events], dtype=np.int64) for key in _ARGS]
    return MemoryEvents.of_rows(np.column_stack([ts, *args]))
