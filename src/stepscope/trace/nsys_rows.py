"""Nsight Systems SQLite exports: the CUPTI activity tables as reader columns (``nsys_sqlite``'s
docstring has the mapping): kernels, memcpys, memsets and synchronizations on their device
stream, runtime calls on their host thread.

Each builder returns a part: the column arrays, with names as an index into a list of distinct
names (``name_idx``, ``names``), one lookup or format per distinct id or code, never per row.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import numpy as np

from . import schema
from .nsys_db import ID_MASK, PID_SHIFT, StringIds, columns_of, fetch

# CUPTI_ActivityMemcpyKind / CUPTI_ActivityMemoryKind, in Kineto's spelling of memcpy names
_COPY = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP"}
_MEM = {1: "Pageable", 2: "Pinned", 3: "Device", 4: "Array", 5: "Managed", 6: "Device Static", 7: "Managed Static"}
_SYNC = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
_VERSION = re.compile(r"_v\d+$")
_K = schema.KIND_CODE
#: the ``cat`` dictionary of every part
CATS = ["kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "cuda_runtime", "user_annotation", "cpu_op"]
Part = dict[str, Any]  # column -> numpy array; names -> list of str; dims -> Arrow strings


def _pid(g: np.ndarray) -> np.ndarray:
    return (g >> PID_SHIFT) & ID_MASK


def _named(ids: np.ndarray, strings: StringIds, clean: re.Pattern[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """(index into the distinct names, the names) for string ids: one lookup per distinct id."""
    uniq, inv = np.unique(ids, return_inverse=True)
    found = strings(uniq)
    names = [found.get(int(i), f"<string {int(i)}>") for i in uniq]
    if clean is not None:
        names = [clean.sub("", n) for n in names]
    return inv.ravel(), names


def _device_rows(
    a: np.ndarray, kind: str, cat: str, name_idx: np.ndarray, names: list[str], nbytes: np.ndarray | None = None
) -> Part:
    """A part of device work from rows ``_BASE`` selects."""
    n = a.shape[0]
    return {
        "kind": np.full(n, _K[kind], np.int32),
        "cat": np.full(n, CATS.index(cat), np.int32),
        "name_idx": name_idx,
        "names": names,
        "pid": _pid(a[:, 5]),
        "tid": a[:, 3],
        "device": a[:, 2],
        "stream": a[:, 3],
        "ts": a[:, 0],
        "dur": a[:, 1] - a[:, 0],
        "correlation": a[:, 4],
        "bytes": nbytes if nbytes is not None else np.full(n, -1, np.int64),
    }


def host_rows(a: np.ndarray, kind: np.ndarray, cat: np.ndarray, name_idx: np.ndarray, names: list[str]) -> Part:
    """A part of host rows from (start, end, globalTid, correlation) rows ``a``."""
    n = a.shape[0]
    minus1 = np.full(n, -1, np.int64)
    return {
        "kind": kind,
        "cat": cat,
        "name_idx": name_idx,
        "names": names,
        "pid": _pid(a[:, 2]),
        "tid": a[:, 2] & ID_MASK,
        "device": minus1,
        "stream": minus1,
        "ts": a[:, 0],
        "dur": a[:, 1] - a[:, 0],
        "correlation": a[:, 3],
        "bytes": minus1,
    }


_BASE = "start, COALESCE(end, start), COALESCE(deviceId, -1), COALESCE(streamId, -1), COALESCE(correlationId, -1), globalPid"


def kernels(con: sqlite3.Connection, where: str, strings: StringIds) -> Part:
    have = columns_of(con, "CUPTI_ACTIVITY_KIND_KERNEL")
    name = "COALESCE(demangledName, shortName, -1)" if "demangledName" in have else "COALESCE(shortName, -1)"
    a = fetch(con, f"SELECT {_BASE}, {name} FROM CUPTI_ACTIVITY_KIND_KERNEL {where}", 7)
    idx, names = _named(a[:, 6], strings)
    return _device_rows(a, "kernel", "kernel", idx, names)


def memcpys(con: sqlite3.Connection, where: str, strings: StringIds) -> Part:
    have = columns_of(con, "CUPTI_ACTIVITY_KIND_MEMCPY")
    src = "COALESCE(srcKind, 0)" if "srcKind" in have else "0"
    dst = "COALESCE(dstKind, 0)" if "dstKind" in have else "0"
    a = fetch(
        con,
        f"SELECT {_BASE}, COALESCE(copyKind, 0), {src}, {dst}, COALESCE(bytes, -1) FROM CUPTI_ACTIVITY_KIND_MEMCPY {where}",
        10,
    )
    key = a[:, 6] * 10_000 + a[:, 7] * 100 + a[:, 8]
    uniq, inv = np.unique(key, return_inverse=True)
    names = [
        f"Memcpy {_COPY.get(int(k) // 10_000, 'Unknown')} ({_MEM.get(int(k) // 100 % 100, 'Unknown')} -> "
        f"{_MEM.get(int(k) % 100, 'Unknown')})"
        for k in uniq
    ]
    return _device_rows(a, "memcpy", "gpu_memcpy", inv.ravel(), names, a[:, 9])


def memsets(con: sqlite3.Connection, where: str, strings: StringIds) -> Part:
    have = columns_of(con, "CUPTI_ACTIVITY_KIND_MEMSET")
    mem = "COALESCE(memKind, 3)" if "memKind" in have else "3"
    a = fetch(con, f"SELECT {_BASE}, {mem}, COALESCE(bytes, -1) FROM CUPTI_ACTIVITY_KIND_MEMSET {where}", 8)
    uniq, inv = np.unique(a[:, 6], return_inverse=True)
    return _device_rows(
        a, "memset", "gpu_memset", inv.ravel(), [f"Memset ({_MEM.get(int(k), 'Unknown')})" for k in uniq], a[:, 7]
    )


def syncs(con: sqlite3.Connection, where: str, strings: StringIds) -> Part:
    a = fetch(con, f"SELECT {_BASE}, COALESCE(syncType, 0) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION {where}", 7)
    uniq, inv = np.unique(a[:, 6], return_inverse=True)
    return _device_rows(a, "sync", "cuda_sync", inv.ravel(), [_SYNC.get(int(k), "Synchronize") for k in uniq])


def runtime(con: sqlite3.Connection, where: str, strings: StringIds) -> Part:
    a = fetch(
        con,
        "SELECT start, COALESCE(end, start), globalTid, COALESCE(correlationId, -1), COALESCE(nameId, -1) "
        f"FROM CUPTI_ACTIVITY_KIND_RUNTIME {where}",
        5,
    )
    idx, names = _named(a[:, 4], strings, _VERSION)
    n = a.shape[0]
    return host_rows(
        a, np.full(n, _K["runtime"], np.int32), np.full(n, CATS.index("cuda_runtime"), np.int32), idx, names
    )
