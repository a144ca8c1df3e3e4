"""Files read -> one :class:`Trace`: each file's header parsed into a typed :class:`FileHeader`, a rank per
file (its own where known and free, else the lowest free number), the tables joined, notices for what the
user should know (truncated files, skipped events, guessed ranks)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError, TraceFormatError
from ..notices import Notice
from .columns import FileRead
from .counters import CounterRange
from .memory import MemoryEvents

SPLIT_WARNING = (
    "holds several GPU processes or devices; each (process, device) is a rank, numbered in order of the CUDA "
    "device (torchrun's LOCAL_RANK convention)"
)
_RANK_IN_NAME = re.compile(r"(?:rank[-_]?|_r|proc[-_]?)(\d+)(?![\d])", re.IGNORECASE)
#: the header key the loader sets on one (process, device) of an Nsight export: its rank
NSYS_RANK_KEY = "nsys_rank"


@dataclass(frozen=True, kw_only=True)
class FileHeader:
    """What a file says about itself, from the reader's header (Kineto's top-level keys, the XPlane and
    Nsight readers' own): the only place where that dictionary is read."""

    format: str | None  # "xplane" | "nsys-sqlite" | "nsys-jax"; None for Kineto JSON and Parquet
    device_name: str | None  # deviceProperties[0].name
    device_properties: tuple[dict[str, Any], ...]
    rank: int | None  # distributedInfo.rank
    world_size: int | None
    backend: str | None
    nsys_rank: int | None  # one (process, device) of an Nsight export of several: its rank
    hccl_ops: dict[str, list[Any]] | None = None  # Ascend: HCCL's timing per operator (``ascend_comm.py``)
    ascend_steps: dict[str, list[Any]] | None = None  # Ascend: msprof's split per step (``ascend_steps.py``)
    hccl_links: dict[str, list[Any]] | None = None  # Ascend: HCCL's links (``ascend_matrix.py``)


#: ranks are int32 in the event table: a rank or world size outside [0, 2^31) is not believed
_RANK_LIMIT = 2**31


def _rank_value(v: Any, lowest: int = 0) -> int | None:
    """``v`` when it is an int in [lowest, 2^31), else None (a damaged or hostile field)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and lowest <= v < _RANK_LIMIT else None


def parse_header(header: dict[str, Any]) -> FileHeader:
    raw_info = header.get("distributedInfo")
    info: dict[str, Any] = raw_info if isinstance(raw_info, dict) else {}
    raw_props = header.get("deviceProperties")
    props = [p for p in raw_props if isinstance(p, dict)] if isinstance(raw_props, list) else []
    name = props[0].get("name") if props else None
    fmt = header.get("format")
    nsys_rank = header.get(NSYS_RANK_KEY)
    return FileHeader(
        format=fmt if isinstance(fmt, str) else None,
        device_name=str(name)[:256] if name not in (None, "") else None,  # real names are < 100 chars
        device_properties=tuple(props),
        rank=_rank_value(info.get("rank")),
        world_size=_rank_value(info.get("world_size"), lowest=1),
        backend=str(info["backend"]) if info.get("backend") else None,
        nsys_rank=_rank_value(nsys_rank),
        hccl_ops=_columns(header.get("hccl_ops")),
        ascend_steps=_columns(header.get("ascend_steps")),
        hccl_links=_columns(header.get("hccl_links")),
    )


def _columns(v: Any) -> dict[str, list[Any]] | None:
    """A header's side table (HCCL operators, msprof's steps) when its columns are lists of one
    length (a reader's or a cached file's; anything else is a damaged header and left out)."""
    if not isinstance(v, dict) or not v or not all(isinstance(c, list) for c in v.values()):
        return None
    return v if len({len(c) for c in v.values()}) == 1 else None


@dataclass(frozen=True)
class RankInfo:
    """One rank's source file and what it says about itself."""

    rank: int
    path: str
    rank_source: str  # "distributedInfo" | "filename" | "order" | "nsys process"
    device_name: str | None
    world_size: int | None
    backend: str | None
    num_events: int
    truncated: bool
    device_properties: tuple[dict[str, Any], ...] = ()
    format: str | None = None  # FileHeader.format
    hccl_ops: dict[str, list[Any]] | None = None  # FileHeader.hccl_ops
    ascend_steps: dict[str, list[Any]] | None = None  # FileHeader.ascend_steps
    hccl_links: dict[str, list[Any]] | None = None  # FileHeader.hccl_links


@dataclass
class Trace:
    """All events of one or more ranks in one normalized table (see ``trace/schema.py``)."""

    events: pa.Table
    ranks: tuple[RankInfo, ...]
    notices: tuple[Notice, ...] = ()
    # per rank: collective side args (row = index among that rank's rows, in table order)
    comm_args: dict[int, pa.Table] = field(default_factory=dict)
    # per rank: CUPTI range-profiler counters
    counters: dict[int, tuple[CounterRange, ...]] = field(default_factory=dict)
    # per rank: allocator events (``memory.py``), for ranks whose file has them
    memory: dict[int, MemoryEvents] = field(default_factory=dict)

    @property
    def warnings(self) -> list[str]:
        return [str(n) for n in self.notices]

    def to_polars(self) -> Any:
        """The events as a polars DataFrame (needs the ``polars`` extra)."""
        try:
            import polars as pl
        except ModuleNotFoundError as exc:
            raise ConfigError(
                "Trace.to_polars needs polars, which is not installed", fix='pip install "stepscope[polars]"'
            ) from exc

        return pl.from_arrow(self.events)

    def rank_events(self, rank: int) -> pa.Table:
        return self.events.filter(pc.equal(self.events["rank"], rank))

    @property
    def num_events(self) -> int:
        return self.events.num_rows


