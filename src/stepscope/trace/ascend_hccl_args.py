"""HCCL operators' own args in an Ascend timeline: message size, data type, group size.

Each operator slice of the Communication (``HCCL``) process carries ``count`` (elements),
``data_type`` (``FP32``, ``BFP16``, ``INT64``...), ``alg_type`` and, in newer files,
``rank_size``; the Kineto readers keep no such args. A second pass over the file's bytes parses
the object around each ``"alg_type"`` key (only HCCL operators have it), as ``chrome_meta`` does
for metadata. The operators then get a collective side-table entry (``schema.COMM_ARGS_SCHEMA``):
``count`` as their message elements, the data type under its NCCL-style name, ``rank_size`` as the
group size and their communicator (the ``Group <name> Communication`` lane) as the process group,
so the cluster view matches them across ranks by group and computes their bus bandwidth.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .chrome_meta import ProcessMeta, object_around, overlapping_blocks
from .commside import comm_table
from .numparse import strings_to_ns

_NEEDLE = b'"alg_type"'
_OVERLAP = 4096
_BACK = 2048
_GROUP_LANE = re.compile(r"^Group (\S{1,128}) Communication$")
#: HCCL's data type names -> the names the collective side table uses (comm_events.DTYPE_BYTES)
DTYPES = {
    "FP32": "float32",
    "FP16": "float16",
    "BFP16": "bfloat16",
    "BF16": "bfloat16",
    "FP64": "float64",
    "INT8": "int8",
    "UINT8": "uint8",
    "INT32": "int32",
    "INT64": "int64",
}


def operator_args(path: str | Path) -> dict[tuple[int, int, str], tuple[int, str | None, int]]:
    """(pid, tid, ts as written) -> (count, data type name or None, rank size or -1), for each
    operator slice with an ``alg_type`` arg. A damaged object is skipped."""
    out: dict[tuple[int, int, str], tuple[int, str | None, int]] = {}
    for buf in overlapping_blocks(path, _OVERLAP, 1 << 22):
        pos = buf.find(_NEEDLE)
        while pos >= 0:
            obj = object_around(buf, pos, "X", _BACK)
            if obj is not None and isinstance(obj.get("args"), dict):
                _record(obj, out)
            pos = buf.find(_NEEDLE, pos + len(_NEEDLE))
    return out


def _int(v: Any, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 62 else default


def _record(obj: dict[str, Any], out: dict[tuple[int, int, str], tuple[int, str | None, int]]) -> None:
    pid, tid, ts, args = obj.get("pid"), obj.get("tid"), obj.get("ts"), obj["args"]
    if not (isinstance(pid, int) and isinstance(tid, int) and isinstance(ts, (str, int, float))):
        return
    dtype = args.get("data_type")
    out[(pid, tid, str(ts))] = (
        _int(args.get("count"), -1),
        DTYPES.get(dtype.upper()) if isinstance(dtype, str) else None,
        _int(args.get("rank_size"), -1),
    )


def side_table(
    t: pa.Table,
    rows: np.ndarray,
    meta: dict[int, ProcessMeta],
    found: dict[tuple[int, int, str], tuple[int, str | None, int]],
) -> pa.Table | None:
    """Side-table entries for the operator rows ``rows`` of ``t`` (indices into ``t``) that have
    args in ``found``, matched by (pid, tid, start ns); None when none has. One dictionary lookup
    per operator (a profile has thousands, not millions)."""
    if not found or rows.size == 0:
        return None
    ts_ns = strings_to_ns(pa.array([k[2] for k in found], pa.string()))
    by_start = {(k[0], k[1], int(n)): v for (k, v), n in zip(found.items(), ts_ns, strict=True)}
    pid, tid, ts = (t[c].to_numpy()[rows].tolist() for c in ("pid", "tid", "ts_ns"))
    hit = [
        (r, p, q, by_start[(p, q, n)])
        for r, p, q, n in zip(rows.tolist(), pid, tid, ts, strict=True)
        if (p, q, n) in by_start
    ]
    if not hit:
        return None
    lanes = {
        (p, q): m.group(1) for p, pm in meta.items() for q, name in pm.threads.items() if (m := _GROUP_LANE.match(name))
    }
    n = len(hit)
    return comm_table(
        {
            "row": [h[0] for h in hit],
            "collective": pa.nulls(n, pa.string()),
            "in_msg_nelems": [h[3][0] for h in hit],
            "out_msg_nelems": [h[3][0] for h in hit],
            "msg_dtype": pa.array([h[3][1] for h in hit], pa.string()),
            "group_size": [h[3][2] for h in hit],
            "pg_name": pa.array([lanes.get((h[1], h[2])) for h in hit], pa.string()),
            "pg_desc": pa.nulls(n, pa.string()),
            "pg_ranks": pa.nulls(n, pa.string()),
            "in_split": pa.nulls(n, pa.string()),
            "out_split": pa.nulls(n, pa.string()),
        }
    )
