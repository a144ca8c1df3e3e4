"""msprof's own split of each step beside stepscope's: a cross-check on Ascend profiles.

``step_trace_time.csv`` (``trace/ascend_steps.py``) gives, per ``ProfilerStep#N``, msprof's
Computing, Communication(Not Overlapped), Free, Bubble and Preparing. Our step of the same number
(the name's ``#N``) is set beside it. The two agree on ``Computing`` (both the union of the compute
tasks) up to the window: msprof clips its lanes to the CPU step's range, stepscope's step runs from
the first start of the step's device work to the next step's (``windows.step_windows``), so work a
step launched but ran after the CPU step ended, and idle, move between them; ``Free`` is to be read
against our ``idle + exposed memcpy`` (msprof books copies as neither computing nor
communication). ``compute_diff_ratio``: (ours - msprof's) / msprof's, summed over the steps both
have. ``bubble_ns``: msprof's time in ``hcom_receive`` operators, a pipeline-parallel wait.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...trace.ascend_steps import COLUMNS
from ..context import RankContext

_NUMBER = re.compile(r"#(\d{1,9})$")


@dataclass(frozen=True, kw_only=True)
class MsprofStep:
    step: int
    # msprof's, ns; -1 when its file has no such column
    computing_ns: int
    comm_not_overlapped_ns: int
    free_ns: int
    bubble_ns: int
    preparing_ns: int
    stage_ns: int
    # ours for the step of the same number; None when we have no such step
    ours_step_ns: int | None
    ours_compute_ns: int | None
    ours_exposed_comm_ns: int | None
    ours_idle_ns: int | None  # idle + exposed memcpy


@dataclass(frozen=True, kw_only=True)
class MsprofSteps:
    steps: tuple[MsprofStep, ...]
    matched: int  # steps both have
    compute_diff_ratio: float | None  # (ours - msprof's) / msprof's over the matched steps


def applies(ctx: RankContext) -> bool:
    return ctx.info.ascend_steps is not None


def compute(ctx: RankContext) -> MsprofSteps | None:
    cols = ctx.info.ascend_steps
    if not cols or not cols.get("step") or any(k not in cols for k in COLUMNS):
        return None
    ours = {int(m.group(1)): s for s in ctx.steps if (m := _NUMBER.search(s.name))}
    out = []
    for i, n in enumerate(cols["step"]):
        s = ours.get(int(n))
        out.append(
            MsprofStep(
                step=int(n),
                computing_ns=int(cols["computing_ns"][i]),
                comm_not_overlapped_ns=int(cols["comm_not_overlapped_ns"][i]),
                free_ns=int(cols["free_ns"][i]),
                bubble_ns=int(cols["bubble_ns"][i]),
                preparing_ns=int(cols["preparing_ns"][i]),
                stage_ns=int(cols["stage_ns"][i]),
                ours_step_ns=s.step_time_ns if s else None,
                ours_compute_ns=s.compute_ns if s else None,
                ours_exposed_comm_ns=s.exposed_comm_ns if s else None,
                ours_idle_ns=s.idle_ns + s.exposed_memcpy_ns if s else None,
            )
        )
    both = [r for r in out if r.ours_compute_ns is not None and r.computing_ns > 0]
    theirs = sum(r.computing_ns for r in both)
    diff = sum((r.ours_compute_ns or 0) - r.computing_ns for r in both)
    return MsprofSteps(steps=tuple(out), matched=len(both), compute_diff_ratio=diff / theirs if theirs else None)
