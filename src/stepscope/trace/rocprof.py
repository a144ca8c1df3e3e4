"""rocprofv3 JSON (rocprofiler-sdk ``rocprofv3 --output-format json``: ``<pid>_results.json``) -> the
event table.

Layout (rocprofiler-sdk ``source/lib/output/generateJSON.cpp`` and its cereal serializers): one
object ``{"rocprofiler-sdk-tool": [process, ...]}``; each process holds ``metadata`` (pid, init and
fini times), ``agents`` (CPUs and GPUs, referred to by ``id.handle``), ``strings`` (the name of
every record kind and operation: ``buffer_records[kind].operations[operation]``; roctx messages by
correlation id in ``marker_api``), ``kernel_symbols`` (a list indexed by kernel id) and
``buffer_records`` (lists of records by kind). Times are integer nanoseconds (CLOCK_BOOTTIME, one
clock for host and device). Record kinds and operations are never taken as fixed numbers: their
numbering changed between releases; each is named through ``strings``.

| records | event table rows |
|---|---|
| ``kernel_dispatch`` | ``kernel``: name = the symbol's demangled name (``formatted_kernel_name``), device = the GPU's index, stream = the HIP stream (``stream_id``, ROCm 6.4+), else the HSA queue |
| ``memory_copy`` | ``memcpy`` named as Kineto names copies (``Memcpy HtoD``...), bytes, on the GPU end's device |
| ``hip_api``, ``hsa_api``, ``rccl_api`` | ``runtime`` on the calling thread (``hipLaunchKernel``, ``ncclAllReduce``...) |
| ``marker_api`` (roctx) | ``user_annotation`` named by its message (a range push/pop is one record), so ``--step-marker`` finds steps |

A dispatch or copy carries the correlation id of the API call that enqueued it (``correlation_id.internal``),
so launches join their kernels as in CUDA traces. A GPU's index is its ``gpu_index`` (else its rank
by ``node_id`` among the GPUs). The device properties (product name, gfx version as compute
capability, compute units as SMs) go in the header for the hardware catalog. A file of several
processes is read for its first one, with a warning. A file cut short is read up to the last
complete record, with a warning; a record with fields of the wrong type is skipped and counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from ..errors import TraceFormatError
from . import schema
from .columns import FileRead, assemble_table
from .jsonstream import BLOCK_BYTES, StreamState, file_blocks, is_gzip
from .jsontext import depth_after, string_mask
from .rocprof_rows import rows_of
from .rocprof_types import Doc

ROCPROF_FORMAT = "rocprofv3"
ROOT_KEY = b'"rocprofiler-sdk-tool"'


def is_rocprof(head: bytes) -> bool:
    """Whether a JSON file's first bytes open a rocprofv3 document (its one top-level key)."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{" and ROOT_KEY in head[:4096]


def read_rocprof(path: str | Path) -> FileRead:
    """The events of a rocprofv3 JSON file (module docstring)."""
    p = Path(path)
    text, state = _text(p)
    doc, cut = _decode(text, p)
    state.truncated = state.truncated or cut
    if not doc.processes:
        raise TraceFormatError(
            "a rocprofv3 file without a process", path=str(p), fix="re-run rocprofv3 with --kernel-trace"
        )
    proc = doc.processes[0]
    warnings = [f"holds {len(doc.processes)} processes; only the first (pid {proc.metadata.pid}) is read"] * (
        len(doc.processes) > 1
    )
    gpus, props = _gpus(proc.agents)
    parts, skipped = rows_of(proc, gpus)
    if not sum(len(c["ts"]) for c in parts):
        raise TraceFormatError(
            "a rocprofv3 file with no kernel, copy, API or marker record"
            + (" before its cut" if state.truncated else ""),
            path=str(p),
            fix="trace with rocprofv3 --kernel-trace (add --hip-trace --marker-trace for launches and steps)",
        )
    ints = ("ts", "dur", "pid", "tid", "device", "stream", "correlation", "bytes")
    cols: dict[str, Any] = {k: np.concatenate([np.asarray(c[k], np.int64) for c in parts]) for k in ints}
    for k in ("kind", "name", "cat"):
        cols[k] = pa.chunked_array([c[k] for c in parts if len(c[k])], pa.dictionary(pa.int32(), pa.string()))
        cols[k] = cols[k].cast(pa.string()).combine_chunks()
    cols |= schema.absent_xla_columns(len(cols["ts"]))
    used = set(np.unique(cols["device"][cols["device"] >= 0]).tolist())
    props = [q for q in props if q["id"] in used]  # the GPUs this process ran work on
    if state.truncated:
        warnings.append("the file is cut short: read up to its last complete record")
    return FileRead(
        path=str(p),
        table=assemble_table(cols, 0),
        header={"format": ROCPROF_FORMAT, "deviceProperties": props},
        truncated=state.truncated,
        note=state.note,
        skipped_events=skipped,
        bytes_read=state.bytes_read,
        warnings=tuple(warnings),
    )


