"""Stalled launch calls: the host thread losing its CPU in the middle of a trivial call.

A kernel launch call (``cudaLaunchKernel``, ``hipLaunchKernel``...) does the same small amount of
work every time, so its durations cluster tightly around their median. A call lasting many times
the median either waited for room in a full launch queue (the device is busy: harmless) or was
descheduled (the host thread lost its core to another thread or process: CPU contention, an
oversubscribed OpenMP pool, data-loader workers on the same cores). The two are told apart by the
device: a stall during which the device is idle cost the step that time.

Per steady step (calls whose start is in the CPU step): ``stalled_calls``, launch calls lasting at
least ``STALL_RATIO`` x the median launch call and at least ``STALL_MIN_NS``; ``stalled_ns``, their
time above the median; ``stalled_idle_ns``, the part of those calls' ranges during which the
device was idle (``ctx.idle_gaps``, any cause). Means over the steady steps; the median is over
the steady steps' launch calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...trace.schema import KIND_CODE as KIND
from .. import intervals as iv
from ..context import RankContext
from .stats import KERNEL_LAUNCH_NAMES
from .warmup import steady

#: a stall: this many times the median launch call, and at least this long (a time slice of the
#: Linux scheduler is a few ms; a launch call is a few us)
STALL_RATIO = 10.0
STALL_MIN_NS = 50_000


@dataclass(frozen=True, kw_only=True)
class Contention:
    launch_call_p50_ns: int
    stalled_calls: float  # per steady step
    stalled_ns: float  # per steady step: time above the median
    stalled_idle_ns: float  # per steady step: of the stalled calls' ranges, while the device was idle


def compute(ctx: RankContext) -> Contention:
    h = ctx.data.host
    steps = steady(ctx.steps)
    none = Contention(launch_call_p50_ns=0, stalled_calls=0.0, stalled_ns=0.0, stalled_idle_ns=0.0)
    if not steps or ctx.data.dev.size == 0:
        return none
    is_launch = np.array([any(x in n for x in KERNEL_LAUNCH_NAMES) for n in h.names], dtype=bool)
    rows = np.flatnonzero(is_launch[h.name_idx] & (h.kind == KIND["runtime"]))
    c0 = np.array([s.cpu_start_ns for s in steps], np.int64)
    c1 = c0 + np.array([s.cpu_step_ns for s in steps], np.int64)
    ts = h.ts[rows]
    i = np.searchsorted(c0, ts, side="right") - 1
    inside = (i >= 0) & (ts < c1[np.maximum(i, 0)])
    rows = rows[inside]
    if rows.size == 0:
        return none
    dur = h.end[rows] - h.ts[rows]
    p50 = int(np.median(dur))
    stalled = (dur >= STALL_RATIO * max(p50, 1)) & (dur >= STALL_MIN_NS)
    if not stalled.any():
        return Contention(launch_call_p50_ns=p50, stalled_calls=0.0, stalled_ns=0.0, stalled_idle_ns=0.0)
    idle = ctx.idle_gaps.any_cause()
    s, e = iv.union(h.ts[rows][stalled], h.end[rows][stalled])
    n = len(steps)
    return Contention(
        launch_call_p50_ns=p50,
        stalled_calls=float(stalled.sum()) / n,
        stalled_ns=float((dur[stalled] - p50).sum()) / n,
        stalled_idle_ns=float(idle.between(s, e).sum()) / n,
    )
