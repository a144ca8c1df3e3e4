"""Save a parsed trace as Parquet and reopen it without parsing JSON again; a cache keyed by content.

The file's header (``deviceProperties``, ``distributedInfo``...) rides along as JSON in the Parquet
schema metadata under ``stepscope.header``, so a reopened file carries the same rank/device facts.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import TraceFormatError
from . import schema
from .columns import FileRead
from .commside import comm_table
from .counters import CounterRange
from .memory import MemoryEvents

_HEADER_KEY = b"stepscope.header"
_COMM_KEY = b"stepscope.comm_args"  # the collective side args (small: rows with any), as JSON columns
_COUNTERS_KEY = b"stepscope.counters"  # CUPTI range-profiler counters: [name, ts_ns, dur_ns, flops, dram_bytes]
_MEMORY_KEY = b"stepscope.memory"  # allocator events (``memory.MemoryEvents.encode``)
_CACHE_FORMAT = (
    3  # in the cache file name: an entry of another format (2 has no memory events, 1 no counters) is not read
)
_KEEP_HEADER = (
    "schemaVersion",
    "deviceProperties",
    "distributedInfo",
    "displayTimeUnit",
    "baseTimeNanoseconds",
    "traceName",
    "format",
    "hccl_ops",
    "ascend_steps",
    "hccl_links",
)


def write_parquet(fr: FileRead, out: str | os.PathLike[str]) -> None:
    header = {k: fr.header[k] for k in _KEEP_HEADER if k in fr.header}
    header["_source"] = fr.path
    meta = dict(fr.table.schema.metadata or {})
    meta[_HEADER_KEY] = msgspec.json.encode(header)
    if fr.comm_args is not None and fr.comm_args.num_rows:
        meta[_COMM_KEY] = msgspec.json.encode(fr.comm_args.to_pydict())
    if fr.counters:
        meta[_COUNTERS_KEY] = msgspec.json.encode(
            [[c.name, c.ts_ns, c.dur_ns, c.flops, c.dram_bytes] for c in fr.counters]
        )
    if fr.memory is not None:
        meta[_MEMORY_KEY] = fr.memory.encode()
    table = fr.table.replace_schema_metadata(meta)
    # a temporary name of its own (two processes may write the same cache entry at once), then an
    # atomic rename: a reader sees the old file or the new one, never half of one
    dest = Path(out)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_parquet(path: str | os.PathLike[str]) -> FileRead:
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceFormatError(
            f"not a readable Parquet file ({exc})", path=str(path), fix="re-create it with `stepscope convert`"
        ) from None
    meta = table.schema.metadata or {}
    if table.schema.remove_metadata() != schema.EVENT_SCHEMA.remove_metadata():
        raise TraceFormatError(
            "Parquet file is not a stepscope event table of this version",
            path=str(path),
            fix="re-create it with `stepscope convert`",
        )
    header: dict[str, Any] = {}
    if _HEADER_KEY in meta:
        try:
            decoded = msgspec.json.decode(meta[_HEADER_KEY])
        except (msgspec.DecodeError, RecursionError):
            decoded = None  # a damaged (or too deeply nested) header only loses the rank and device facts
        header = decoded if isinstance(decoded, dict) else {}
    comm = None
    if _COMM_KEY in meta:
        try:
            d = msgspec.json.decode(meta[_COMM_KEY])
            comm = comm_table(d)
        except (msgspec.DecodeError, RecursionError, KeyError, TypeError, pa.ArrowException, OverflowError):
            comm = None  # an unreadable side table only loses the collective args
    return FileRead(
        path=str(path),
        table=table.replace_schema_metadata(schema.EVENT_SCHEMA.metadata),
        header=header,
        truncated=False,
        note="",
        skipped_events=0,
        bytes_read=0,
        comm_args=comm,
        counters=_counters(meta.get(_COUNTERS_KEY)),
        memory=_memory(meta.get(_MEMORY_KEY)),
    )


def _memory(raw: bytes | None) -> MemoryEvents | None:
    """The allocator events a Parquet file keeps; an unreadable entry loses only the memory figures."""
    if raw is None:
        return None
    try:
        return MemoryEvents.decode(raw)
    except ValueError:
        return None


def _counters(raw: bytes | None) -> tuple[CounterRange, ...]:
    """The counters a Parquet file keeps; an unreadable entry loses only the measured roofline."""
    if raw is None:
        return ()
    try:
        return tuple(
            CounterRange(
                str(n),
                int(ts),
                int(dur),
                {str(k): float(v) for k, v in flops.items()},
                None if dram is None else float(dram),
            )
            for n, ts, dur, flops, dram in msgspec.json.decode(raw)
        )
    except (msgspec.DecodeError, RecursionError, TypeError, ValueError, AttributeError, OverflowError):
        return ()


def fingerprint(path: str | os.PathLike[str]) -> str:
    """Content key: BLAKE2b of the size, the modification time (ns), the first and last MiB and 64
    pages of 4 KiB spread evenly between them. Cheap on GB files; an edit anywhere changes the
    modification time, and a rewrite of the same size and time (rare) must also keep every page."""
    p = Path(path)
    st = p.stat()
    size = st.st_size
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{size}:{st.st_mtime_ns}".encode())
    with open(p, "rb") as fh:
        h.update(fh.read(1 << 20))
        if size > 2 << 20:
            for k in range(1, 65):
                fh.seek((size * k) // 65)
                h.update(fh.read(4096))
            fh.seek(size - (1 << 20))
            h.update(fh.read())
    return h.hexdigest()


def _cache_path(path: str, cache_dir: str, include_python: bool) -> Path:
    tag = f"{fingerprint(path)}-s{schema.SCHEMA_VERSION}-f{_CACHE_FORMAT}{'-py' if include_python else ''}"
    return Path(cache_dir) / f"{tag}.parquet"


def cache_lookup(path: str, cache_dir: str, include_python: bool) -> FileRead | None:
    try:
        cp = _cache_path(path, cache_dir, include_python)
        if not cp.exists():
            return None
        fr = read_parquet(cp)
    except (OSError, TraceFormatError):  # unreadable or damaged entry: read the trace itself
        return None
    return FileRead(
        path=path,
        table=fr.table,
        header=fr.header,
        truncated=False,
        note="",
        skipped_events=0,
        bytes_read=0,
        comm_args=fr.comm_args,
        counters=fr.counters,
        memory=fr.memory,
    )


def cache_store(fr: FileRead, cache_dir: str, include_python: bool) -> str | None:
    """Store ``fr``; a cache that cannot be written is skipped: the warning to show, else None."""
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        write_parquet(fr, _cache_path(fr.path, cache_dir, include_python))
    except OSError as exc:
        return f"not cached: cannot write to the cache directory {cache_dir[:200]} ({exc.strerror or exc})"
    return None
