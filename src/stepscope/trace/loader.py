"""Find trace files and read them (in parallel) into one :class:`Trace`.

A read job (:class:`ReadJob`) is one file, or one (process, device) of an Nsight export of several;
:func:`read_one` reads it into a :class:`FileRead` holding everything the file has (events, collective side
args, hardware counters, header), from the Parquet cache when one is given. ``assemble.py`` numbers the ranks.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from ..errors import InputError, TraceFormatError
from ..executor import Progress, run_all
from ..notices import Notice
from .assemble import NSYS_RANK_KEY, Trace, assemble
from .columns import FileRead, keep_plausible
from .kineto import read_kineto
from .side_events import with_side_events
from .sniff import interpret_json, is_rocprof_path, skip_reason

TRACE_SUFFIXES = (".json", ".json.gz", ".parquet", ".xplane.pb", ".zip", ".sqlite")
_NSYS_REPORT = (".nsys-rep", ".qdrep")


Inputs = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def expand_inputs(inputs: Inputs) -> tuple[list[Path | str], list[Notice]]:
    """Files, directories (their trace files) and glob patterns -> a sorted, de-duplicated list.
    A directory's JSON files that are not Chrome traces (a run's config.json beside its traces)
    are left out, each with a notice; a file named on its own is always read."""
    skipped: list[Notice] = []
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
            found, notices = _expand_dir(p, s)
            out.extend(found)
            skipped.extend(notices)
        elif kind == "file":
            out.append(p)
        elif any(ch in s for ch in "*?["):
            matched = sorted(Path(m) for m in glob.glob(s) if Path(m).is_file())
            if not matched:
                raise InputError("glob matches no files", path=s, fix="check the pattern")
            out.extend(matched)
        elif os.path.exists(s):  # a pipe, a device, a socket: reading it could block or never end
            raise InputError("not a regular file (a pipe, device or socket)", path=s, fix="pass a trace file")
        else:
            raise InputError("no such file or directory", path=s, fix="check the path")
    seen: set[Path] = set()
    unique: list[Path | str] = []
    for p in out:
        rp = p.resolve()
        if rp not in seen:
            seen.add(rp)
            unique.append(p)
    return [*unique, *sorted(set(urls))], skipped


def _expand_dir(d: Path, given: str) -> tuple[list[Path], list[Notice]]:
    """A directory's trace files, and a notice for each file left out (not a trace, an Nsight report);
    ``given``: the directory as the user wrote it, for the errors."""
    candidates = _dir_traces(d)
    why = {q: skip_reason(q) for q in candidates}
    found = [q for q in candidates if why[q] is None]
    # Nsight reports beside no export of their own: only nsys reads them
    reports = sorted(q for q in d.iterdir() if q.name.endswith(_NSYS_REPORT) and not q.with_suffix(".sqlite").exists())
    if not found:
        what = f" ({len(candidates)} JSON or SQLite files, none a trace)" if candidates else ""
        if reports:
            raise InputError(
                f"directory holds Nsight Systems reports ({len(reports)}), which only nsys reads",
                path=given,
                fix=f"export each first: nsys export --type sqlite -o {reports[0].stem}.sqlite {reports[0].name}",
            )
        raise InputError(
            f"directory holds no trace files (*.json, *.json.gz, *.parquet, *.xplane.pb, *.sqlite){what}",
            path=given,
            fix="point at the profiler's output folder",
        )
    notices = [
        Notice(
            f"an Nsight Systems report, which only nsys reads; skipped (nsys export --type sqlite -o "
            f"{q.stem}.sqlite {q.name})",
            path=str(q),
        )
        for q in reports
    ]
    notices.extend(Notice(f"{why[q]}; skipped", path=str(q)) for q in candidates if why[q] is not None)
    return found, notices


def _fsspec_expand(url: str) -> list[str]:
    try:
        import fsspec
    except ImportError:
        raise InputError("URL inputs need fsspec", path=url, fix='pip install "stepscope[dask]"') from None
    proto = url.split("://", 1)[0]
    try:
        fs, _, _ = fsspec.core.get_fs_token_paths(url)
        if any(ch in url for ch in "*?["):
            found = sorted(fs.glob(url.split("://", 1)[1]))
        elif fs.isdir(url):
            found = sorted(x for x in fs.ls(url, detail=False) if str(x).endswith(TRACE_SUFFIXES))
        else:
            found = [url.split("://", 1)[1]] if fs.exists(url) else []
    except ImportError as exc:  # the protocol's package is not installed (s3fs, gcsfs, aiohttp, ...)
        raise InputError(
            f"{proto}:// needs a package that is not installed ({' '.join(str(exc).split())})",
            path=url,
            fix="install it, or copy the file to local disk",
        ) from None
    except (ValueError, OSError, TimeoutError) as exc:  # unknown protocol, unreachable host, no permission
        raise InputError(
            f"cannot list this URL ({exc.__class__.__name__}: {' '.join(str(exc).split())[:200]})",
            path=url,
            fix="check the URL and your credentials, or copy the file to local disk",
        ) from None
    if not found:
        raise InputError("no trace files at this URL", path=url, fix="check the URL")
    return [f"{proto}://{str(f).split('://', 1)[-1].lstrip('/')}" if proto != "file" else str(f) for f in found]


def _dir_traces(d: Path) -> list[Path]:
    """Trace files of a directory. An Ascend profiling directory (or a folder of them, one per
    rank) gives its ``trace_view.json`` files (``ascend_files.py``). A ``jax.profiler`` log directory (``plugins/profile/<run>/``,
    found at any depth) gives its latest run's ``<host>.xplane.pb`` files; the ``<host>.trace.json.gz``
    beside an XPlane file is a derived view of the same events and is skipped."""
    from .ascend_files import ascend_timelines

    ascend = ascend_timelines(d)  # its other JSON files are not traces: the reader's own inputs
    if ascend:
        return ascend
    found = sorted(q for q in d.iterdir() if q.is_file() and q.name.endswith(TRACE_SUFFIXES))
    if not found:
        runs = sorted({q.parent for q in d.rglob("*.xplane.pb")})
        if runs:
            found = sorted(runs[-1].glob("*.xplane.pb"))  # run folders are named by start time
    hosts = {q.name[: -len(".xplane.pb")] for q in found if q.name.endswith(".xplane.pb")}
    return [q for q in found if not (q.name.endswith(".trace.json.gz") and q.name[: -len(".trace.json.gz")] in hosts)]


class NsysPart(NamedTuple):
    """One (process, device) of an Nsight export of several, and its rank (``ordinal``)."""

    pid: int
    device: int
    ordinal: int


class ReadJob(NamedTuple):
    """One unit of reading: a file, or one (process, device) of an Nsight export (``part``)."""

    path: str
    include_python: bool = False
    cache_dir: str | None = None
    part: NsysPart | None = None


def is_nsys_sqlite_path(path: str) -> bool:
    """A local file named .sqlite or starting with SQLite's header (URLs: no; analyze copies them first)."""
    if "://" in path:
        return False
    if path.endswith(".sqlite"):
        return True
    from .nsys_db import is_nsys_sqlite

    return os.path.isfile(path) and is_nsys_sqlite(path)


