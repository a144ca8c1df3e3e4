"""The analyze entry points the command line calls today, over :func:`api.analyze` (which is the one
path: use it)."""

from __future__ import annotations

from collections.abc import Callable

from ..trace.assemble import Trace
from .api import analyze as _analyze
from .config import AnalyzeConfig
from .results import Analysis

__all__ = ["AnalyzeConfig", "analyze", "analyze_files"]


def analyze(trace: Trace, config: AnalyzeConfig | None = None) -> Analysis:
    return _analyze(trace, config)


def analyze_files(
    paths: list[str],
    config: AnalyzeConfig | None = None,
    *,
    include_python: bool = False,
    workers: int | None = None,
    cache_dir: str | None = None,
    progress: Callable[[str], None] | None = None,
    dask: str | None = None,
) -> Analysis:
    """``progress("")`` as each job finishes."""
    tick = progress
    return _analyze(
        paths,
        config,
        include_python=include_python,
        workers=workers,
        cache_dir=cache_dir,
        dask=dask,
        progress=(lambda done, _total: tick("") if done else None) if tick else None,
    )
