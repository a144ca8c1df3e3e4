"""nsys-jax archives (NVIDIA JAX-Toolbox ``nsys-jax`` output, one ``.zip`` per process) -> the event
table: a second view of a JAX job, from Nsight Systems instead of the JAX profiler.

The archive's ``nvtx_gpu_proj_trace/trace.parquet`` holds XLA's NVTX ranges projected onto GPU
time (``Projected Start`` / ``Projected Duration``, ns). Mapping:
- ``TSL:Thunk:#name=<name stack>,hlo_op=<op>#`` ranges whose parent is not a thunk -> ``kernel``
  rows (device 0 of the process, stream = the NVTX thread), ``op`` / ``scope`` from the range name,
  ``module`` from the enclosing ``TSL:XlaModule`` range;
- ``TSL:XlaModule:#hlo_module=<m>,...#`` ranges -> ``gpu_annotation`` rows; the executions of the
  module with the most GPU time (when it ran at least twice) are also the steps (``XLAStep#k``);
- other ranges (compilation, autotuning, NCCL calls) are skipped.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import TraceFormatError
from . import schema
from .columns import FileRead, assemble_table
from .dictcol import DictColumn
from .limits import INFLATE_RATIO_GRACE_BYTES, MAX_INFLATE_RATIO, max_inflated_bytes

MEMBER = "nvtx_gpu_proj_trace/trace.parquet"
_FIELD = re.compile(r"(\w+)=((?:[^,#(]|\([^)]*\))*)")
_NEED = {"Name", "Projected Start", "Projected Duration", "TID", "RangeId", "ParentId"}
_THUNK, _MODULE = 1, 2


def _range_kind(name: str | None) -> int:
    """``_THUNK``, ``_MODULE`` or 0 (a range this reader skips) by the range name's prefix."""
    if name is None:
        return 0
    return _THUNK if name.startswith("TSL:Thunk:") else _MODULE if name.startswith("TSL:XlaModule:") else 0


def _field(key: str, name: str | None) -> str | None:
    """The value of ``key`` in a thunk or module range name's ``#key=value,...#`` fields."""
    if name is None or not _range_kind(name):
        return None
    body = name.split("#", 1)[1].rstrip("#") if "#" in name else ""
    return {k: v for k, v in _FIELD.findall(body)}.get(key)


def read_nsys_jax(path: str | Path, *, rank: int = 0) -> FileRead:
    p = Path(path)
    return FileRead(
        path=str(p),
        table=assemble_table(_columns(_load(p)), rank),
        header={"format": "nsys-jax"},
        truncated=False,
        note="",
        skipped_events=0,
        bytes_read=p.stat().st_size,
    )


def _member_bytes(z: zipfile.ZipFile, member: str, p: Path) -> bytes:
    """The member's bytes, read at most up to the inflation limits (``limits.py``): its declared
    size is not trusted, the bytes read are counted."""
    info = z.getinfo(member)
    cap = min(max_inflated_bytes(), max(INFLATE_RATIO_GRACE_BYTES, MAX_INFLATE_RATIO * max(info.compress_size, 1)))
    with z.open(member) as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise TraceFormatError(
            f"{member} inflates past {cap:,} bytes (more than {MAX_INFLATE_RATIO} times its compressed size, "
            "or the --max-inflated-gb cap)",
            path=str(p),
            fix="pass an nsys-jax output .zip; --max-inflated-gb raises the cap",
        )
    return data


def _load(p: Path) -> pa.Table:
    """The archive's projected NVTX ranges that have a name."""
    try:
        with zipfile.ZipFile(p) as z:
            member = next((n for n in z.namelist() if n.endswith(MEMBER)), None)
            if member is None:
                raise TraceFormatError(f"zip has no {MEMBER}", path=str(p), fix="pass an nsys-jax output archive")
            raw = pq.read_table(io.BytesIO(_member_bytes(z, member, p)))
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, RuntimeError, NotImplementedError) as exc:
        # RuntimeError: an encrypted member; NotImplementedError: a compression method zipfile lacks
        raise TraceFormatError(
            f"cannot read the archive ({exc.__class__.__name__}: {' '.join(str(exc).split())[:120]})",
            path=str(p),
            fix="pass an nsys-jax output .zip",
        ) from None
    except pa.ArrowInvalid as exc:
        raise TraceFormatError(
            f"{MEMBER} is not a readable Parquet file ({str(exc)[:80]})", path=str(p), fix="re-create the archive"
        ) from None
    if not _NEED <= set(raw.column_names):
        raise TraceFormatError(
            f"{MEMBER} lacks columns {sorted(_NEED - set(raw.column_names))}", path=str(p), fix="use a newer nsys-jax"
        )
    return raw.filter(pc.is_valid(raw["Name"]))


@dataclass(frozen=True)
class _Ranges:
    """Per range (row of the archive's table): its name, kind (``_range_kind``), the ``hlo_module``,
    ``hlo_op`` and ``name`` (name stack) fields of its name, and its parent's row (-1 for none)."""

    name: np.ndarray
    kind: np.ndarray
    module: np.ndarray
    hlo_op: np.ndarray
    stack: np.ndarray
    parent: np.ndarray


