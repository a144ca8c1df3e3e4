"""Exact conversion of Chrome-trace microsecond numbers to integer nanoseconds.

Kineto writes ``ts``/``dur`` in microseconds, since torch 2.x with up to three decimals
("1712195495519695.8"). A float64 holds ~15.9 significant digits, so epoch-scale microsecond
timestamps lose the nanoseconds if parsed as floats. We parse the decimal text instead:
``ns = int(integer_part) * 1000 + int(first three fraction digits, right-padded)``.
Digits past the third decimal are truncated. Numbers in exponent notation (never seen from
Kineto) fall back to float parsing for those rows only.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# quoted numbers: msprof writes "ts": "1.5"; at most 18 integer digits (int64), longer is the slow path
_PATTERN = r'^"?(?P<i>-?\d{1,18})(?:\.(?P<f>\d{0,3})\d*)?"?$'
_MAX_US = np.iinfo(np.int64).max // 1000 - 1  # microseconds whose nanoseconds fit int64


def raw_lines_to_ns(joined: bytes, count: int) -> np.ndarray:
    """Parse ``count`` newline-separated JSON numbers (microseconds) into int64 ns; empty -> -1."""
    if count == 0:
        return np.empty(0, dtype=np.int64)
    text = pa.array(joined.split(b"\n"), type=pa.binary()).cast(pa.string())
    if len(text) != count:  # pragma: no cover - defensive; a number never contains a newline
        raise ValueError(f"expected {count} numbers, got {len(text)}")
    return strings_to_ns(text)


def strings_to_ns(text: pa.Array) -> np.ndarray:
    """Decimal microsecond strings (quoted or not; null or empty -> -1) into int64 ns, exactly."""
    parts = pc.extract_regex(text, _PATTERN)
    int_part = pc.struct_field(parts, "i")
    frac = pc.struct_field(parts, "f")
    ok = pc.is_valid(parts).to_numpy(zero_copy_only=False)
    ip = pc.cast(pc.fill_null(int_part, "0"), pa.int64()).to_numpy()
    ok &= np.abs(ip) <= _MAX_US  # beyond: the nanoseconds would overflow (the slow path refuses them)
    fp = pc.cast(pc.utf8_rpad(pc.fill_null(frac, "0"), width=3, padding="0"), pa.int64()).to_numpy()
    neg = pc.fill_null(pc.starts_with(int_part, "-"), False).to_numpy(zero_copy_only=False)
    ns = ip * 1000 + np.where(neg, -fp, fp)  # "-0.5": integer part 0, still negative
    if not ok.all():
        ns = ns.copy()
        bad = np.flatnonzero(~ok)
        raw = text.take(pa.array(bad)).to_pylist()
        ns[bad] = [_slow(v) for v in raw]
    return ns


_JSON_NUMBER = re.compile(r'"?(-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)"?')


def _slow(v: str | None) -> int:
    """A JSON number in exponent form (as the C scanner reads it); anything else ("0x10", "inf",
    " 12", a value whose nanoseconds do not fit int64) is -1 (unusable)."""
    m = _JSON_NUMBER.fullmatch(v or "")
    if m is None:
        return -1
    us = float(m.group(1))
    return int(round(us * 1000.0)) if math.isfinite(us) and abs(us) <= 9.2e15 else -1
