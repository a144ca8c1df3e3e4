"""Stream a Chrome-trace JSON file as (header, event-array chunks, trailer) without holding it whole.

A Kineto trace is ``{header keys..., "traceEvents": [ev, ev, ...], trailer keys...}`` (or a bare
``[ev, ...]`` list). We read fixed-size blocks, cut the event array at event boundaries
(``}`` ``,`` ``{`` with only whitespace between) and hand each piece to a typed decoder. A boundary
found inside a nested value makes the piece invalid JSON; the caller's decode fails and
:func:`iter_event_chunks` retries at an earlier boundary, so the heuristic never silently mis-splits.
Text that does not decode at any boundary is recovered event by event (``jsonsalvage``).

Peak memory is about two blocks of text plus one chunk of decoded events, whatever the file size.
"""

from __future__ import annotations

import re
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import msgspec

from ..errors import TraceFormatError
from .jsonsalvage import EVENT_BOUNDARY, MAX_JOIN, event_end_before, salvage
from .jsontext import parse_partial_object, parse_trailer, top_level_key
from .limits import INFLATE_RATIO_GRACE_BYTES, MAX_EVENT_BYTES, MAX_INFLATE_RATIO, max_inflated_bytes

T = TypeVar("T")

BLOCK_BYTES = 16 << 20
_ARRAY_END = re.compile(rb"\}\s*\]")
_KEY = b'"traceEvents"'
_MAX_HEADER_BYTES = 256 << 20
_MAX_RETRIES = 64


@dataclass
class StreamState:
    """What the stream learned besides the events."""

    header: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False
    bytes_read: int = 0
    bytes_used: int = 0
    note: str = ""
    corrupt_events: int = 0  # events dropped because their text is not valid JSON (jsonsalvage)
    warnings: list[str] = field(default_factory=list)  # what was left out besides events


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as probe:
        return probe.read(2) == b"\x1f\x8b"