def jobs_for(paths: Sequence[str | os.PathLike[str]], include_python: bool, cache_dir: str | None) -> list[ReadJob]:
    """One job per file; an Nsight SQLite export holding several (process, device) pairs (every
    rank ``nsys profile`` launched, or a process driving several devices) one per pair, numbered in
    order of the CUDA device."""
    out: list[ReadJob] = []
    base = 0  # numbered on from the previous export's: two nodes' exports give 0-7 and 8-15
    for p in paths:
        s = str(p)
        units: list[tuple[int, int]] = []
        if is_nsys_sqlite_path(s):
            from .nsys_sqlite import gpu_units

            units = gpu_units(s)
        if len(units) > 1:
            out.extend(
                ReadJob(s, include_python, cache_dir, NsysPart(pid, dev, base + i))
                for i, (pid, dev) in enumerate(units)
            )
            base += len(units)
        else:
            out.append(ReadJob(s, include_python, cache_dir))
    return out


def read_one(job: ReadJob) -> FileRead:
    """Everything one job's file holds. A file the system will not let us read (no permission, a
    disk error, removed meanwhile) is one error line naming it."""
    try:
        return _read_one(job)
    except OSError as exc:
        raise InputError(
            f"cannot read ({exc.strerror or exc.__class__.__name__})", path=job.path, fix="check the file is readable"
        ) from None


def _read_one(job: ReadJob) -> FileRead:
    path, include_python, cache_dir, part = job
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
        from .nsys_sqlite import read_nsys_sqlite

        fr = keep_plausible(read_nsys_sqlite(path, process=part.pid, device=part.device))
        return replace(fr, header={**fr.header, NSYS_RANK_KEY: part.ordinal})
    if path.endswith(".parquet"):
        from . import parquet

        return keep_plausible(parquet.read_parquet(path))  # a damaged cache's values are untrusted too
    if cache_dir:
        from . import parquet

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
    elif "://" not in path and is_rocprof_path(path):
        from .rocprof import read_rocprof

        fr = keep_plausible(read_rocprof(path))
    else:
        fr = interpret_json(with_side_events(read_kineto(path, include_python=include_python)))
    if cache_dir and not fr.truncated and not fr.warnings:
        from . import parquet

        failed = parquet.cache_store(fr, cache_dir, include_python)
        if failed:
            fr = replace(fr, warnings=(*fr.warnings, failed))
    return fr


def load(
    inputs: Inputs,
    *,
    include_python: bool = False,
    workers: int | None = None,
    cache_dir: str | None = None,
    progress: Progress | None = None,
) -> Trace:
    """Read traces into one :class:`Trace`.

    ``inputs``: a file, a directory of per-rank files, a glob, or a list of these (Kineto JSON,
    XPlane, nsys-jax archives, Nsight Systems SQLite exports, stepscope Parquet).
    Ranks come from ``distributedInfo.rank``, else the file name (``rank-3``, ``rank3``, ``_r3``),
    else the file's position in the sorted list (with a warning). A directory's files left out
    are told in ``Trace.notices``, before the others. Files are read in parallel
    over ``workers`` processes (default: one per file, at most the CPU count);
    ``progress(done, total)`` as files finish.
    """
    paths, skipped = expand_inputs(inputs)
    reads = run_all(read_one, jobs_for(paths, include_python, cache_dir), workers=workers, progress=progress)
    trace = assemble(reads)
    return replace(trace, notices=(*skipped, *trace.notices))
