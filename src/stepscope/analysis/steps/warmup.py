"""Leading warm-up steps (compilation, allocator and communicator set-up), kept out of statistics.

Detection: step k (k = 0, 1, ...) is warm-up while it is longer than ``WARMUP_FACTOR`` (3) times
the median of the steps after it, and at least one step remains; the first step that is not
ends the warm-up. ``--skip-steps N`` (``AnalyzeConfig.skip_steps``) replaces the detection: the
first N steps are warm-up (at most all steps but the last).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .results import StepBreakdown

WARMUP_FACTOR = 3.0


def warmup_count(step_ns: np.ndarray, skip_steps: int | None) -> int:
    """How many leading steps are warm-up (module docstring)."""
    n = int(step_ns.size)
    if skip_steps is not None:
        return min(skip_steps, max(n - 1, 0))
    k = 0
    while k < n - 1 and step_ns[k] > WARMUP_FACTOR * float(np.median(step_ns[k + 1 :])):
        k += 1
    return k


def flag_warmup(steps: tuple[StepBreakdown, ...], skip_steps: int | None) -> tuple[StepBreakdown, ...]:
    """The steps, the leading warm-up ones with ``warmup=True``."""
    k = warmup_count(np.array([s.step_time_ns for s in steps], np.int64), skip_steps)
    return tuple(dataclasses.replace(s, warmup=True) if i < k else s for i, s in enumerate(steps))


def steady(steps: tuple[StepBreakdown, ...]) -> tuple[StepBreakdown, ...]:
    """The steps the statistics use: all but the warm-up ones."""
    return tuple(s for s in steps if not s.warmup)