def _gunzip_blocks(fh: IO[bytes], state: StreamState, block: int, path: Path) -> Iterator[bytes]:
    """Decompress incrementally, at most ``block`` bytes at a time, so a stream cut mid-write still
    yields everything before the cut and no compressed chunk inflates into one huge buffer.
    Concatenated gzip members are read on; zero padding after the last member is ignored. A stream
    that inflates more than ``MAX_INFLATE_RATIO`` times is refused as a compression bomb; one that
    inflates past the cap (``limits.max_inflated_bytes``) is read up to it and marked truncated."""
    d = zlib.decompressobj(wbits=31)
    cap = max_inflated_bytes()
    read_in = out = 0
    padding = False
    while True:
        comp = fh.read(block // 4 or 1)
        if not comp:
            if not d.eof and not padding:
                state.truncated = True
                state.note = "compressed stream ends early"
            return
        read_in += len(comp)
        if padding:
            if comp.strip(b"\0"):
                state.warnings.append("data after the last gzip member and its zero padding was ignored")
                return
            continue
        pending = comp
        try:
            while pending:
                data = d.decompress(pending, block)
                pending = d.unconsumed_tail
                if d.eof:
                    rest = d.unused_data
                    if rest.strip(b"\0") == b"":  # zero padding (tape and block writers add it)
                        padding = True
                        pending = b""
                    else:  # another gzip member follows
                        d = zlib.decompressobj(wbits=31)
                        pending = rest + pending
                if data:
                    out += len(data)
                    _check_inflation(state, read_in - len(pending), out, cap, path)
                    state.bytes_read += len(data)
                    yield data
                    if out >= cap:
                        return
        except zlib.error as exc:
            state.truncated = True
            state.note = f"corrupt compressed data ({exc})"
            return


def _check_inflation(state: StreamState, used_in: int, out: int, cap: int, path: Path) -> None:
    """``used_in`` compressed bytes gave ``out`` bytes so far."""
    if out > INFLATE_RATIO_GRACE_BYTES and out > MAX_INFLATE_RATIO * used_in:
        raise TraceFormatError(
            f"inflates more than {MAX_INFLATE_RATIO} times its compressed size (a compression bomb?); "
            "real traces inflate 5-30 times",
            path=str(path),
            fix="if you trust the file, decompress it (gunzip -k) and pass the JSON",
        )
    if out >= cap:
        state.truncated = True
        state.note = f"inflated size reached the {cap / 2**30:g} GiB cap (--max-inflated-gb raises it)"


def file_blocks(fh: IO[bytes], state: StreamState, block: int, gz: bool, path: Path) -> Iterator[bytes]:
    """The file's bytes in blocks, inflated when ``gz`` (bombs refused, a cut stream ends the blocks)."""
    if gz:
        yield from _gunzip_blocks(fh, state, block, path)
        return
    while True:
        try:
            data = fh.read(block)
        except OSError as exc:
            # a gzip stream cut mid-write: keep what decompressed so far
            state.truncated = True
            state.note = f"compressed stream ends early ({exc.__class__.__name__})"
            return
        if not data:
            return
        state.bytes_read += len(data)
        yield data


# what a non-JSON file most likely is, by its first bytes, for the error line
_MAGIC = (
    (b"SQLite format 3\x00", "an SQLite database (an Nsight Systems export? those are read from local files)"),
    (b"PK\x03\x04", "a zip archive that is not an nsys-jax output (no pfs/ parquet member)"),
    (b"\x89PNG", "a PNG image"),
)


def _not_json(head: bytes) -> str:
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return f"not JSON: {what}"
    return "not JSON (does not start with '{' or '[')"


def event_text_blocks(path: Path, *, block: int = BLOCK_BYTES) -> Iterator[tuple[bytes | bytearray, StreamState]]:
    """Yield the text of the event array in blocks: the first block starts right after the
    array's ``[``; later blocks continue the file. The header (keys before ``traceEvents``) is
    parsed into ``state.header``; the trailer is left to the consumer (see :func:`parse_trailer`).
    """
    state = StreamState()
    gz = is_gzip(path)
    with open(path, "rb") as fh:
        blocks = file_blocks(fh, state, block, gz, path)
        buf = bytearray()
        start = -1
        for data in blocks:
            buf += data
            head = bytes(buf[:64]).lstrip(b"\xef\xbb\xbf \t\r\n")
            if not head:
                continue
            if head[:1] == b"[":
                start = buf.index(b"[") + 1
                break
            if head[:1] != b"{":
                raise TraceFormatError(
                    _not_json(head), path=str(path), fix="pass a PyTorch profiler / Kineto .json or .json.gz trace"
                )
            key = top_level_key(bytes(buf), _KEY.strip(b'"'))
            if key >= 0:
                m = re.compile(rb"\s*:\s*\[").match(buf, key + len(_KEY))
                if m is None:
                    if len(buf) - key > 64:
                        raise TraceFormatError(
                            "'traceEvents' is not a list", path=str(path), fix="is this a Chrome trace?"
                        )
                    continue
                state.header = parse_partial_object(bytes(buf[:key]) + b'"_": 0}', state.warnings)
                start = m.end()
                break
            if len(buf) > _MAX_HEADER_BYTES:
                break
        if start < 0:
            if state.truncated and not buf:
                raise TraceFormatError(
                    f"unreadable gzip file ({state.note})",
                    path=str(path),
                    fix="check the file is a complete .json.gz trace",
                )
            if not bytes(buf).strip():
                raise TraceFormatError(
                    "file is empty", path=str(path), fix="the profiler wrote nothing; re-run the capture"
                )
            raise TraceFormatError(
                "no 'traceEvents' list found",
                path=str(path),
                fix="pass a PyTorch profiler / Kineto Chrome-trace JSON (torch.profiler export_chrome_trace)",
            )
        del buf[:start]
        state.bytes_used = start
        yield buf, state
        for data in blocks:
            yield data, state


def iter_event_chunks(
    path: Path,
    decode: Callable[[bytes], T],
    *,
    block: int = BLOCK_BYTES,
) -> Iterator[tuple[T, StreamState]]:
    """Yield ``decode(b"[" + events_text + b"]")`` for consecutive pieces of the event array.

    ``decode`` must raise ``msgspec.DecodeError`` on invalid JSON. The state object (shared,
    updated in place) carries the parsed header/trailer and whether the file was truncated.
    """
    buf = bytearray()
    state = StreamState()
    base = 0
    discarding = False  # inside an event still incomplete after MAX_EVENT_BYTES (as the C scanner drops it)
    for data, state in event_text_blocks(path, block=block):
        if not base:
            base = state.bytes_used
        buf += data
        if discarding:
            discarding = _skip_to_boundary(buf, block)
        while not discarding and len(buf) > 2 * block:
            cut = _decode_upto_boundary(buf, decode, len(buf) - block, path)
            if cut is not None:
                value, end = cut
                yield value, state
            else:  # no boundary near the window's end decodes: a corrupt event inside the window
                found = event_end_before(buf, decode, len(buf) - block)
                if found is None:
                    if len(buf) > MAX_EVENT_BYTES + block:  # the first event is longer than any real one
                        state.corrupt_events += 1
                        discarding = _skip_to_boundary(buf, block, MAX_EVENT_BYTES)
                    break
                end = found
                yield from ((v, state) for v in _salvaged(buf, decode, end, state))
            nxt = buf.index(b"{", end)
            del buf[:nxt]
            base += nxt
            state.bytes_used = base
    if discarding:  # the dropped event was the last one: the array may end after it
        closing = array_end(buf, 0)
        state.truncated = closing is None
        if closing is not None:
            state.header.update(parse_trailer(bytes(buf[closing:]), state.warnings))
        return
    yield from _finish(buf, decode, state, path)
    state.bytes_used = state.bytes_read


def _skip_to_boundary(buf: bytearray, block: int, start: int = 0) -> bool:
    """Drop ``buf`` up to the next event boundary at or after ``start`` (the next event then starts
    it): False. With none, keep only the last ``block`` bytes (the boundary or the array's end may
    begin there): True, still discarding."""
    m = EVENT_BOUNDARY.search(buf, start)
    if m is not None:
        del buf[: m.end() - 1]
        return False
    del buf[: max(0, len(buf) - block)]
    return True


def _decode_upto_boundary(
    buf: bytearray, decode: Callable[[bytes], T], search_from: int, path: Path
) -> tuple[T, int] | None:
    """Decode events up to the last boundary before ``search_from``; return (value, end)."""
    window = 1 << 20
    tried = 0
    hi = len(buf)
    while tried < _MAX_RETRIES:
        lo = max(0, min(search_from, hi) - window)
        cands = [m.start() for m in EVENT_BOUNDARY.finditer(buf, lo, hi)]
        if not cands:
            if lo == 0:
                return None
            window *= 4
            continue
        for pos in reversed(cands):
            tried += 1
            try:
                return decode(b"[" + bytes(buf[: pos + 1]) + b"]"), pos + 1
            except msgspec.DecodeError:
                if tried >= _MAX_RETRIES:
                    return None
        hi = cands[0]
    return None


def _finish(
    buf: bytearray, decode: Callable[[bytes], T], state: StreamState, path: Path
) -> Iterator[tuple[T, StreamState]]:
    stripped = bytes(buf).lstrip()
    if stripped.startswith(b"]"):
        state.header.update(parse_trailer(stripped[1:], state.warnings))
        return
    # Normal case: the array closes, then (for the object form) the trailer keys follow.
    for tried, m in enumerate(_ARRAY_END.finditer(buf)):
        if tried >= _MAX_RETRIES:
            break
        try:
            value = decode(b"[" + bytes(buf[: m.start() + 1]) + b"]")
        except msgspec.DecodeError:
            continue
        tail = bytes(buf[m.end() :])
        if not state.truncated:
            state.header.update(parse_trailer(tail, state.warnings))
        yield value, state
        return
    # No close decodes: the array never closes (a job killed mid-write) or an event in it is
    # corrupt (a flipped byte, a writer's bug). Keep every complete event that decodes (a cut that
    # decodes, taken alone, could stop before a corrupt event and lose all after it). Whether the
    # array closes after all (and the trailer) is read from the last event: tried from each of
    # the last boundaries, as one inside its strings may be the last one.
    state.truncated = True
    tail_bounds: deque[re.Match[bytes]] = deque(EVENT_BOUNDARY.finditer(buf), maxlen=MAX_JOIN)
    if not tail_bounds:
        return
    for b in reversed(tail_bounds):
        last = b.end() - 1
        for tried, m in enumerate(_ARRAY_END.finditer(buf, last)):
            if tried >= _MAX_RETRIES:
                break
            try:
                value = decode(b"[" + bytes(buf[last : m.start() + 1]) + b"]")
            except msgspec.DecodeError:
                continue
            yield from ((v, state) for v in _salvaged(buf, decode, b.start() + 1, state))
            state.truncated = False
            state.bytes_used = state.bytes_read
            state.header.update(parse_trailer(bytes(buf[m.end() :]), state.warnings))
            yield value, state
            return
    end = tail_bounds[-1].start() + 1
    yield from ((v, state) for v in _salvaged(buf, decode, end, state))
    closing = array_end(buf, tail_bounds[-1].end())
    if closing is not None:  # the array does close: only its last event is damaged
        state.corrupt_events += 1
        state.truncated = False
        state.bytes_used = state.bytes_read
        state.header.update(parse_trailer(bytes(buf[closing:]), state.warnings))
        return
    state.bytes_used += end


def array_end(buf: bytes | bytearray | memoryview, start: int) -> int | None:
    """Where the text after the event array starts, when the array closes in ``buf`` after
    ``start`` and no event follows: a ``}`` ``]`` followed by nothing, ``}``, or keys that parse
    as the rest of the file's object. A ``}]`` inside a damaged event's args is not the end. Both
    readers ask it where the text at the end of a file was damaged."""
    for tried, m in enumerate(_ARRAY_END.finditer(buf, start)):
        if tried >= _MAX_RETRIES:
            break
        rest = bytes(buf[m.end() :]).strip()
        if rest in (b"", b"}") or (rest.startswith(b",") and parse_trailer(rest)):
            return m.end()
    return None


def _salvaged(buf: bytearray, decode: Callable[[bytes], T], end: int, state: StreamState) -> list[T]:
    """``jsonsalvage.salvage`` of ``buf[:end]``, its dropped events counted in ``state``."""
    values, dropped = salvage(buf, decode, end)
    state.corrupt_events += dropped
    return values
