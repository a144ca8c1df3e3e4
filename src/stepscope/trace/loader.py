"""Find trace files, give each a rank, read them (in parallel) and return one :class:`Trace`."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError, TraceFormatError
from . import parquet
from .columns import keep_plausible
from .jsonstream import is_gzip
from .kineto import FileRead, read_kineto

TRACE_SUFFIXES = (".json", ".json.gz", ".parquet", ".xplane.pb", ".zip", ".sqlite")
_NSYS_REPORT = (".nsys-rep", ".qdrep")
SPLIT_WARNING = (
    "holds several GPU processes or devices; each (process, device) is a rank, numbered in order of the CUDA "
    "device (torchrun's LOCAL_RANK convention)"
)
_RANK_IN_NAME = re.compile(r"(?:rank[-_]?|_r|proc[-_]?)(\d+)(?![\d])", re.IGNORECASE)


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


@dataclass
class Trace:
    """All events of one or more ranks in one normalized table (see ``trace/schema.py``)."""

    events: pa.Table
    ranks: tuple[RankInfo, ...]
    warnings: list[str] = field(default_factory=list)
    # per rank: collective side args (row = index among that rank's rows, in table order)
    comm_args: dict[int, pa.Table] = field(default_factory=dict)

    def to_polars(self) -> Any:
        """The events as a polars DataFrame (needs the ``polars`` extra)."""
        import polars as pl

        return pl.from_arrow(self.events)

    def rank_events(self, rank: int) -> pa.Table:
        return self.events.filter(pc.equal(self.events["rank"], rank))

    @property
    def num_events(self) -> int:
        return self.events.num_rows


def expand_paths(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], skipped: list[str] | None = None
) -> list[Path | str]:
    """Files, directories (their trace files) and glob patterns -> a sorted, de-duplicated list.
    A directory's JSON files that are not Chrome traces (a run's config.json beside its traces)
    are left out and named in ``skipped``; a file named on its own is always read."""
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    out: list[Path] = []
    urls: list[str] = []
    for item in items:
        s = os.fspath(item)
        p = Path(s)
        if "://" in s:  # fsspec URL: expanded (globs) by fsspec, read by the worker that analyzes it
            urls.extend(_fsspec_expand(s))
            continue
        try:
            kind = "dir" if p.is_dir() else "file" if p.is_file() else ""
        except OSError as exc:  # a name the OS refuses (too long, ...): is_dir raises rather than says no
            raise InputError(f"cannot use this path ({exc.strerror})", path=s[:200], fix="check the path") from None
        if kind == "dir":
            candidates = _dir_traces(p)
            why = {q: _skip_reason(q) for q in candidates}
            found = [q for q in candidates if why[q] is None]
            # Nsight reports beside no export of their own: only nsys reads them
            reports = sorted(
                q for q in p.iterdir() if q.name.endswith(_NSYS_REPORT) and not q.with_suffix(".sqlite").exists()
            )
            if not found:
                what = f" ({len(candidates)} JSON or SQLite files, none a trace)" if candidates else ""
                if reports:
                    raise InputError(
                        f"directory holds Nsight Systems reports ({len(reports)}), which only nsys reads",
                        path=s,
                        fix=f"export each first: nsys export --type sqlite -o {reports[0].stem}.sqlite {reports[0].name}",
                    )
                raise InputError(
                    f"directory holds no trace files (*.json, *.json.gz, *.parquet, *.xplane.pb, *.sqlite){what}",
                    path=s,
                    fix="point at the profiler's output folder",
                )
            if skipped is not None:
                skipped.extend(
                    f"{q}: an Nsight Systems report, which only nsys reads; skipped (nsys export --type sqlite -o "
                    f"{q.stem}.sqlite {q.name})"
                    for q in reports
                )
            out.extend(found)
            if skipped is not None:
                skipped.extend(f"{q}: {why[q]}; skipped" for q in candidates if why[q] is not None)
        elif kind == "file":
            out.append(p)
        elif any(ch in s for ch in "*?["):
            matched = sorted(Path(m) for m in glob.glob(s) if Path(m).is_file())
            if not matched:
                raise InputError("glob matches no files", path=s, fix="check the pattern")
            out.extend(matched)
        else:
            raise InputError("no such file or directory", path=s, fix="check the path")
    seen: set[Path] = set()
    unique: list[Path | str] = []
    for p in out:
        rp = p.resolve()
        if rp not in seen:
            seen.add(rp)
            unique.append(p)
    return unique + sorted(set(urls))


def _fsspec_expand(url: str) -> list[str]:
    try:
        import fsspec
    except ImportError:
        raise InputError("URL inputs need fsspec", path=url, fix='pip install "stepscope[dask]"') from None
    fs, _, _ = fsspec.core.get_fs_token_paths(url)
    proto = url.split("://", 1)[0]
    if any(ch in url for ch in "*?["):
        found = sorted(fs.glob(url.split("://", 1)[1]))
    elif fs.isdir(url):
        found = sorted(x for x in fs.ls(url, detail=False) if str(x).endswith(TRACE_SUFFIXES))
    else:
        found = [url.split("://", 1)[1]] if fs.exists(url) else []
    if not found:
        raise InputError("no trace files at this URL", path=url, fix="check the URL")
    return [f"{proto}://{str(f).split('://', 1)[-1].lstrip('/')}" if proto != "file" else str(f) for f in found]


_SNIFF_BYTES = 1 << 20


def _skip_reason(q: Path) -> str | None:
    """Why a directory's JSON file is not one of its traces, from its first MB: neither a
    ``traceEvents`` key nor a bare event list (``[`` first, an event's ``"ph"`` in it), or a trace
    stepscope wrote itself (``--critical-path-trace``: every rank's collectives, not a rank).
    None for a file that may be a trace: the readers judge the rest. A ``.sqlite`` file holding
    none of the tables an Nsight export has (another tool's database) is not one either."""
    if q.name.endswith(".sqlite"):
        from .nsys_sqlite import nsys_tables_present

        return None if nsys_tables_present(q) is not False else "an SQLite file without Nsight Systems tables"
    if not q.name.endswith((".json", ".json.gz")):
        return None
    import gzip

    head = b""
    try:
        with gzip.open(q, "rb") if is_gzip(q) else open(q, "rb") as fh:
            while len(head) < _SNIFF_BYTES:  # a trace names traceEvents in its first KBs: stop there
                part = fh.read(64 << 10)
                head += part
                if not part or b'"traceEvents"' in head:
                    break
    except (OSError, EOFError):
        return None  # unreadable: the reader says why
    body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if body.startswith(b'{"stepscope_output"'):
        return "a trace stepscope wrote (--critical-path-trace), not a rank's"
    # a bare event list names "ph" in its first event; an empty file is the reader's to report
    if b'"traceEvents"' in head or (body[:1] == b"[" and (b'"ph"' in head or len(body.rstrip()) <= 2)) or not body:
        return None
    return "not a Chrome trace (no traceEvents near its start)"


def _dir_traces(d: Path) -> list[Path]:
    """Trace files of a directory. A ``jax.profiler`` log directory (``plugins/profile/<run>/``,
    found at any depth) gives its latest run's ``<host>.xplane.pb`` files; the ``<host>.trace.json.gz``
    beside an XPlane file is a derived view of the same events and is skipped."""
    found = sorted(q for q in d.iterdir() if q.is_file() and q.name.endswith(TRACE_SUFFIXES))
    if not found:
        runs = sorted({q.parent for q in d.rglob("*.xplane.pb")})
        if runs:
            found = sorted(runs[-1].glob("*.xplane.pb"))  # run folders are named by start time
    hosts = {q.name[: -len(".xplane.pb")] for q in found if q.name.endswith(".xplane.pb")}
    return [q for q in found if not (q.name.endswith(".trace.json.gz") and q.name[: -len(".trace.json.gz")] in hosts)]


Job = tuple[
    str, bool, str | None, tuple[int, int, int] | None
]  # path, include_python, cache_dir, an nsys (pid, device, ordinal)


def is_nsys_sqlite_path(path: str) -> bool:
    """A local file named .sqlite or starting with SQLite's header (URLs: no; analyze copies them first)."""
    if "://" in path:
        return False
    if path.endswith(".sqlite"):
        return True
    from .nsys_sqlite import is_nsys_sqlite

    return os.path.isfile(path) and is_nsys_sqlite(path)


def jobs_for(paths: Sequence[str | os.PathLike[str]], include_python: bool, cache_dir: str | None) -> list[Job]:
    """One job per file; an Nsight SQLite export holding several (process, device) pairs (every
    rank ``nsys profile`` launched, or a process driving several devices) one per pair, numbered in
    order of the CUDA device."""
    out: list[Job] = []
    base = 0  # numbered on from the previous export's: two nodes' exports give 0-7 and 8-15
    for p in paths:
        s = str(p)
        units: list[tuple[int, int]] = []
        if is_nsys_sqlite_path(s):
            from .nsys_sqlite import gpu_units

            units = gpu_units(s)
        if len(units) > 1:
            out.extend((s, include_python, cache_dir, (pid, dev, base + i)) for i, (pid, dev) in enumerate(units))
            base += len(units)
        else:
            out.append((s, include_python, cache_dir, None))
    return out


def read_one(args: tuple[str, bool, str | None] | Job) -> FileRead:
    path, include_python, cache_dir = args[:3]
    part = args[3] if len(args) > 3 else None
    if path.endswith(_NSYS_REPORT):
        raise TraceFormatError(
            "an Nsight Systems report, which only nsys itself reads",
            path=path,
            fix=f"export it first: nsys export --type sqlite -o {Path(path).stem}.sqlite {Path(path).name}",
        )
    if "://" in path and path.endswith(".sqlite"):
        raise TraceFormatError(
            "an Nsight SQLite export is read from a local file",
            path=path,
            fix="copy it to local disk, or use stepscope analyze, which copies URLs first",
        )
    nsys = is_nsys_sqlite_path(path)
    if nsys and part is not None:  # one (process, device) of several: no cache entry (the cache is per file)
        from dataclasses import replace

        from .nsys_sqlite import read_nsys_sqlite

        fr = keep_plausible(read_nsys_sqlite(path, process=part[0], device=part[1]))
        return replace(fr, header={**fr.header, "nsys_rank": part[2]})
    if path.endswith(".parquet"):
        return keep_plausible(parquet.read_parquet(path))  # a damaged cache's values are untrusted too
    if cache_dir:
        hit = parquet.cache_lookup(path, cache_dir, include_python)
        if hit is not None:
            return keep_plausible(hit)
    if nsys:
        from .nsys_sqlite import read_nsys_sqlite

        fr = keep_plausible(read_nsys_sqlite(path))
    elif path.endswith(".xplane.pb"):
        from .xplane import read_xplane

        fr = keep_plausible(read_xplane(path, include_python=include_python))
    elif path.endswith(".zip"):
        from .nsys_jax import read_nsys_jax

        fr = keep_plausible(read_nsys_jax(path))
    else:
        fr = read_kineto(path, include_python=include_python)
    if cache_dir and not fr.truncated:
        parquet.cache_store(fr, cache_dir, include_python)
    return fr


def rank_of(fr: FileRead) -> tuple[int | None, str]:
    if isinstance(fr.header.get("nsys_rank"), int):
        return int(fr.header["nsys_rank"]), "nsys process"
    info = fr.header.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"]), "distributedInfo"
    m = None
    for m in _RANK_IN_NAME.finditer(Path(fr.path).name):  # noqa: B007  (the last match)
        pass
    if m is not None:
        return int(m.group(1)), "filename"
    return None, "order"


def load(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    include_python: bool = False,
    workers: int | None = None,
    cache_dir: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Trace:
    """Read traces into one :class:`Trace`.

    ``inputs``: a file, a directory of per-rank files, a glob, or a list of these (Kineto JSON,
    XPlane, nsys-jax archives, Nsight Systems SQLite exports, stepscope Parquet).
    Ranks come from ``distributedInfo.rank``, else the file name (``rank-3``, ``rank3``, ``_r3``),
    else the file's position in the sorted list (with a warning). Files are read in parallel
    over ``workers`` processes (default: one per file, at most the CPU count).
    """
    paths = expand_paths(inputs)
    jobs = jobs_for(paths, include_python, cache_dir)
    n_workers = workers if workers is not None else min(len(jobs), os.cpu_count() or 1)
    reads: list[FileRead] = []
    if n_workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=n_workers) as pool:
            for fr in pool.map(read_one, jobs):
                reads.append(fr)
                if progress:
                    progress(fr.path)
    else:
        for job in jobs:
            reads.append(read_one(job))
            if progress:
                progress(job[0])
    return assemble(reads)


def resolve_ranks(paths: list[str], found: list[tuple[int | None, str]]) -> tuple[list[tuple[int, str]], list[str]]:
    """Final (rank, source) per file: the file's own rank where known and not taken, else the
    lowest free number in file order, with a warning saying so."""
    warnings: list[str] = []
    used = {r for r, _ in found if r is not None}
    next_free = 0
    taken: set[int] = set()
    out: list[tuple[int, str]] = []
    for path, (rank, source) in zip(paths, found):
        if rank is None or rank in taken:
            if rank in taken:
                warnings.append(f"{path}: rank {rank} already taken by another file; numbering this one by file order")
            while next_free in used or next_free in taken:
                next_free += 1
            was_taken = rank is not None
            rank, source = next_free, "order"
            if len(paths) > 1 and not was_taken:
                warnings.append(f"{path}: no rank in distributedInfo or file name; using rank {rank} by file order")
        taken.add(rank)
        out.append((rank, source))
    return out, warnings


def assemble(reads: list[FileRead]) -> Trace:
    ranks: list[RankInfo] = []
    tables: list[pa.Table] = []
    resolved, warnings = resolve_ranks([fr.path for fr in reads], [rank_of(fr) for fr in reads])
    split = sorted({fr.path for fr in reads if "nsys_rank" in fr.header})
    warnings.extend(f"{path}: {SPLIT_WARNING}" for path in split)
    for fr, (rank, source) in zip(reads, resolved):
        if fr.truncated:
            warnings.append(
                f"{fr.path}: file is truncated ({fr.note or 'event list never closes'}); recovered "
                f"{fr.table.num_rows} complete events from {fr.bytes_read:,} bytes"
            )
        if fr.skipped_events:
            n = fr.skipped_events
            warnings.append(
                f"{fr.path}: skipped {n} unusable event{'s' if n != 1 else ''} (not valid JSON, a field of the wrong "
                "type, or a timestamp or duration missing, not a number, negative or beyond any real trace); the rest are analyzed"
            )
        table = fr.table.set_column(0, "rank", pa.array(np.full(fr.table.num_rows, rank, dtype=np.int32)))
        tables.append(table)
        raw_info = fr.header.get("distributedInfo")
        info: dict[str, Any] = raw_info if isinstance(raw_info, dict) else {}
        raw_props = fr.header.get("deviceProperties")
        props = [p for p in raw_props if isinstance(p, dict)] if isinstance(raw_props, list) else []
        name = props[0].get("name") if props else None
        ranks.append(
            RankInfo(
                rank=rank,
                path=fr.path,
                rank_source=source,
                device_name=str(name) if name not in (None, "") else None,
                world_size=info.get("world_size") if isinstance(info.get("world_size"), int) else None,
                backend=str(info["backend"]) if info.get("backend") else None,
                num_events=fr.table.num_rows,
                truncated=fr.truncated,
                device_properties=tuple(props),
            )
        )
    empty = [fr.path for fr in reads if fr.table.num_rows == 0]
    if reads and len(empty) == len(reads):
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
    warnings.extend(f"{path}: no events; its rank is empty in the analysis" for path in empty)
    order = sorted(range(len(ranks)), key=lambda i: ranks[i].rank)
    ranks = [ranks[i] for i in order]
    tables = [tables[i] for i in order]
    if not tables:
        events = pa.table({})
    elif len(tables) == 1:
        events = tables[0]
    else:
        events = pa.concat_tables(tables).unify_dictionaries()
    comm = {rank: fr.comm_args for fr, (rank, _) in zip(reads, resolved) if fr.comm_args is not None}
    return Trace(events=events, ranks=tuple(ranks), warnings=warnings, comm_args=comm)