def _ranges(raw: pa.Table) -> _Ranges:
    """The ranges' names parsed once per distinct name; parents found by ``RangeId``."""
    names = DictColumn.of(raw["Name"])
    kind = names.map(_range_kind, dtype=np.int8)

    def ids(col: str) -> np.ndarray:
        return np.nan_to_num(raw[col].to_numpy(zero_copy_only=False).astype(np.float64), nan=-1).astype(np.int64)

    rid, parent = ids("RangeId"), ids("ParentId")
    n_raw = raw.num_rows
    o = np.argsort(rid, kind="stable")
    pos = np.clip(np.searchsorted(rid[o], parent), 0, max(n_raw - 1, 0))
    prow = np.where((parent >= 0) & (rid[o][pos] == parent), o[pos], -1) if n_raw else np.empty(0, np.int64)
    module, hlo_op, stack = (names.map(partial(_field, k)) for k in ("hlo_module", "hlo_op", "name"))
    return _Ranges(names.rows(), kind, module, hlo_op, stack, prow)


def _string_columns(r: _Ranges, thunk: np.ndarray, mods: np.ndarray, steps: np.ndarray) -> dict[str, pa.Array]:
    """name, op, module and scope of the thunk rows, then the module rows, then the step rows."""
    n_m, n_s = mods.size, steps.size
    top = r.module[steps[0]] if n_s else None
    name = np.concatenate(
        [
            np.where(r.hlo_op[thunk] == None, r.name[thunk], r.hlo_op[thunk]),  # noqa: E711
            np.char.add("XlaModule:", r.module[mods].astype(str)).astype(object),
            np.char.add("XLAStep#", np.arange(n_s).astype(str)).astype(object),
        ]
    )
    thunk_module = np.where(r.parent[thunk] >= 0, r.module[np.clip(r.parent[thunk], 0, None)], None)
    module = np.concatenate([thunk_module, r.module[mods], np.full(n_s, top, dtype=object)])
    scope = np.concatenate(
        [r.stack[thunk], np.full(n_m, None, dtype=object), np.full(n_s, f"XlaModule:{top}", dtype=object)]
    )
    op = np.concatenate([r.hlo_op[thunk], np.full(n_m + n_s, None, dtype=object)])
    return {
        k: pa.array(v.tolist(), pa.string())
        for k, v in (("name", name), ("op", op), ("module", module), ("scope", scope))
    }


def _columns(raw: pa.Table) -> dict[str, Any]:
    """The reader columns: thunks whose parent is not a thunk, modules, then the steps."""
    r = _ranges(raw)
    parent_kind = np.where(r.parent >= 0, r.kind[np.clip(r.parent, 0, None)], 0)
    dur_all = raw["Projected Duration"].to_numpy(zero_copy_only=False).astype(np.int64)
    thunk = np.flatnonzero((r.kind == _THUNK) & (parent_kind != _THUNK))
    mods = np.flatnonzero(r.kind == _MODULE)
    steps = _steps(r.module[mods], mods, dur_all)
    rows = np.concatenate([thunk, mods, steps]).astype(np.int64)
    n_t, n_m, n_s = thunk.size, mods.size, steps.size
    kc = schema.KIND_CODE
    kinds = np.repeat(np.array([kc["kernel"], kc["gpu_annotation"], kc["user_annotation"]], np.int32), [n_t, n_m, n_s])
    on_dev = np.r_[np.ones(n_t + n_m, bool), np.zeros(n_s, bool)]
    tid = raw["TID"].to_numpy(zero_copy_only=False).astype(np.int64)[rows]
    cols = {
        "kind": pa.DictionaryArray.from_arrays(pa.array(kinds), pa.array(list(kc), pa.string())),
        "cat": pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows.size, np.int32)), pa.array(["nsys-jax"])),
        "pid": np.zeros(rows.size, np.int64),
        "tid": np.where(on_dev, tid, -1),
        "device": np.where(on_dev, 0, -1),
        "stream": np.where(on_dev, tid, -1),
        "ts": raw["Projected Start"].to_numpy(zero_copy_only=False).astype(np.int64)[rows],
        "dur": dur_all[rows],
        "correlation": np.full(rows.size, -1, np.int64),
        "op_class": pa.nulls(rows.size, pa.string()),
        "flops": np.full(rows.size, -1, np.int64),
        "bytes_accessed": np.full(rows.size, -1, np.int64),
        **_string_columns(r, thunk, mods, steps),
    }
    # rows in file order (steps after), so ranges that start together keep the archive's order
    order = np.argsort(np.r_[thunk, mods, raw.num_rows + np.arange(n_s)], kind="stable")
    return {k: (v.take(pa.array(order)) if isinstance(v, pa.Array) else v[order]) for k, v in cols.items()}


def _steps(module: np.ndarray, rows: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Rows of the executions of the module with the most projected GPU time, in time order
    (the steps), when it ran at least twice."""
    if rows.size == 0:
        return np.empty(0, np.int64)
    _, inv = np.unique(module.astype(str), return_inverse=True)
    total = np.bincount(inv.ravel(), weights=dur[rows].astype(np.float64))
    mine = rows[inv.ravel() == int(np.argmax(total))]
    return np.sort(mine) if mine.size >= 2 else np.empty(0, np.int64)
