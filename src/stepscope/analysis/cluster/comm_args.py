"""Per-instance names and recorded side args of device collectives (``comm_events._device``):
the group name of each instance and the ``Process Group Ranks`` / ``In split size`` it recorded,
each string built or parsed once per distinct value."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ...trace.commside import side_index
from ...trace.dictcol import DictColumn
from ..rankdata import XlaArrays


def object_array(values: list[Any]) -> np.ndarray:
    """A 1-D object array of the values as they are (``np.array`` would make equal-length tuples
    a 2-D array)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def int_list(text: str | None) -> tuple[int, ...] | None:
    """``"[0, 1, 2]"`` -> (0, 1, 2); ``"[]"``, null or anything else -> None."""
    if not text:
        return None
    try:
        vals = tuple(int(x) for x in text.strip().strip("[]").split(",") if x.strip())
    except ValueError:
        return None
    return vals or None


def side_args(comm_args: pa.Table, rows: np.ndarray, arg_row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per instance: the recorded group ranks and input split (``int_list``, parsed once per distinct
    text) of its own row in ``comm_args``, else of its launching op's (``arg_row``), else None. A row
    listed twice takes its last entry."""
    idx = side_index(comm_args, rows)
    idx = np.where(idx >= 0, idx, side_index(comm_args, arg_row))
    found = idx >= 0
    out = []
    for name in ("pg_ranks", "in_split"):
        col = DictColumn.of(comm_args[name])
        parsed = object_array([int_list(v) for v in col.values])[col.codes]
        got = np.full(rows.size, None, dtype=object)
        got[found] = parsed[idx[found]]
        out.append(got)
    return out[0], out[1]


def group_names(pg: np.ndarray, stream: np.ndarray, xla: XlaArrays | None, sel: np.ndarray) -> np.ndarray:
    """Per instance: ``xla:<module>/<op>`` for an XLA op, else the recorded process group ``pg``,
    else ``stream:<id>``. Each name is built once per distinct (module, op) or stream."""
    group = pg.copy()
    is_op = np.zeros(sel.size, dtype=bool)
    if xla is not None:
        op_code, mod_code = xla.op.codes[sel], xla.module.codes[sel]
        is_op = xla.op.values[op_code].astype(bool)  # a null or empty op name is no XLA op
        if is_op.any():
            pairs, inv = np.unique(np.stack([mod_code[is_op], op_code[is_op]], axis=1), axis=0, return_inverse=True)
            names = [f"xla:{xla.module.values[m]}/{xla.op.values[o]}" for m, o in pairs]
            group[is_op] = object_array(names)[inv.ravel()]
    by_stream = ~is_op & ~group.astype(bool)
    if by_stream.any():
        streams, inv = np.unique(stream[by_stream], return_inverse=True)
        group[by_stream] = object_array([f"stream:{x}" for x in streams])[inv.ravel()]
    return group
