"""Per-row work on string columns done once per distinct value.

Event tables hold their strings dictionary-encoded (a few thousand distinct names for millions of
rows), so a function of the string is evaluated once per dictionary entry and broadcast back to
the rows through the integer codes: no Python string per row, no Python call per row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc


def _codes(col: pa.ChunkedArray | pa.Array) -> tuple[list[Any], np.ndarray]:
    """(distinct values, code per row) with nulls coded as ``len(values)``."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_encode()
    values = arr.dictionary.to_pylist()
    return values, pc.fill_null(arr.indices, len(values)).to_numpy()  # the indices' own int type: no copy


def lookup_table(
    values: Sequence[Any] | np.ndarray, fn: Callable[[Any], Any], *, null: Any = None, dtype: npt.DTypeLike = object
) -> np.ndarray:
    """``fn(v)`` for each of ``values``, then ``null``: indexed by a column's codes into ``values``
    (the null code is ``len(values)``, or -1), it gives ``fn`` per row with one call per value."""
    lut = np.empty(len(values) + 1, dtype=dtype)
    lut[:-1] = [fn(v) for v in values]
    lut[-1] = null
    return lut


def per_value(
    col: pa.ChunkedArray | pa.Array, fn: Callable[[Any], Any], *, null: Any = None, dtype: npt.DTypeLike = object
) -> np.ndarray:
    """``fn(value)`` per row, evaluated once per distinct value; ``null`` for null rows. A column
    whose dictionary is large next to its rows (a slice of a table, one rank of many) has ``fn``
    evaluated only for the values its rows use, so the cost follows the rows, not the dictionary."""
    values, codes = _codes(col)
    if len(values) > 64 and len(values) * 8 > len(codes):
        used = np.flatnonzero(np.bincount(codes, minlength=len(values) + 1)[:-1])
        lut = np.empty(len(values) + 1, dtype=dtype)
        if used.size:
            lut[used] = [fn(values[i]) for i in used]
        lut[-1] = null
        return lut[codes]
    return lookup_table(values, fn, null=null, dtype=dtype)[codes]


def lookup_ints(values: np.ndarray, table: Mapping[int, int], default: int) -> np.ndarray:
    """``table[v]`` for each of ``values`` (``default`` for values not in it): one sort of the
    table's keys and one binary search, whatever the number of values."""
    keys = np.array(sorted(table), dtype=np.int64)
    if keys.size == 0:
        return np.full(np.shape(values), default, dtype=np.int64)
    vals = np.array([table[k] for k in keys.tolist()], dtype=np.int64)
    pos = np.clip(np.searchsorted(keys, values), 0, keys.size - 1)
    return np.where(keys[pos] == values, vals[pos], default)


def dict_mask(col: pa.ChunkedArray | pa.Array, predicate: Callable[[str], bool]) -> np.ndarray:
    """Row mask of ``predicate(value)`` (False for nulls)."""
    return per_value(col, lambda v: v is not None and bool(predicate(v)), null=False, dtype=bool)


@dataclass(frozen=True)
class DictColumn:
    """A string column as codes into its distinct values (the last value is None, for nulls):
    per-row work is done once per distinct value and broadcast back."""

    codes: np.ndarray  # int per row
    values: np.ndarray  # object: distinct strings, then None

    @classmethod
    def of(cls, col: pa.ChunkedArray | pa.Array) -> DictColumn:
        distinct, codes = _codes(col)
        values = np.empty(len(distinct) + 1, dtype=object)
        values[:-1] = distinct
        return cls(codes.astype(np.int64), values)

    def rows(self, sel: np.ndarray | None = None) -> np.ndarray:
        """Object array of the values per row (None where null)."""
        return self.values[self.codes if sel is None else self.codes[sel]]

    def map(
        self, fn: Callable[[str | None], Any], sel: np.ndarray | None = None, *, dtype: npt.DTypeLike = object
    ) -> np.ndarray:
        """``fn`` per row (of the rows ``sel``), evaluated once per distinct value (and once for null)."""
        lut = lookup_table(self.values[:-1], fn, null=fn(None), dtype=dtype)
        return lut[self.codes if sel is None else self.codes[sel]]

    def remap(self, fn: Callable[[str | None], str | None]) -> DictColumn:
        """The column with ``fn`` applied to its values (values that become equal merge)."""
        mapped = [fn(v) for v in self.values[:-1]]
        distinct = sorted({m for m in mapped if m is not None})
        index = {m: i for i, m in enumerate(distinct)}
        lut = np.array([index[m] if m is not None else len(distinct) for m in mapped] + [len(distinct)], dtype=np.int64)
        values = np.empty(len(distinct) + 1, dtype=object)
        values[:-1] = distinct
        return DictColumn(lut[self.codes], values)

    @property
    def valid(self) -> np.ndarray:
        return self.codes != self.values.size - 1
