"""The one way to analyze traces: :func:`analyze`, for the command line and the library alike.

Files are read and analyzed where they are (one job per file, or per (process, device) of an Nsight
export) in this process, in worker processes or on a Dask cluster (``executor.py``); only the small
per-rank results come back, so memory here does not grow with the number of ranks. A :class:`Trace`
already loaded is analyzed here, rank by rank, through the same steps (``units.py``).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..advisor.engine import advise
from ..advisor.rules import load_rules as advisor_rules
from ..executor import Progress, run_all
from ..notices import Notice
from ..trace.assemble import Trace, assemble, parse_header, rank_of
from ..trace.loader import Inputs, ReadJob, expand_inputs, jobs_for, read_one
from .classify import load_rules
from .config import AnalyzeConfig
from .results import Analysis
from .units import Part, UnitResult, analyze_unit, merge, rank_inputs, trace_units, with_hlo


def analyze(
    inputs: Inputs | Trace,
    config: AnalyzeConfig | None = None,
    *,
    workers: int | None = None,
    dask: str | None = None,
    cache_dir: str | None = None,
    include_python: bool = False,
    progress: Progress | None = None,
) -> Analysis:
    """Analyze trace files (paths, directories, globs, fsspec URLs, or a list of these) or a loaded
    :class:`Trace`. Files go over ``workers`` processes (default: one per file, at most the CPU count)
    or the Dask cluster ``dask`` (scheduler address or file); ``cache_dir`` keeps parsed files as Parquet;
    ``progress(done, total)`` as jobs finish. The directories' files that are not traces are named in
    the warnings."""
    cfg = config or AnalyzeConfig()
    rules = advisor_rules(cfg.advisor_rules)  # a bad rule file is refused before any trace is read
    if isinstance(inputs, Trace):
        units, first = trace_units(inputs, cfg)
        result = merge([r.path for r in inputs.ranks], units, first, cfg)
    else:
        paths, skipped = expand_inputs(inputs)
        jobs = [AnalysisJob(read=j, config=cfg) for j in jobs_for(paths, include_python, cache_dir)]
        units = run_all(analyze_job, jobs, workers=workers, dask=dask, progress=progress)
        result = merge([j.read.path for j in jobs], units, skipped, cfg)
    return dataclasses.replace(result, findings=advise(result, rules))


@dataclass(frozen=True)
class AnalysisJob:
    read: ReadJob
    config: AnalyzeConfig


def analyze_job(job: AnalysisJob) -> UnitResult:
    """Read one job's file and analyze it (in a worker). A URL is copied to a local file first."""
    path, cfg = job.read.path, job.config
    if "://" in path:
        return _remote(job)
    fr = read_one(job.read)
    found = rank_of(fr.path, parse_header(fr.header))
    trace, hlo_notices = with_hlo(assemble([fr]), cfg)
    (unit,) = rank_inputs(trace)
    parts = analyze_unit(unit, cfg, load_rules(cfg.rules_file))
    if job.read.part is not None:  # one (process, device) of an Nsight export
        ra = parts[0].analysis
        label = f"{ra.device or ''} (device {job.read.part.device} of {Path(path).name})".strip()
        parts = (Part(dataclasses.replace(ra, device=label), parts[0].notices),)
    return UnitResult(found, (*trace.notices, *hlo_notices), parts)


def _remote(job: AnalysisJob) -> UnitResult:
    """A fsspec URL (s3://, gs://, memory://...): copied to a local temporary file and analyzed there;
    the results name the URL."""
    import fsspec

    url = job.read.path
    name = url.rstrip("/").rsplit("/", 1)[-1]
    with tempfile.TemporaryDirectory() as tmp:
        local = os.path.join(tmp, name)
        with fsspec.open(url, "rb") as src, open(local, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 22)
        got = analyze_job(dataclasses.replace(job, read=job.read._replace(path=local)))

    def named(ns: tuple[Notice, ...]) -> tuple[Notice, ...]:
        return tuple(dataclasses.replace(n, path=url) if n.path == local else n for n in ns)

    parts = tuple(Part(dataclasses.replace(p.analysis, path=url), named(p.notices)) for p in got.parts)
    return UnitResult(got.found, named(got.notices), parts)