def _text(p: Path) -> tuple[bytes, StreamState]:
    state = StreamState()
    with open(p, "rb") as fh:
        data = b"".join(file_blocks(fh, state, BLOCK_BYTES, is_gzip(p), p))
    return data, state


def _decode(text: bytes, p: Path) -> tuple[Doc, bool]:
    """The document, and whether it had to be closed after its last complete record (a cut file)."""
    try:
        return msgspec.json.decode(text, type=Doc), False
    except RecursionError:  # msgspec stops at about 1,000 levels; rocprofv3 nests about 6
        raise TraceFormatError(
            "nests about 1,000 levels deep; rocprofv3 writes about 6", path=str(p), fix="pass rocprofv3's JSON output"
        ) from None
    except msgspec.ValidationError as exc:
        raise TraceFormatError(
            f"not a rocprofv3 document ({exc})", path=str(p), fix="pass rocprofv3's JSON output"
        ) from None
    except msgspec.DecodeError:
        pass
    closed = _closed_at_last_record(text)
    try:
        return msgspec.json.decode(closed, type=Doc), True
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        raise TraceFormatError(
            "not valid JSON, and no complete record before the damage",
            path=str(p),
            fix="re-capture with rocprofv3 and let it finish writing",
        ) from None


def _closed_at_last_record(text: bytes) -> bytes:
    """``text`` cut after its last complete ``{...}`` that closes inside a list, with the
    brackets still open there closed: a file cut mid-write becomes the document it had begun."""
    in_str = string_mask(text)
    depth = depth_after(text, in_str)
    b = np.frombuffer(text, np.uint8)
    outside = ~in_str
    opens = np.flatnonzero(((b == ord("[")) | (b == ord("{"))) & outside)  # an opener's level: depth[pos]
    closes = np.flatnonzero((b == ord("}")) & outside)
    for end in closes[::-1][:64].tolist():  # the last object to close at list level
        # the container each level up to ``end``'s depth is in: the last opener of that level before it
        before = opens[opens < end]
        levels = range(int(depth[end]), 0, -1)
        inner = [before[depth[before] == lvl] for lvl in levels]
        if inner and inner[0].size and b[inner[0][-1]] == ord("["):
            closers = b"".join(b"]" if h.size and b[h[-1]] == ord("[") else b"}" for h in inner)
            return text[: end + 1] + closers
    return text


def _gpus(raw: msgspec.Raw) -> tuple[dict[int, int], list[dict[str, Any]]]:
    """GPU agents: handle -> device index, and their properties in ``deviceProperties`` form."""
    try:
        agents = [a for a in msgspec.json.decode(raw) if isinstance(a, dict)]
    except (msgspec.DecodeError, TypeError):
        return {}, []
    gpus = [a for a in agents if a.get("type") == 2 and isinstance(a.get("id"), dict)]
    gpus.sort(key=lambda a: int(a["node_id"]) if isinstance(a.get("node_id"), int) else 0)
    index: dict[int, int] = {}
    props: list[dict[str, Any]] = []
    for rank, a in enumerate(gpus):
        handle, gi = a["id"].get("handle"), a.get("gpu_index")
        if not isinstance(handle, int):
            continue
        index[handle] = gi if isinstance(gi, int) and 0 <= gi < 2**20 else rank
        gfx = a.get("gfx_target_version")
        prop: dict[str, Any] = {"id": index[handle], "name": str(a.get("product_name") or a.get("name") or "")[:256]}
        if isinstance(gfx, int) and 0 < gfx < 10**7:
            prop |= {"computeMajor": gfx // 10000, "computeMinor": gfx // 100 % 100}
        if isinstance(a.get("cu_count"), int):
            prop["numSms"] = a["cu_count"]
        props.append(prop)
    return index, props
