"""The analyses, in the order they run. Adding a per-rank analysis = a module with ``compute(ctx) ->
frozen dataclass`` (``context.RankContext``) + one line in ``RANK_ANALYSES``; its result reaches
``RankAnalysis.extras[name]`` and the JSON report's ``extras`` (docs/architecture.md). Cluster analyses
(``CLUSTER_ANALYSES``) work the same over a ``cluster.context.ClusterContext`` (the ranks' results,
matched collectives, aligned clocks); their results fill ``ClusterView``.

A name that is a field of ``RankAnalysis`` fills that field; any other name goes to ``extras``. An
analysis may read the results of those listed before it (``ctx.result(name, type)``); ``applies``
says whether it runs on a rank at all (no key in ``extras`` when not).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from ..trace.heap import release_freed_heap
from .cluster import comm_events, findings, hccl_wait, stragglers, tables
from .cluster import hccl_links as cluster_hccl_links
from .cluster.context import ClusterContext
from .context import RankContext
from .extra import ExtraResult, is_extra
from .memory import usage as memory_usage
from .roofline import mfu_diagnosis, phases, roofline, scopes
from .steps import (
    ai_cpu,
    contention,
    dispatch,
    fusion,
    hccl,
    hccl_links,
    msprof_steps,
    profiler_overhead,
    rank_stats,
    timeline,
)
from .xla import summary as xla


def always(_ctx: RankContext) -> bool:
    return True


@dataclass(frozen=True)
class RankEntry:
    name: str
    compute: Callable[[RankContext], object]
    applies: Callable[[RankContext], bool] = always


RANK_ANALYSES: tuple[RankEntry, ...] = (
    RankEntry("steps", rank_stats.steps),
    RankEntry("step_stats", rank_stats.step_stats),
    RankEntry("top_kernels", rank_stats.top_kernels),
    RankEntry("top_cpu_ops", rank_stats.top_cpu_ops),
    RankEntry("stream_idle", rank_stats.stream_idle),
    RankEntry("launch", rank_stats.launch),
    RankEntry("collectives", rank_stats.collectives),
    RankEntry("roofline", roofline.compute),
    RankEntry("phases", phases.compute),
    RankEntry("mfu_diagnosis", mfu_diagnosis.compute),  # reads roofline and phases
    RankEntry("scopes", scopes.compute),
    RankEntry("comm_events", comm_events.compute),
    RankEntry("profiler_overhead", profiler_overhead.compute),
    RankEntry("contention", contention.compute),
    RankEntry("hccl", hccl.compute, applies=hccl.applies),
    RankEntry("ai_cpu", ai_cpu.compute, applies=ai_cpu.applies),
    RankEntry("msprof_steps", msprof_steps.compute, applies=msprof_steps.applies),
    RankEntry("hccl_links", hccl_links.compute, applies=hccl_links.applies),
    RankEntry("dispatch", dispatch.compute),
    RankEntry("fusion", fusion.compute),
    RankEntry("memory", memory_usage.compute),
    RankEntry("timeline", timeline.compute),
    RankEntry("xla", xla.compute, applies=xla.applies),
)


@dataclass(frozen=True)
class ClusterEntry:
    name: str
    compute: Callable[[ClusterContext], object]


CLUSTER_ANALYSES: tuple[ClusterEntry, ...] = (
    ClusterEntry("stragglers", stragglers.compute),
    ClusterEntry("matrix", tables.matrix),
    ClusterEntry("size_histogram", tables.size_histogram),
    ClusterEntry("findings", findings.compute),  # reads stragglers
    ClusterEntry("critical_paths", tables.critical_paths),
    ClusterEntry("comm_matrix", tables.comm_matrix),
    ClusterEntry("hccl_wait", hccl_wait.compute),
    ClusterEntry("hccl_links", cluster_hccl_links.compute),
)


Ctx = TypeVar("Ctx", RankContext, ClusterContext)


def run_registered(
    steps: Iterable[tuple[str, Callable[[Ctx], object]]], ctx: Ctx, built_in: frozenset[str]
) -> tuple[dict[str, Any], dict[str, ExtraResult | None]]:
    """Runs ``(name, compute)`` in order, each on ``ctx`` with ``earlier`` = the results before it.

    Returns (results named in ``built_in``, the others = extras). Raises ``LookupError`` when a
    built-in name has no result, ``TypeError`` when an extra is not a dataclass instance or None.
    """
    done: dict[str, Any] = {}  # each registered analysis's own result type
    for name, compute in steps:
        done[name] = compute(dataclasses.replace(ctx, earlier=MappingProxyType(dict(done))))
        release_freed_heap()  # the analysis's transient arrays (``trace/heap.py``)
    missing = built_in - done.keys()
    if missing:
        raise LookupError(f"no analysis registered for result field(s) {sorted(missing)}")
    extras: dict[str, ExtraResult | None] = {}
    for name, value in done.items():
        if name in built_in:
            continue
        if not is_extra(value):
            raise TypeError(f"analysis {name!r} returned {type(value).__name__}, not a dataclass instance or None")
        extras[name] = value
    return {k: v for k, v in done.items() if k in built_in}, extras
