"""Nsight Systems SQLite exports: NVTX ranges as host rows (``nsys_sqlite``'s docstring has the
mapping). Ranges PyTorch's ``emit_nvtx`` records per op become ``cpu_op`` rows with their sequence
number and input sizes, parsed in Arrow; other ranges are ``user_annotation`` rows.
"""

from __future__ import annotations

import re
import sqlite3

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import schema
from .nsys_db import CHUNK_ROWS, StringIds, columns_of
from .nsys_rows import CATS, Part, host_rows

_NVTX_RANGES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange
_OP = re.compile(r"^(aten|autograd|c10d)::")
_K = schema.KIND_CODE
# PyTorch's emit_nvtx range text (torch/csrc/profiler/util.cpp getNvtxStr):
# "<op>, seq = <n>, op_id = <m>, sizes = [[2, 3], []], input_op_ids = [...]" (each part optional)
_EMIT = r"^(?P<name>[^,]*)(?:, seq = (?P<seq>-?\d+))?(?:, op_id = \d+)?(?:, sizes = (?P<sizes>\[(?:\[[-0-9, ]*\](?:, )?)*\]))?"


def nvtx(con: sqlite3.Connection, where: str, strings: StringIds) -> list[Part] | None:
    """NVTX ranges with an end, one part per fetched chunk (so the texts held as Python strings at
    once are a chunk's, not the file's: with emit_nvtx every op range has a text of its own);
    None when the table lacks the columns a range needs."""
    have = columns_of(con, "NVTX_EVENTS")
    if not {"start", "end", "eventType", "globalTid"} <= have:
        return None
    types = ", ".join(str(t) for t in _NVTX_RANGES)
    cond = f"eventType IN ({types}) AND end IS NOT NULL" + (f" AND {where[len('WHERE ') :]}" if where else "")
    # each range's text: inline, else the string table's by textId (in SQL)
    inline = "text" if "text" in have else "NULL"
    by_id = "(SELECT value FROM StringIds WHERE id = textId)" if "textId" in have and strings.present else "NULL"
    cur = con.execute(
        f"SELECT start, end, globalTid, COALESCE({inline}, {by_id}, '<nvtx range>') FROM NVTX_EVENTS WHERE {cond}"
    )
    out = []
    while chunk := cur.fetchmany(CHUNK_ROWS):
        start, end, tid, text = zip(*chunk)
        try:
            a = np.array([start, end, tid, np.full(len(start), -1)], dtype=np.int64).T
            label = pa.array(text, pa.string())
        except (TypeError, ValueError, OverflowError, pa.ArrowException) as exc:
            raise sqlite3.DatabaseError(f"values of the wrong type ({exc.__class__.__name__})") from None
        out.append(_nvtx_part(a, label))
    return out


def _nvtx_part(a: np.ndarray, label: pa.Array) -> Part:
    """Rows of one chunk: emit_nvtx op ranges (every one a distinct text: seq and op_id differ)
    parsed in Arrow, not per row."""
    op = pc.fill_null(pc.match_substring_regex(label, _OP.pattern), False)
    parsed = pc.extract_regex(label, _EMIT)
    name = pc.if_else(op, parsed.field("name"), label).dictionary_encode()
    # an optional group that did not match is "" (or the whole struct null for a non-op text)
    seq_text, size_text = parsed.field("seq"), parsed.field("sizes")
    seq = pc.if_else(pc.fill_null(pc.and_(op, pc.not_equal(seq_text, "")), False), seq_text, None).cast(pa.int64())
    sizes = pc.if_else(
        pc.fill_null(pc.and_(op, pc.not_equal(size_text, "")), False), size_text, pa.nulls(len(label), pa.string())
    )
    opn = op.to_numpy(zero_copy_only=False)
    kind = np.where(opn, _K["cpu_op"], _K["user_annotation"]).astype(np.int32)
    cat = np.where(opn, CATS.index("cpu_op"), CATS.index("user_annotation")).astype(np.int32)
    rows = host_rows(
        a, kind, cat, name.indices.to_numpy(zero_copy_only=False).astype(np.int64), name.dictionary.to_pylist()
    )
    rows["seq"] = pc.fill_null(seq, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    rows["dims"] = sizes
    return rows