def rank_of(path: str, header: FileHeader) -> tuple[int | None, str]:
    """The rank a file names for itself, and where from; (None, "order") when it names none."""
    if header.nsys_rank is not None:
        return header.nsys_rank, "nsys process"
    if header.rank is not None:
        return header.rank, "distributedInfo"
    m = None
    for m in _RANK_IN_NAME.finditer(Path(path).name):  # noqa: B007  (the last match)
        pass
    if m is not None and _rank_value(int(m.group(1)[:12])) is not None:
        return int(m.group(1)), "filename"
    return None, "order"


def resolve_ranks(paths: list[str], found: list[tuple[int | None, str]]) -> tuple[list[tuple[int, str]], list[Notice]]:
    """Final (rank, source) per file: the file's own rank where known and not taken, else the
    lowest free number in file order, with a notice saying so."""
    notices: list[Notice] = []
    used = {r for r, _ in found if r is not None}
    next_free = 0
    taken: set[int] = set()
    out: list[tuple[int, str]] = []
    for path, (rank, source) in zip(paths, found):
        if rank is None or rank in taken:
            if rank in taken:
                notices.append(
                    Notice(f"rank {rank} already taken by another file; numbering this one by file order", path=path)
                )
            while next_free in used or next_free in taken:
                next_free += 1
            was_taken = rank is not None
            rank, source = next_free, "order"
            if len(paths) > 1 and not was_taken:
                notices.append(
                    Notice(f"no rank in distributedInfo or file name; using rank {rank} by file order", path=path)
                )
        taken.add(rank)
        out.append((rank, source))
    return out, notices


def file_notices(fr: FileRead) -> list[Notice]:
    """What the user should know about how a file read: cut short, events skipped."""
    out = []
    if fr.truncated:
        out.append(
            Notice(
                f"file is truncated ({fr.note or 'event list never closes'}); recovered "
                f"{fr.table.num_rows} complete events from {fr.bytes_read:,} bytes",
                path=fr.path,
            )
        )
    out += [Notice(w, path=fr.path) for w in fr.warnings]
    if fr.skipped_events:
        n = fr.skipped_events
        out.append(
            Notice(
                f"skipped {n} unusable event{'s' if n != 1 else ''} (not valid JSON, a field of the wrong "
                "type, or a timestamp or duration missing, not a number, negative or beyond any real trace); the "
                "rest are analyzed",
                path=fr.path,
            )
        )
    return out


def _refuse_if_all_empty(reads: list[FileRead]) -> None:
    empty = [fr.path for fr in reads if fr.table.num_rows == 0]
    if not reads or len(empty) < len(reads):
        return
    skipped = sum(fr.skipped_events for fr in reads)
    where = empty[0] if len(empty) == 1 else f"{len(empty)} files"
    if skipped:  # entries, none of them a trace event: JSON of another kind, or a broken writer
        raise TraceFormatError(
            f"no events to analyze: none of its {skipped} entries is a usable trace event "
            "(ph, ts and dur missing or not numbers)",
            path=where,
            fix="pass the Chrome-trace JSON the profiler wrote (torch.profiler export_chrome_trace)",
        )
    raise TraceFormatError(
        "no events to analyze (the event list is empty)",
        path=where,
        fix="re-capture with the profiler active for at least one step (torch.profiler schedule / jax.profiler.trace)",
    )


def assemble(reads: list[FileRead]) -> Trace:
    headers = [parse_header(fr.header) for fr in reads]
    resolved, notices = resolve_ranks([fr.path for fr in reads], [rank_of(fr.path, h) for fr, h in zip(reads, headers)])
    split = sorted({fr.path for fr, h in zip(reads, headers) if h.nsys_rank is not None})
    notices.extend(Notice(SPLIT_WARNING, path=path) for path in split)
    ranks: list[RankInfo] = []
    tables: list[pa.Table] = []
    for fr, h, (rank, source) in zip(reads, headers, resolved):
        notices.extend(file_notices(fr))
        tables.append(fr.table.set_column(0, "rank", pa.array(np.full(fr.table.num_rows, rank, dtype=np.int32))))
        ranks.append(
            RankInfo(
                rank=rank,
                path=fr.path,
                rank_source=source,
                device_name=h.device_name,
                world_size=h.world_size,
                backend=h.backend,
                num_events=fr.table.num_rows,
                truncated=fr.truncated,
                device_properties=h.device_properties,
                format=h.format,
                hccl_ops=h.hccl_ops,
                ascend_steps=h.ascend_steps,
                hccl_links=h.hccl_links,
            )
        )
    _refuse_if_all_empty(reads)
    notices.extend(
        Notice("no events; its rank is empty in the analysis", path=fr.path) for fr in reads if fr.table.num_rows == 0
    )
    order = sorted(range(len(ranks)), key=lambda i: ranks[i].rank)
    ranks = [ranks[i] for i in order]
    tables = [tables[i] for i in order]
    if not tables:
        events = pa.table({})
    elif len(tables) == 1:
        events = tables[0]
    else:
        events = pa.concat_tables(tables).unify_dictionaries()
    return Trace(
        events=events,
        ranks=tuple(ranks),
        notices=tuple(notices),
        comm_args={rank: fr.comm_args for fr, (rank, _) in zip(reads, resolved) if fr.comm_args is not None},
        counters={rank: fr.counters for fr, (rank, _) in zip(reads, resolved) if fr.counters},
        memory={rank: fr.memory for fr, (rank, _) in zip(reads, resolved) if fr.memory is not None},
    )
