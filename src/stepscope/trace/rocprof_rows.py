"""rocprofv3 records -> the event table's columns, one part per record list (``rocprof.py`` says
what each becomes). Names are looked up once per distinct kernel id / operation, never per record;
each column is read out of the decoded records in one pass."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from .dictcol import lookup_ints
from .rocprof_types import Api, Copy, Dispatch, Process, Symbol, records

#: MEMORY_COPY operation names -> the names Kineto gives copies (classified alike)
_COPY_NAMES = {
    "MEMORY_COPY_HOST_TO_DEVICE": "Memcpy HtoD (Host -> Device)",
    "MEMORY_COPY_DEVICE_TO_HOST": "Memcpy DtoH (Device -> Host)",
    "MEMORY_COPY_DEVICE_TO_DEVICE": "Memcpy DtoD (Device -> Device)",
    "MEMORY_COPY_HOST_TO_HOST": "Memcpy HtoH (Host -> Host)",
}
_API_LISTS = ("hip_api", "hsa_api", "rccl_api")


def rows_of(proc: Process, gpus: dict[int, int]) -> tuple[list[dict[str, Any]], int]:
    """The parts (kernels, copies, API calls, markers) of one process, and the records skipped."""
    ops = [(k.kind, k.operations) for k in proc.strings.buffer_records]
    parts: list[dict[str, Any]] = []
    skipped = 0
    disp, bad = records(proc.buffer_records.kernel_dispatch, Dispatch)
    skipped += bad
    parts.append(_kernels(disp, _symbol_names(proc.kernel_symbols), gpus, proc.metadata.pid))
    copies, bad = records(proc.buffer_records.memory_copy, Copy)
    skipped += bad
    parts.append(_copies(copies, ops, gpus, proc.metadata.pid))
    for name in _API_LISTS:
        calls, bad = records(getattr(proc.buffer_records, name), Api)
        skipped += bad
        parts.append(_host(calls, ops, proc.metadata.pid, "runtime", {}))
    marks, bad = records(proc.buffer_records.marker_api, Api)
    skipped += bad
    messages = {m.key: m.value for m in proc.strings.marker_api}
    parts.append(_host(marks, ops, proc.metadata.pid, "user_annotation", messages))
    return parts, skipped


def _symbol_names(raw: msgspec.Raw) -> dict[int, str]:
    """kernel id -> demangled name; an entry that does not decode is left out (its kernels then
    read ``kernel <id>``)."""
    out: dict[int, str] = {}
    syms, _ = records(raw, Symbol)
    for s in syms:
        name = s.formatted_kernel_name or s.truncated_kernel_name or s.kernel_name
        if s.kernel_id >= 0 and name:
            out.setdefault(s.kernel_id, name.removesuffix(".kd"))
    return out


def _ints(recs: list[Any], get: Any) -> np.ndarray:
    return np.fromiter((get(r) for r in recs), np.int64, len(recs))


def _by_code(codes: np.ndarray, name_of: Any) -> pa.DictionaryArray:
    """A dictionary column: ``name_of(code)`` evaluated once per distinct code."""
    uniq, inv = np.unique(codes, return_inverse=True)
    names = pa.array([name_of(int(c)) for c in uniq.tolist()], pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(inv.astype(np.int32)), names)


def _const(n: int, value: str | None) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value], pa.string()))


def _part(n: int, **cols: Any) -> dict[str, Any]:
    neg = np.full(n, -1, np.int64)
    return {"device": neg, "stream": neg, "bytes": neg, "correlation": neg, **cols}


def _kernels(recs: list[Dispatch], names: dict[int, str], gpus: dict[int, int], pid: int) -> dict[str, Any]:
    n = len(recs)
    ts = _ints(recs, lambda r: r.start_timestamp)
    queue = _ints(recs, lambda r: r.dispatch_info.queue_id.handle)
    stream = _ints(recs, lambda r: r.stream_id.handle if r.stream_id is not None else -1)
    kid = _ints(recs, lambda r: r.dispatch_info.kernel_id)
    return _part(
        n,
        ts=ts,
        dur=np.maximum(_ints(recs, lambda r: r.end_timestamp) - ts, 0),
        pid=np.full(n, pid, np.int64),
        tid=np.where(stream >= 0, stream, queue),
        device=lookup_ints(_ints(recs, lambda r: r.dispatch_info.agent_id.handle), gpus, 0),
        stream=np.where(stream >= 0, stream, queue),
        correlation=_ints(recs, lambda r: r.correlation_id.internal),
        kind=_const(n, "kernel"),
        name=_by_code(kid, lambda k: names.get(k, f"kernel {k}")),
        cat=_const(n, "kernel"),
    )


def _op_name(ops: list[tuple[str, list[str]]], kind: int, op: int) -> str:
    if 0 <= kind < len(ops) and 0 <= op < len(ops[kind][1]):
        return ops[kind][1][op]
    return f"operation {kind}.{op}"


def _copies(recs: list[Copy], ops: list[tuple[str, list[str]]], gpus: dict[int, int], pid: int) -> dict[str, Any]:
    n = len(recs)
    ts = _ints(recs, lambda r: r.start_timestamp)
    code = _ints(recs, lambda r: (r.kind << 16) | (r.operation & 0xFFFF))
    dst = _ints(recs, lambda r: r.dst_agent_id.handle)
    src = _ints(recs, lambda r: r.src_agent_id.handle)
    on_gpu = np.isin(dst, np.array(sorted(gpus), dtype=np.int64))
    stream = _ints(recs, lambda r: r.stream_id.handle if r.stream_id is not None else -1)
    return _part(
        n,
        ts=ts,
        dur=np.maximum(_ints(recs, lambda r: r.end_timestamp) - ts, 0),
        pid=np.full(n, pid, np.int64),
        tid=stream,
        device=lookup_ints(np.where(on_gpu, dst, src), gpus, 0),
        stream=stream,
        bytes=_ints(recs, lambda r: r.bytes),
        correlation=_ints(recs, lambda r: r.correlation_id.internal),
        kind=_const(n, "memcpy"),
        name=_by_code(code, lambda c: _COPY_NAMES.get(_op_name(ops, c >> 16, c & 0xFFFF), "Memcpy")),
        cat=_const(n, "gpu_memcpy"),
    )


def _host(
    recs: list[Api], ops: list[tuple[str, list[str]]], pid: int, kind: str, messages: dict[int, str]
) -> dict[str, Any]:
    """API calls (``runtime``) or roctx ranges (``user_annotation``, named by their message; a
    marker without one is named by its operation)."""
    n = len(recs)
    ts = _ints(recs, lambda r: r.start_timestamp)
    corr = _ints(recs, lambda r: r.correlation_id.internal)
    code = _ints(recs, lambda r: (r.kind << 16) | (r.operation & 0xFFFF))
    if messages:
        names = pa.array(
            [
                messages.get(int(c)) or _op_name(ops, int(k) >> 16, int(k) & 0xFFFF)
                for c, k in zip(corr, code, strict=True)
            ],
            pa.string(),
        )
        name: pa.Array = names.dictionary_encode()
    else:
        name = _by_code(code, lambda c: _op_name(ops, c >> 16, c & 0xFFFF))
    return _part(
        n,
        ts=ts,
        dur=np.maximum(_ints(recs, lambda r: r.end_timestamp) - ts, 0),
        pid=np.full(n, pid, np.int64),
        tid=_ints(recs, lambda r: r.thread_id),
        correlation=corr if kind == "runtime" else np.full(n, -1, np.int64),
        kind=_const(n, kind),
        name=name,
        cat=_const(n, "hip_runtime" if kind == "runtime" else kind),
    )
