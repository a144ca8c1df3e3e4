"""The rank-level statistics of ``stats.py`` as registry analyses: each a ``compute(ctx)`` of its own.

Statistics are over the steady steps: warm-up steps (``warmup.py``) and the device work they
launched are left out of the step statistics, top kernels and CPU ops, launch statistics,
per-stream idle and collective totals.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..context import RankContext
from . import stats
from .results import CollectiveTime, LaunchStats, OpStat, StepBreakdown, StepStats, StreamIdle
from .warmup import steady


def _steady_dev_step(ctx: RankContext) -> np.ndarray:
    """``ctx.dev_step`` with the rows of warm-up steps set to -1."""
    warm = np.array([s.warmup for s in ctx.steps] + [False], bool)  # index -1 -> the False at the end
    return np.where(warm[ctx.dev_step], -1, ctx.dev_step)


def steps(ctx: RankContext) -> tuple[StepBreakdown, ...]:
    return ctx.steps


def step_stats(ctx: RankContext) -> StepStats:
    st = stats.step_stats(steady(ctx.steps), ctx.config.fluctuation_threshold_ratio)
    busy, outside = ctx.device_busy_ns, ctx.outside_steps_ns
    return dataclasses.replace(
        st,
        warmup_steps=len(ctx.steps) - st.count,
        device_busy_ns=busy,
        outside_steps_ns=outside,
        outside_steps_ratio=outside / busy if busy else 0.0,
        dataloader_in_process=any("_SingleProcessDataLoaderIter" in n for n in ctx.data.host.names),
    )


def top_kernels(ctx: RankContext) -> tuple[OpStat, ...]:
    """Share of the summed steady step times."""
    total = sum(s.step_time_ns for s in steady(ctx.steps))
    return stats.top_kernels(ctx.data, _steady_dev_step(ctx), total, ctx.config.top_k)


def top_cpu_ops(ctx: RankContext) -> tuple[OpStat, ...]:
    """Share of the summed steady CPU step spans."""
    total = sum(s.cpu_step_ns for s in steady(ctx.steps))
    keep = np.array([not s.warmup for s in ctx.steps], bool)
    return stats.top_cpu_ops(ctx.data, ctx.spans.cpu_start[keep], ctx.spans.cpu_end[keep], total, ctx.config.top_k)


def stream_idle(ctx: RankContext) -> tuple[StreamIdle, ...]:
    return stats.stream_idle(ctx.data, _steady_dev_step(ctx))


def launch(ctx: RankContext) -> LaunchStats:
    return stats.launch_stats(ctx.data, _steady_dev_step(ctx), ctx.config.short_kernel_ns)


def collectives(ctx: RankContext) -> tuple[CollectiveTime, ...]:
    return stats.collective_totals(steady(ctx.steps))
