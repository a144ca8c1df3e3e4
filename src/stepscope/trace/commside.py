"""The collective side table (``schema.COMM_ARGS_SCHEMA``): built from a reader's raw columns, and
looked up by event row.

The side table holds the few events that carry collective args, each by its row in the rank's event
table; these functions give, for any rows of that table, the side entry and its values (one sort of
the side rows and one binary search, no per-row Python).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import schema


def side_index(comm: pa.Table | None, rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows``: the index of its entry in ``comm``, -1 when it has none. A row listed
    twice takes its last entry."""
    rows = np.asarray(rows, dtype=np.int64)
    if comm is None or comm.num_rows == 0 or rows.size == 0:
        return np.full(rows.size, -1, dtype=np.int64)
    at = comm["row"].to_numpy().astype(np.int64)
    order = np.argsort(at, kind="stable")
    sorted_at = at[order]
    pos = np.clip(np.searchsorted(sorted_at, rows, side="right") - 1, 0, None)
    return np.where(sorted_at[pos] == rows, order[pos], -1)


def side_column(comm: pa.Table | None, name: str, rows: np.ndarray) -> pa.Array:
    """Column ``name`` of the side table for each of ``rows``: null (strings) or -1 (ints) where a
    row has no entry."""
    return side_columns(comm, (name,), rows)[name]


def side_columns(comm: pa.Table | None, names: tuple[str, ...], rows: np.ndarray) -> dict[str, pa.Array]:
    """``side_column`` for several names, the rows looked up once."""
    idx = side_index(comm, rows)
    found = idx >= 0
    take = pa.array(np.where(found, idx, 0), mask=~found)
    out = {}
    for name in names:
        field = schema.COMM_ARGS_SCHEMA.field(name)
        is_int = name in schema.COMM_INT_COLUMNS
        if comm is None or not found.any():
            out[name] = (
                pa.array(np.full(idx.size, -1, dtype=field.type.to_pandas_dtype()))
                if is_int
                else pa.nulls(idx.size, field.type)
            )
            continue
        got = comm[name].combine_chunks().take(take)
        out[name] = pc.fill_null(got, pa.scalar(-1, field.type)) if is_int else got
    return out


def rows_with(comm: pa.Table | None, name: str = "collective") -> np.ndarray:
    """The event rows whose side entry has ``name`` set (sorted, each once)."""
    if comm is None or comm.num_rows == 0:
        return np.empty(0, dtype=np.int64)
    col = comm[name]
    ok = pc.is_valid(col) if name not in schema.COMM_INT_COLUMNS else pc.greater_equal(col, 0)
    return np.unique(comm["row"].to_numpy()[ok.to_numpy(zero_copy_only=False)].astype(np.int64))


#: raw column -> side-table column (``schema.COMM_ARGS_SCHEMA``)
_COMM_RAW = {
    "collective": "collective",
    "in_msg_nelems": "in_msg_nelems",
    "out_msg_nelems": "out_msg_nelems",
    "dtype": "msg_dtype",
    "group_size": "group_size",
    "pg_name": "pg_name",
    "pg_desc": "pg_desc",
    "pg_ranks": "pg_ranks",
    "in_split": "in_split",
    "out_split": "out_split",
}


def comm_side_table(cols: dict[str, Any]) -> pa.Table | None:
    """The rows of raw columns ``cols`` that carry any collective arg, as the side table (None: none)."""
    present = [raw for raw in _COMM_RAW if raw in cols]
    if not present:
        return None
    has = np.zeros(len(cols["ph"]), dtype=bool)
    for raw in present:
        v = cols[raw]
        has |= pc.is_valid(v).to_numpy(zero_copy_only=False) if isinstance(v, pa.Array) else np.asarray(v) >= 0
    rows = np.flatnonzero(has)
    if rows.size == 0:
        return None
    out: dict[str, Any] = {"row": pa.array(rows.astype(np.int64))}
    take = pa.array(rows)
    for raw, name in _COMM_RAW.items():
        v = cols.get(raw)
        if v is None:
            out[name] = (
                pa.nulls(rows.size, schema.COMM_ARGS_SCHEMA.field(name).type)
                if name in schema.COMM_STRING_COLUMNS
                else pa.array(np.full(rows.size, -1, np.int64))
            )
        elif isinstance(v, pa.Array):
            out[name] = v.take(take)
        else:
            out[name] = pa.array(np.asarray(v)[rows])
    return comm_table(out)


def comm_table(columns: dict[str, Any]) -> pa.Table:
    """``columns`` (Arrow arrays or lists, by side-table column name) as a side table of
    ``schema.COMM_ARGS_SCHEMA``: strings dictionary-encoded where the schema says, ints cast."""
    arrays = []
    for f in schema.COMM_ARGS_SCHEMA:
        v = columns[f.name]
        a = v if isinstance(v, (pa.Array, pa.ChunkedArray)) else pa.array(v)
        if pa.types.is_dictionary(f.type) and not pa.types.is_dictionary(a.type):
            a = a.cast(pa.string()).dictionary_encode()
        arrays.append(a.cast(f.type))
    return pa.Table.from_arrays(arrays, schema=schema.COMM_ARGS_SCHEMA)
