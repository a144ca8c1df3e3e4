"""The rank-level statistics of ``stats.py`` as registry analyses: each a ``compute(ctx)`` of its own."""

from __future__ import annotations

from ..context import RankContext
from . import stats
from .results import CollectiveTime, LaunchStats, OpStat, StepBreakdown, StepStats, StreamIdle


def steps(ctx: RankContext) -> tuple[StepBreakdown, ...]:
    return ctx.steps


def step_stats(ctx: RankContext) -> StepStats:
    return stats.step_stats(ctx.steps, ctx.config.fluctuation_threshold_ratio)


def top_kernels(ctx: RankContext) -> tuple[OpStat, ...]:
    """Share of the summed step times."""
    total = sum(s.step_time_ns for s in ctx.steps)
    return stats.top_kernels(ctx.data, ctx.dev_step, total, ctx.config.top_k)


def top_cpu_ops(ctx: RankContext) -> tuple[OpStat, ...]:
    """Share of the summed CPU step spans."""
    total = sum(s.cpu_step_ns for s in ctx.steps)
    return stats.top_cpu_ops(ctx.data, ctx.spans.cpu_start, ctx.spans.cpu_end, total, ctx.config.top_k)


def stream_idle(ctx: RankContext) -> tuple[StreamIdle, ...]:
    return stats.stream_idle(ctx.data, ctx.dev_step)


def launch(ctx: RankContext) -> LaunchStats:
    return stats.launch_stats(ctx.data, ctx.dev_step, ctx.config.short_kernel_ns)


def collectives(ctx: RankContext) -> tuple[CollectiveTime, ...]:
    return stats.collective_totals(ctx.steps)
