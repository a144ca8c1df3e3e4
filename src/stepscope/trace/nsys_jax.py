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
from .columns import FileRead

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
        raise TraceFormatError(f"cannot read the archive ({exc.__class__.__name__})", path=str(p), fix="pass an nsys-jax output .zip") from None
    except pa.ArrowInvalid as exc:
        raise TraceFormatError(f"{MEMBER} is not a readable Parquet file ({str(exc)[:80]})", path=str(p), fix="re-create the archive") from None
    need = {"Name", "Projected Start", "Projected Duration", "TID", "RangeId", "ParentId"}
    if not need <= set(raw.column_names):
        raise TraceFormatError(f"{MEMBER} lacks columns {sorted(need - set(raw.column_names))}", path=str(p), fix="use a newer nsys-jax")
    raw = raw.filter(pc.is_valid(raw["Name"]))
    names = raw["Name"].to_pylist()
    rid = np.nan_to_num(raw["RangeId"].to_numpy(zero_copy_only=False).astype(np.float64), nan=-1).astype(np.int64)
    parent = np.nan_to_num(raw["ParentId"].to_numpy(zero_copy_only=False).astype(np.float64), nan=-1).astype(np.int64)
    kind_of = {i: ("thunk" if n.startswith("TSL:Thunk:") else "module" if n.startswith("TSL:XlaModule:") else "") for i, n in zip(rid, names)}
    fields = [_fields(n) if kind_of[i] else {} for i, n in zip(rid, names)]
    module_of = {i: f.get("hlo_module", "") for i, f in zip(rid, fields) if kind_of.get(i) == "module"}
    ts = raw["Projected Start"].to_numpy(zero_copy_only=False).astype(np.int64)
    dur = raw["Projected Duration"].to_numpy(zero_copy_only=False).astype(np.int64)
    tid = raw["TID"].to_numpy(zero_copy_only=False).astype(np.int64)
    rows: dict[str, list[object]] = {k: [] for k in ("kind", "name", "op", "scope", "module", "i")}
    for j, (i, par) in enumerate(zip(rid, parent)):
        k = kind_of.get(i)
        if k == "thunk" and kind_of.get(par) != "thunk":
            f = fields[j]
            rows["kind"].append(schema.Kind.KERNEL.value)
            rows["name"].append(f.get("hlo_op") or names[j])
            rows["op"].append(f.get("hlo_op"))
            rows["scope"].append(f.get("name"))
            rows["module"].append(module_of.get(par))
            rows["i"].append(j)
        elif k == "module":
            rows["kind"].append(schema.Kind.GPU_ANNOTATION.value)
            rows["name"].append(f"XlaModule:{module_of[i]}")
            rows["op"].append(None)
            rows["scope"].append(None)
            rows["module"].append(module_of[i])
            rows["i"].append(j)
    _add_steps(rows, module_of, rid, dur)
    idx = np.asarray(rows["i"], dtype=np.int64)
    n = idx.size
    is_step = np.array([str(k) == schema.Kind.USER_ANNOTATION.value for k in rows["kind"]], dtype=bool)
    neg = pa.array(np.full(n, -1, dtype=np.int64))
    null_dict = pa.nulls(n, pa.dictionary(pa.int32(), pa.string()))
    cols = {
        "rank": pa.array(np.full(n, rank, dtype=np.int32)),
        "kind": pa.array(rows["kind"], pa.string()).dictionary_encode(),
        "name": pa.array(rows["name"], pa.string()).dictionary_encode(),
        "cat": pa.array(["nsys-jax"] * n, pa.string()).dictionary_encode(),
        "pid": pa.array(np.zeros(n, np.int64)),
        "tid": pa.array(np.where(is_step, -1, tid[idx] if n else np.empty(0, np.int64))),
        "device": pa.array(np.where(is_step, -1, 0).astype(np.int32)),
        "stream": pa.array(np.where(is_step, -1, tid[idx] if n else np.empty(0, np.int64))),
        "ts_ns": pa.array(ts[idx] if n else np.empty(0, np.int64)),
        "dur_ns": pa.array(dur[idx] if n else np.empty(0, np.int64)),
        "correlation": neg, "external_id": neg, "sequence_number": neg, "flow_id": neg, "flow_phase": null_dict,
        "input_dims": pa.nulls(n, pa.string()), "input_types": pa.nulls(n, pa.string()), "collective": null_dict,
        "in_msg_nelems": neg, "out_msg_nelems": neg, "msg_dtype": null_dict,
        "group_size": pa.array(np.full(n, -1, dtype=np.int32)), "pg_name": null_dict, "pg_desc": null_dict, "bytes": neg,
        "op": pa.array(rows["op"], pa.string()), "module": pa.array(rows["module"], pa.string()),
        "scope": pa.array(rows["scope"], pa.string()), "op_class": pa.nulls(n, pa.string()),
        "flops": neg, "bytes_accessed": neg,
    }
    table = pa.Table.from_pydict(cols, schema=schema.EVENT_SCHEMA).sort_by([("ts_ns", "ascending")])
    return FileRead(path=str(p), table=table, header={"format": "nsys-jax"}, truncated=False, note="", skipped_events=0,
                    bytes_read=p.stat().st_size)


def _add_steps(rows: dict[str, list[object]], module_of: dict[int, str], rid: np.ndarray, dur: np.ndarray) -> None:
    """The executions of the module with the most projected GPU time are the steps (>= 2 runs)."""
    pos = {int(i): j for j, i in enumerate(rid)}
    total: dict[str, int] = {}
    runs: dict[str, list[int]] = {}
    for i, m in module_of.items():
        total[m] = total.get(m, 0) + int(dur[pos[int(i)]])
        runs.setdefault(m, []).append(pos[int(i)])
    if not total:
        return
    top = max(total, key=lambda m: total[m])
    if len(runs[top]) < 2:
        return
    for k, j in enumerate(sorted(runs[top])):
        rows["kind"].append(schema.Kind.USER_ANNOTATION.value)
        rows["name"].append(f"XLAStep#{k}")
        rows["op"].append(None)
        rows["scope"].append(f"XlaModule:{top}")
        rows["module"].append(top)
        rows["i"].append(j)
