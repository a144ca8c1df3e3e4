"""Ascend operators that run on the AI CPU: the NPU's few general-purpose cores, used when an
operator has no AI Core kernel for its data type or shape (int64 and float64 inputs, some casts,
reductions and indexing ops). They run far slower than on the AI Cores and hold the stream while
they do; msprof-analyze's advisor checks for them first among compute issues.

The task type comes from the timeline (``Task Type`` ``AI_CPU`` or the runtime's
``KERNEL_AICPU``, in the ``cat`` column, ``trace/ascend.py``). Per steady step: how many such tasks
start in the step's window and their summed time; ``top``: the five names with the most time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...trace.dictcol import per_value
from ..context import RankContext
from .warmup import steady

AI_CPU_TYPES = frozenset(("AI_CPU", "KERNEL_AICPU"))


@dataclass(frozen=True, kw_only=True)
class AiCpu:
    tasks: float  # per steady step
    time_ns: float  # per steady step: the tasks' summed durations
    top: tuple[tuple[str, float], ...]  # (name, ns per steady step), most time first, at most 5


def applies(ctx: RankContext) -> bool:
    return ctx.info.format == "ascend"


def compute(ctx: RankContext) -> AiCpu | None:
    steps = steady(ctx.steps)
    dev = ctx.data.dev
    if not steps or dev.rows is None or dev.size == 0:
        return None
    cat = ctx.events["cat"].take(dev.rows)
    on_cpu = per_value(cat, lambda c: c.upper() in AI_CPU_TYPES, null=False, dtype=bool)
    w0 = np.array([s.window_start_ns for s in steps], np.int64)
    w1 = np.array([s.window_end_ns for s in steps], np.int64)
    i = np.searchsorted(w0, dev.ts, side="right") - 1
    inside = (i >= 0) & (dev.ts < w1[np.maximum(i, 0)])
    sel = np.flatnonzero(on_cpu & inside)
    n = len(steps)
    dur = dev.end[sel] - dev.ts[sel]
    names = np.array(dev.names, dtype=object)[dev.name_idx[sel]]
    top: dict[str, float] = {}
    for name in np.unique(names).tolist():  # per distinct name, not per task
        top[str(name)] = float(dur[names == name].sum()) / n
    ranked = sorted(top.items(), key=lambda kv: -kv[1])[:5]
    return AiCpu(tasks=sel.size / n, time_ns=float(dur.sum()) / n, top=tuple(ranked))
