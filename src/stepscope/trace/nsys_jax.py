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
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import TraceFormatError
from . import schema
from .columns import FileRead, assemble_table

MEMBER = "nvtx_gpu_proj_trace/trace.parquet"
_FIELD = re.compile(r"(\w+)=((?:[^,#(]|\([^)]*\))*)")


def is_nsys_jax(path: str | Path) -> bool:
    try:
        with zipfile.ZipFile(path) as z:
            return any(n.endswith(MEMBER) for n in z.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def _fields(name: str) -> dict[str, str]:
    body = name.split("#", 1)[1].rstrip("#") if "#" in name else ""
    return {k: v for k, v in _FIELD.findall(body)}


def read_nsys_jax(path: str | Path, *, rank: int = 0) -> FileRead:
    p = Path(path)
    try:
        with zipfile.ZipFile(p) as z:
            member = next((n for n in z.namelist() if n.endswith(MEMBER)), None)
            if member is None:
                raise TraceFormatError(f"zip has no {MEMBER}", path=str(p), fix="pass an nsys-jax output archive")
            raw = pq.read_table(io.BytesIO(z.read(member)))
    except (OSError, zipfile.BadZipFile) as exc:
        raise TraceFormatError(
            f"cannot read the archive ({exc.__class__.__name__})", path=str(p), fix="pass an nsys-jax output .zip"
        ) from None
    except pa.ArrowInvalid as exc:
        raise TraceFormatError(
            f"{MEMBER} is not a readable Parquet file ({str(exc)[:80]})", path=str(p), fix="re-create the archive"
        ) from None
    need = {"Name", "Projected Start", "Projected Duration", "TID", "RangeId", "ParentId"}
    if not need <= set(raw.column_names):
        raise TraceFormatError(
            f"{MEMBER} lacks columns {sorted(need - set(raw.column_names))}", path=str(p), fix="use a newer nsys-jax"
        )
    raw = raw.filter(pc.is_valid(raw["Name"]))
    n_raw = raw.num_rows
    names = raw["Name"].combine_chunks().dictionary_encode()
    code = names.indices.to_numpy()
    # per distinct range name: its kind (1 thunk, 2 module) and its #key=value# fields
    distinct = names.dictionary.to_pylist()
    kind_lut = np.array(
        [1 if n.startswith("TSL:Thunk:") else 2 if n.startswith("TSL:XlaModule:") else 0 for n in distinct] + [0],
        np.int8,
    )
    fields = [_fields(n) if kind_lut[i] else {} for i, n in enumerate(distinct)]

    def field(key: str) -> np.ndarray:
        lut = np.empty(len(fields) + 1, dtype=object)
        lut[:-1] = [f.get(key) for f in fields]
        return lut[code]

    def ids(col: str) -> np.ndarray:
        return np.nan_to_num(raw[col].to_numpy(zero_copy_only=False).astype(np.float64), nan=-1).astype(np.int64)

    rid, parent = ids("RangeId"), ids("ParentId")
    kind = kind_lut[code]
    o = np.argsort(rid, kind="stable")
    pos = np.clip(np.searchsorted(rid[o], parent), 0, max(n_raw - 1, 0))
    prow = np.where((parent >= 0) & (rid[o][pos] == parent), o[pos], -1) if n_raw else np.empty(0, np.int64)
    parent_kind = np.where(prow >= 0, kind[np.clip(prow, 0, None)], 0)
    module = field("hlo_module")
    dur_all = raw["Projected Duration"].to_numpy(zero_copy_only=False).astype(np.int64)
    thunk = np.flatnonzero((kind == 1) & (parent_kind != 1))
    mods = np.flatnonzero(kind == 2)
    steps = _steps(module[mods], mods, dur_all)
    rows = np.concatenate([thunk, mods, steps]).astype(np.int64)
    n_t, n_m, n_s = thunk.size, mods.size, steps.size
    hlo_op = field("hlo_op")
    raw_name = np.asarray(distinct + [None], dtype=object)[code]
    top = module[steps[0]] if n_s else None
    none = np.full(n_m + n_s, None, dtype=object)
    name = np.concatenate(
        [
            np.where(hlo_op[thunk] == None, raw_name[thunk], hlo_op[thunk]),  # noqa: E711
            np.char.add("XlaModule:", module[mods].astype(str)).astype(object),
            np.char.add("XLAStep#", np.arange(n_s).astype(str)).astype(object),
        ]
    )
    kc = schema.KIND_CODE
    kinds = np.repeat(np.array([kc["kernel"], kc["gpu_annotation"], kc["user_annotation"]], np.int32), [n_t, n_m, n_s])
    on_dev = np.r_[np.ones(n_t + n_m, bool), np.zeros(n_s, bool)]
    tid = raw["TID"].to_numpy(zero_copy_only=False).astype(np.int64)[rows]

    def strings(values: np.ndarray) -> pa.Array:
        return pa.array(values.tolist(), pa.string())

    cols = {
        "kind": pa.DictionaryArray.from_arrays(pa.array(kinds), pa.array(list(kc), pa.string())),
        "name": strings(name),
        "cat": pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows.size, np.int32)), pa.array(["nsys-jax"])),
        "pid": np.zeros(rows.size, np.int64),
        "tid": np.where(on_dev, tid, -1),
        "device": np.where(on_dev, 0, -1),
        "stream": np.where(on_dev, tid, -1),
        "ts": raw["Projected Start"].to_numpy(zero_copy_only=False).astype(np.int64)[rows],
        "dur": dur_all[rows],
        "correlation": np.full(rows.size, -1, np.int64),
        "op": strings(np.concatenate([hlo_op[thunk], none])),
        "module": strings(
            np.concatenate(
                [
                    np.where(prow[thunk] >= 0, module[np.clip(prow[thunk], 0, None)], None),
                    module[mods],
                    np.full(n_s, top, dtype=object),
                ]
            )
        ),
        "scope": strings(
            np.concatenate(
                [field("name")[thunk], np.full(n_m, None, dtype=object), np.full(n_s, f"XlaModule:{top}", dtype=object)]
            )
        ),
        "op_class": pa.nulls(rows.size, pa.string()),
        "flops": np.full(rows.size, -1, np.int64),
        "bytes_accessed": np.full(rows.size, -1, np.int64),
    }
    # rows in file order (steps after), so ranges that start together keep the archive's order
    order = np.argsort(np.r_[thunk, mods, n_raw + np.arange(n_s)], kind="stable")
    cols = {k: (v.take(pa.array(order)) if isinstance(v, pa.Array) else v[order]) for k, v in cols.items()}
    return FileRead(
        path=str(p),
        table=assemble_table(cols, rank),
        header={"format": "nsys-jax"},
        truncated=False,
        note="",
        skipped_events=0,
        bytes_read=p.stat().st_size,
    )


def _steps(module: np.ndarray, rows: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Rows of the executions of the module with the most projected GPU time, in time order
    (the steps), when it ran at least twice."""
    if rows.size == 0:
        return np.empty(0, np.int64)
    _, inv = np.unique(module.astype(str), return_inverse=True)
    total = np.bincount(inv.ravel(), weights=dur[rows].astype(np.float64))
    mine = rows[inv.ravel() == int(np.argmax(total))]
    return np.sort(mine) if mine.size >= 2 else np.empty(0, np.int64)
