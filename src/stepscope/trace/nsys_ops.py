"""Nsight SQLite exports: how PyTorch's ``emit_nvtx`` op ranges attach to the kernels they launched.

Kineto links a kernel to the op that launched it with an External id; an nsys export has no such
field. These functions rebuild it from what the export holds (which op range was open on the
launching thread, and the correlation id a CUDA call shares with its kernel) and type the op's
inputs, which emit_nvtx records without element types. The reader (``nsys_sqlite``) calls them
on its merged columns; nothing here loops over rows.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import schema

_K = schema.KIND_CODE


def link_ops(
    kind: np.ndarray, pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, dur: np.ndarray, corr: np.ndarray
) -> np.ndarray:
    """External ids as Kineto links ops to their kernels: each ``cpu_op`` row (an emit_nvtx op
    range) gets its own, each runtime call the id of the innermost op range open on its thread
    when it started, and each device row (kernel, memcpy, memset) the id of the call that launched
    it (same process and correlation id). -1 elsewhere.

    Innermost op per call, without a loop over rows: op ranges on a thread nest (push/pop), so an
    op's depth is the number of ranges open at its start, and its parent is the last op before it
    (in start order) one level up (a ``searchsorted`` per depth level). The innermost open op is
    then a step function of time: at an op's start it becomes that op, at its end its parent."""
    n = kind.size
    ext = np.full(n, -1, np.int64)
    is_op = kind == _K["cpu_op"]
    if not is_op.any():
        return ext
    ext[is_op] = np.flatnonzero(is_op) + 1
    calls = np.flatnonzero((kind == _K["runtime"]) & (corr >= 0))
    thread = (pid << 24) | tid
    for th in np.unique(thread[is_op]):  # per host thread (a handful), not per row
        ops = np.flatnonzero(is_op & (thread == th))
        ops = ops[np.lexsort((-dur[ops], ts[ops]))]  # by start; an enclosing range first at a tie
        s, e = ts[ops], ts[ops] + dur[ops]
        # ranges opened up to and including this one (in start order, so a tie nests) less those closed by its start
        depth = np.arange(1, ops.size + 1) - np.searchsorted(np.sort(e), s, side="right")
        parent = np.full(ops.size, -1, np.int64)
        for d in np.unique(depth):
            here, up = np.flatnonzero(depth == d), np.flatnonzero(depth == d - 1)
            if up.size:
                k = np.searchsorted(up, here) - 1
                parent[here] = np.where(k >= 0, up[np.maximum(k, 0)], -1)
        # step function of the innermost open op. At one instant: ends before starts, inner ends
        # before outer ones (the last says who is open after), outer starts before inner ones
        t = np.concatenate([e, s])
        val = np.concatenate([parent, np.arange(ops.size)])
        o = np.lexsort((np.r_[-depth, depth], np.r_[np.zeros(ops.size), np.ones(ops.size)], t))
        t, val = t[o], val[o]
        mine = calls[thread[calls] == th]
        at = np.searchsorted(t, ts[mine], side="right") - 1
        inner = np.where(at >= 0, val[np.maximum(at, 0)], -1)
        ext[mine] = np.where(inner >= 0, ext[ops[np.maximum(inner, 0)]], -1)
    # device rows: the launching call's id, by (process, correlation id)
    dev = np.flatnonzero(np.isin(kind, [_K["kernel"], _K["memcpy"], _K["memset"]]) & (corr >= 0))
    if calls.size and dev.size:
        key_c = (pid[calls] << 32) | corr[calls]
        o = np.argsort(key_c, kind="stable")
        key_d = (pid[dev] << 32) | corr[dev]
        pos = np.clip(np.searchsorted(key_c[o], key_d), 0, calls.size - 1)
        hit = key_c[o][pos] == key_d
        ext[dev] = np.where(hit, ext[calls[o][pos]], -1)
    return ext


# a kernel's element type, from its demangled name (templates name it: CUDAFunctor_add<c10::BFloat16>,
# cutlass/cuBLAS tags: s16816gemm_bf16, h884gemm, e4m3): the Input type emit_nvtx does not record
_KERNEL_DTYPE = (
    (re.compile(r"float8|e4m3|e5m2|fp8", re.I), "c10::Float8_e4m3fn"),
    (re.compile(r"bfloat16|bf16", re.I), "c10::BFloat16"),
    (re.compile(r"c10::Half|\bhalf\b|fp16|f16|_h\d{3}|\bh\d{3}gemm|hgemm", re.I), "c10::Half"),
)


def input_types(kind: np.ndarray, name_idx: np.ndarray, names: np.ndarray, ext: np.ndarray, dims: pa.Array) -> pa.Array:
    """``input_types`` of emit_nvtx op rows with shapes: every input typed as the element type the
    op's first kernel names (``_KERNEL_DTYPE``; integer index inputs are typed alike, a small error
    in bytes), ``float`` when its kernels name none; null elsewhere. Built per distinct kernel name
    and per type in Arrow, not per row."""
    n = kind.size
    types = pa.nulls(n, pa.string())
    has_dims = pc.is_valid(dims).to_numpy(zero_copy_only=False) if n else np.zeros(0, bool)
    ops = np.flatnonzero((kind == _K["cpu_op"]) & has_dims & (ext >= 0))
    if ops.size == 0:
        return types
    kern = np.flatnonzero((kind == _K["kernel"]) & (ext >= 0))
    ids, first = np.unique(ext[kern], return_index=True)
    labels = ["float"] + [t for _, t in _KERNEL_DTYPE]
    per_name = np.array(
        [next((1 + j for j, (pat, _) in enumerate(_KERNEL_DTYPE) if pat.search(str(nm))), 0) for nm in names.tolist()]
    )
    pos = np.clip(np.searchsorted(ids, ext[ops]), 0, max(ids.size - 1, 0))
    found = ids[pos] == ext[ops] if ids.size else np.zeros(ops.size, bool)
    code = np.full(n, -1, np.int64)
    code[ops] = np.where(found, per_name[name_idx[kern[first[pos]]]] if ids.size else 0, 0)
    for j, label in enumerate(labels):
        sel = code == j
        if sel.any():  # each shape list "[2, 3]" or "[]" becomes the type's quoted name
            typed = pc.replace_substring_regex(dims, r"\[[-0-9, ]*\]", f'"{label}"')
            types = pc.if_else(pa.array(sel), typed, types)
    return types
