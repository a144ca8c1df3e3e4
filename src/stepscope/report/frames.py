"""An analysis as data frames, for notebooks: one call per table.

    import stepscope
    a = stepscope.analyze("traces/")
    stepscope.frame(a, "steps")                    # pandas (needs the ``pandas`` extra)
    stepscope.frame(a, "kernels", lib="polars")    # polars (the ``polars`` extra)
    stepscope.frame(a, "findings", lib="arrow")    # a pyarrow Table (no extra)

Tables (one row per ...; times in ns, ratios 0-1, as the JSON report):
- ``steps``: rank and step, with the step's breakdown (``compute + exposed_comm + exposed_memcpy
  + idle = step_time``), the idle causes, the CPU figures and whether it is a warm-up step;
- ``categories``: rank, step and kernel category: the union of its work in the step window and its
  summed kernel time;
- ``kernels``: rank and top kernel: the full name, a readable one (``names.readable``), category,
  count, total / mean / p50 / p99 time and share of the steady steps;
- ``ranks``: rank: steady and warm-up steps, the means per steady step, median MFU;
- ``findings``: the advisor's findings, largest saving first: id, category, title, ranks,
  saving (low / mid / high) and method, confidence, group.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pyarrow as pa

from ..analysis.results import Analysis
from ..errors import ConfigError
from .names import readable

Lib = Literal["pandas", "polars", "arrow"]


def _steps(a: Analysis) -> list[dict[str, Any]]:
    return [
        {
            "rank": r.rank,
            "step": s.name,
            "warmup": s.warmup,
            "step_time_ns": s.step_time_ns,
            "compute_ns": s.compute_ns,
            "comm_ns": s.comm_ns,
            "overlapped_comm_ns": s.overlapped_comm_ns,
            "exposed_comm_ns": s.exposed_comm_ns,
            "exposed_memcpy_ns": s.exposed_memcpy_ns,
            "idle_ns": s.idle_ns,
            "input_wait_ns": s.idle_causes.input_wait_ns,
            "host_bound_ns": s.idle_causes.host_bound_ns,
            "sync_wait_ns": s.idle_causes.wait_ns,
            "other_idle_ns": s.idle_causes.other_ns,
            "cpu_step_ns": s.cpu_step_ns,
            "dataloader_ns": s.cpu.dataloader_ns,
            "spill_over_ns": s.spill_over_ns,
            "window_start_ns": s.window_start_ns,
        }
        for r in a.ranks
        for s in r.steps
    ]


def _categories(a: Analysis) -> list[dict[str, Any]]:
    return [
        {
            "rank": r.rank,
            "step": s.name,
            "category": cat,
            "time_ns": t,
            "kernel_time_ns": s.kernel_time_by_category_ns.get(cat, 0),
        }
        for r in a.ranks
        for s in r.steps
        for cat, t in s.by_category_ns.items()
    ]


def _kernels(a: Analysis) -> list[dict[str, Any]]:
    return [
        {
            "rank": r.rank,
            "name": k.name,
            "short_name": readable(k.name),
            "category": k.category,
            "count": k.count,
            "total_ns": k.total_ns,
            "mean_ns": k.mean_ns,
            "p50_ns": k.p50_ns,
            "p99_ns": k.p99_ns,
            "share_of_step_ratio": k.share_of_step_ratio,
        }
        for r in a.ranks
        for k in r.top_kernels
    ]


def _ranks(a: Analysis) -> list[dict[str, Any]]:
    devices = {r.rank: r.device for r in a.ranks}
    return [
        {
            "rank": s.rank,
            "device": devices.get(s.rank),
            "steps": s.steps,
            "warmup_steps": s.warmup_steps,
            "mean_step_time_ns": s.mean_step_time_ns,
            "mean_compute_ns": s.mean_compute_ns,
            "mean_exposed_comm_ns": s.mean_exposed_comm_ns,
            "mean_exposed_memcpy_ns": s.mean_exposed_memcpy_ns,
            "mean_idle_ns": s.mean_idle_ns,
            "mean_dataloader_ns": s.mean_dataloader_ns,
            "median_mfu_ratio": s.median_mfu_ratio,
        }
        for s in a.summary.ranks
    ]


def _findings(a: Analysis) -> list[dict[str, Any]]:
    return [
        {
            "id": f.id,
            "category": f.category,
            "title": f.title,
            "ranks": list(f.ranks),
            "saving_low_ns": f.saving.low_ns,
            "saving_mid_ns": f.saving.mid_ns,
            "saving_high_ns": f.saving.high_ns,
            "saving_method": f.saving_method,
            "confidence": f.confidence,
            "group": f.group,
        }
        for f in a.findings
    ]


TABLES: dict[str, Callable[[Analysis], list[dict[str, Any]]]] = {
    "steps": _steps,
    "categories": _categories,
    "kernels": _kernels,
    "ranks": _ranks,
    "findings": _findings,
}


def arrow_table(a: Analysis, name: str) -> pa.Table:
    """The table ``name`` (module docstring) as a pyarrow Table."""
    if name not in TABLES:
        raise ConfigError(f"no table named {name!r}", fix=f"one of: {', '.join(TABLES)}")
    rows = TABLES[name](a)
    return pa.Table.from_pylist(rows) if rows else pa.table({})


def frame(a: Analysis, name: str, lib: Lib = "pandas") -> Any:
    """The table ``name`` as a pandas or polars DataFrame, or a pyarrow Table (``lib="arrow"``)."""
    t = arrow_table(a, name)
    if lib == "arrow":
        return t
    if lib == "pandas":
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise ConfigError(
                "data frames need pandas, which is not installed", fix='pip install "stepscope[pandas]"'
            ) from None
        return t.to_pandas()
    if lib == "polars":
        try:
            import polars as pl
        except ImportError:
            raise ConfigError(
                "data frames need polars, which is not installed", fix='pip install "stepscope[polars]"'
            ) from None
        return pl.from_arrow(t)
    raise ConfigError(f"no data frame library {lib!r}", fix="lib='pandas', 'polars' or 'arrow'")
