"""The collective side table: built from raw columns, looked up by event row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from stepscope.trace.commside import comm_side_table, rows_with, side_column, side_index


def _raw() -> dict[str, object]:
    """Five events; rows 1 and 3 carry collective args, row 4 only a group size."""
    n = 5
    return {
        "ph": pa.array(["X"] * n),
        "collective": pa.array([None, "allreduce", None, "all_to_all", None]),
        "in_msg_nelems": np.array([-1, 1024, -1, 64, -1]),
        "out_msg_nelems": np.array([-1, 1024, -1, 64, -1]),
        "dtype": pa.array([None, "Float", None, "BFloat16", None]),
        "group_size": np.array([-1, 8, -1, 4, 2]),
        "pg_name": pa.array([None, "0", None, "5", None]),
        "pg_desc": pa.array([None, "default_pg", None, None, None]),
        "pg_ranks": pa.array([None, "[0, 1]", None, None, None]),
        "in_split": pa.array([None, "[]", None, "[16, 48]", None]),
        "out_split": pa.array([None, "[]", None, None, None]),
    }


def test_side_table_holds_exactly_the_rows_with_any_arg() -> None:
    side = comm_side_table(_raw())
    assert side is not None
    assert side["row"].to_pylist() == [1, 3, 4]
    assert side["collective"].to_pylist() == ["allreduce", "all_to_all", None]
    assert side["group_size"].to_pylist() == [8, 4, 2]
    assert side["in_split"].to_pylist() == ["[]", "[16, 48]", None]


def test_no_arg_no_side_table() -> None:
    raw = _raw()
    for k in ("collective", "dtype", "pg_name", "pg_desc", "pg_ranks", "in_split", "out_split"):
        raw[k] = pa.nulls(5, pa.string())
    for k in ("in_msg_nelems", "out_msg_nelems", "group_size"):
        raw[k] = np.full(5, -1)
    assert comm_side_table(raw) is None


def test_lookups_by_row() -> None:
    side = comm_side_table(_raw())
    rows = np.array([4, 0, 3, 1, 9])
    assert side_index(side, rows).tolist() == [2, -1, 1, 0, -1]
    assert side_column(side, "in_msg_nelems", rows).to_pylist() == [-1, -1, 64, 1024, -1]
    assert side_column(side, "msg_dtype", rows).to_pylist() == [None, None, "BFloat16", "Float", None]
    assert side_column(None, "group_size", rows).to_pylist() == [-1] * 5
    assert rows_with(side).tolist() == [1, 3]  # row 4 has args but no collective name
    assert rows_with(side, "group_size").tolist() == [1, 3, 4]


def test_a_row_listed_twice_takes_its_last_entry() -> None:
    side = pa.concat_tables([comm_side_table(_raw()), comm_side_table(_raw())])
    assert side_index(side, np.array([1, 3])).tolist() == [3, 4]
