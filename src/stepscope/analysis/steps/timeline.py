"""One representative step's device timeline, for the HTML report: what ran on each stream, when.

The step is the steady step whose time is the median (the first of two medians; a warm-up step
when there is no other). Its rows are the device work overlapping its window, clipped to it, as
offsets from the window's start: stream, start, duration, group (``compute``, ``comm``,
``memory``), and the name as an index into ``names``; and the window's idle gaps (no device
work on any stream). At most ``MAX_ROWS`` rows are kept, the
longest first (``dropped`` counts the others: on a trace of many tiny kernels the picture keeps
where the time is).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import intervals as iv
from ..context import RankContext

MAX_ROWS = 20_000
GROUPS = ("compute", "comm", "memory")


@dataclass(frozen=True, kw_only=True)
class Timeline:
    step: str  # the step shown
    window_ns: int  # its length
    streams: tuple[int, ...]  # per row
    start_ns: tuple[int, ...]  # per row, from the window's start
    dur_ns: tuple[int, ...]  # per row
    group: tuple[str, ...]  # per row: compute, comm or memory
    name: tuple[int, ...]  # per row: index into names
    names: tuple[str, ...]
    dropped: int  # rows left out (the shortest)
    idle_start_ns: tuple[int, ...] = ()  # the window's gaps in all device work (all rows, kept or not)
    idle_dur_ns: tuple[int, ...] = ()


def compute(ctx: RankContext) -> Timeline | None:
    d = ctx.data.dev
    steady = [s for s in ctx.steps if not s.warmup] or list(ctx.steps)
    if d.size == 0 or not steady:
        return None
    by_time = sorted(steady, key=lambda s: s.step_time_ns)
    st = by_time[(len(by_time) - 1) // 2]
    w0, w1 = st.window_start_ns, st.window_end_ns
    rows = np.flatnonzero((d.ts < w1) & (d.end > w0))
    s = np.maximum(d.ts[rows], w0)
    e = np.minimum(d.end[rows], w1)
    us, ue = iv.union(s, e)
    gs, ge = np.r_[w0, ue], np.r_[us, w1]
    gap = ge > gs
    dropped = 0
    if rows.size > MAX_ROWS:
        keep = np.sort(np.argsort(-(e - s), kind="stable")[:MAX_ROWS])
        dropped = int(rows.size - MAX_ROWS)
        rows, s, e = rows[keep], s[keep], e[keep]
    uniq, inv = np.unique(d.name_idx[rows], return_inverse=True)
    groups = np.asarray(GROUPS, dtype=object)[np.clip(d.group[rows], 0, len(GROUPS) - 1)]
    return Timeline(
        step=st.name,
        window_ns=int(w1 - w0),
        streams=tuple(d.stream[rows].tolist()),
        start_ns=tuple((s - w0).tolist()),
        dur_ns=tuple((e - s).tolist()),
        group=tuple(groups.tolist()),
        name=tuple(inv.reshape(-1).tolist()),
        names=tuple(d.names[i] for i in uniq),
        dropped=dropped,
        idle_start_ns=tuple((gs[gap] - w0).tolist()),
        idle_dur_ns=tuple((ge[gap] - gs[gap]).tolist()),
    )
