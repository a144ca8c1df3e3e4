"""The profiler's own work inside the steps, so that its cost is not read as the job's.

Kineto records CUPTI's overhead as ``overhead`` events on the host (``Activity Buffer Request``,
``Activity Buffer Flush``, ``Instrumentation``, ``Resource``...): while the profiler allocates or
flushes its buffers the host launches nothing, and the device may idle. ``Lazy Function Loading``
(CUDA loading a kernel's module on first use) is in the same category but is the job's own cost: it
is counted apart (``lazy_loading_ns``).

Per steady step (the CPU step span): ``overhead_ns`` = the union of the profiler's overhead events;
``overhead_idle_ns`` = its part while the device was idle (``ctx.idle_gaps``, any cause);
``overhead_host_bound_ns`` = its part inside host-bound gaps (the gaps ``cpu.host_bound`` counts).
Means over the steady steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...trace.dictcol import dict_mask
from .. import intervals as iv
from ..context import RankContext
from .warmup import steady

OVERHEAD_CATEGORY = "overhead"
LAZY_LOADING = "Lazy Function Loading"


@dataclass(frozen=True, kw_only=True)
class ProfilerOverhead:
    events: int  # the profiler's overhead events in the trace (lazy loading not counted)
    overhead_ns: float  # per steady step
    overhead_idle_ns: float
    overhead_host_bound_ns: float
    lazy_loading_ns: float


def compute(ctx: RankContext) -> ProfilerOverhead:
    t = ctx.events
    rows = np.flatnonzero(dict_mask(t["cat"], lambda c: c.lower() == OVERHEAD_CATEGORY))
    if rows.size == 0:
        return ProfilerOverhead(
            events=0, overhead_ns=0.0, overhead_idle_ns=0.0, overhead_host_bound_ns=0.0, lazy_loading_ns=0.0
        )
    sub = t.take(rows)
    ts = sub["ts_ns"].to_numpy()
    end = ts + np.maximum(sub["dur_ns"].to_numpy(), 0)
    lazy = dict_mask(sub["name"], lambda n: n == LAZY_LOADING)
    g = ctx.idle_gaps
    idle = g.any_cause()
    host_bound = iv.Covered.of(*g.host_bound)
    steps = steady(ctx.steps)
    total = in_idle = in_host = lazy_ns = 0
    for s in steps:
        c0, c1 = s.cpu_start_ns, s.cpu_start_ns + s.cpu_step_ns
        a, b = iv.union(*iv.clip(ts[~lazy], end[~lazy], c0, c1))
        total += int((b - a).sum())
        in_idle += int(idle.between(a, b).sum())
        in_host += int(host_bound.between(a, b).sum())
        lazy_ns += iv.union_length(*iv.clip(ts[lazy], end[lazy], c0, c1))
    n = max(len(steps), 1)
    return ProfilerOverhead(
        events=int((~lazy).sum()),
        overhead_ns=total / n,
        overhead_idle_ns=in_idle / n,
        overhead_host_bound_ns=in_host / n,
        lazy_loading_ns=lazy_ns / n,
    )
