"""The structure of JSON text without decoding it: where strings are, how deep each byte nests.

Used where a decoder cannot be trusted with the text: a file's header and trailer (the keys around
``traceEvents``), which a hostile file may nest thousands deep (every JSON decoder we use recurses,
and fails past about a thousand levels), and the search for the real top-level ``traceEvents`` key
(the same name inside a nested object, or as a string value, is not it).

Everything is vectorized (numpy) and linear in the text.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from .limits import MAX_JSON_DEPTH

_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


def _real_quotes(b: np.ndarray) -> np.ndarray:
    """Positions of the quotes that open or close a string: those not escaped by an odd run of
    backslashes (runs are measured only before the few quotes that follow a backslash)."""
    quotes = np.flatnonzero(b == ord('"'))
    after_bs = quotes[(quotes > 0) & (b[np.maximum(quotes - 1, 0)] == ord("\\"))]
    if after_bs.size == 0:
        return quotes
    backslash = b == ord("\\")
    last_other = np.maximum.accumulate(np.where(backslash, -1, np.arange(b.size)))
    run = after_bs - 1 - last_other[after_bs - 1]
    return np.setdiff1d(quotes, after_bs[run % 2 == 1], assume_unique=True)


def string_mask(text: bytes) -> np.ndarray:
    """True for each byte inside a string (its quotes included); an unterminated string runs to the end."""
    b = np.frombuffer(text, np.uint8)
    edge = np.zeros(b.size + 1, np.int32)
    q = _real_quotes(b)
    edge[q[0::2]] += 1
    edge[q[1::2] + 1] -= 1
    return np.cumsum(edge[:-1], dtype=np.int32) > 0


def max_depth(text: bytes) -> int:
    """The deepest nesting in ``text`` (0 for a scalar): only quotes and brackets are looked at."""
    b = np.frombuffer(text, np.uint8)
    br = np.flatnonzero(_OPEN[b] != 0)
    if br.size == 0:
        return 0
    q = _real_quotes(b)
    outside = np.searchsorted(q, br) % 2 == 0  # an even number of real quotes before: not in a string
    return int(np.cumsum(_OPEN[b[br[outside]]].astype(np.int32)).max(initial=0))


def depth_after(text: bytes, in_string: np.ndarray | None = None) -> np.ndarray:
    """Nesting depth after each byte (brackets inside strings do not count)."""
    b = np.frombuffer(text, np.uint8)
    step = _OPEN[b].astype(np.int32)
    step[string_mask(text) if in_string is None else in_string] = 0
    return np.cumsum(step, dtype=np.int32)


def top_level_key(text: bytes, key: bytes, tries: int = 64) -> int:
    """Offset of ``"key"`` as a key of the outermost object of ``text`` (at depth 1, outside any
    string value), or -1. ``text`` may stop anywhere after it. Only the text up to each candidate
    is examined (the key is usually within the first bytes); at most ``tries`` candidates."""
    quoted = b'"' + key + b'"'
    start = text.find(quoted)
    for _ in range(tries):
        if start < 0:
            return -1
        before = text[:start]
        inside = string_mask(before)
        depth = int(depth_after(before, inside)[-1]) if start else 0
        # a key: not inside a string, at depth 1, followed by ':'
        if not (start and inside[-1]) and depth == 1 and text[start + len(quoted) :].lstrip()[:1] == b":":
            return start
        start = text.find(quoted, start + 1)
    return -1


def decode_object_tolerant(text: bytes) -> tuple[dict[str, Any], list[str]]:
    """A JSON object's members, each decoded alone: a member whose value nests deeper than
    ``MAX_JSON_DEPTH`` or does not decode is left out and its key returned (the rest survives).
    Returns ({} , []) when ``text`` is not an object."""
    text = text.strip()
    if not text.startswith(b"{"):
        return {}, []
    inside = string_mask(text)
    depth = depth_after(text, inside)
    b = np.frombuffer(text, np.uint8)
    commas = np.flatnonzero((b == ord(",")) & ~inside & (depth == 1))
    close = np.flatnonzero((depth == 0) & ~inside)
    end = int(close[0]) if close.size else len(text)
    bounds = [0, *commas[commas < end].tolist(), end]
    out: dict[str, Any] = {}
    dropped: list[str] = []
    for a, z in zip(bounds, bounds[1:]):
        member = text[a + 1 : z].strip()
        if not member:
            continue
        key_end = member.find(b":")
        name = member[:key_end].strip().strip(b'"').decode("utf-8", "replace") if key_end > 0 else "?"
        if int(depth[a + 1 : z].max(initial=1)) - 1 > MAX_JSON_DEPTH:
            dropped.append(name)
            continue
        try:
            out.update(msgspec.json.decode(b"{" + member + b"}"))
        except (msgspec.DecodeError, RecursionError):
            dropped.append(name)
    return out, dropped


def parse_trailer(tail: bytes, warnings: list[str] | None = None) -> dict[str, Any]:
    """The keys after the event array (``, "k": v}``); {} when they do not parse."""
    tail = tail.strip().lstrip(b",").strip()
    if not tail or tail == b"}":
        return {}
    return parse_partial_object(b"{" + tail, warnings)


def parse_partial_object(text: bytes, warnings: list[str] | None = None) -> dict[str, Any]:
    """Header (``{... , "_": 0}``) or trailer (``{...}``) keys; {} when they do not parse. Keys
    nesting too deep for a decoder are left out, each named in a line added to ``warnings``."""
    text = text.strip()
    try:
        obj = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return {}
    except RecursionError:
        obj, dropped = decode_object_tolerant(text)
        if warnings is not None and dropped:
            warnings.append(
                f"left out header key(s) {', '.join(map(repr, dropped[:5]))}: nested deeper than "
                f"{MAX_JSON_DEPTH} levels"
            )
    if isinstance(obj, dict):
        obj.pop("_", None)
        return obj
    return {}
