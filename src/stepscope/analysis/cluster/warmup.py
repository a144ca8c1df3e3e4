"""The ranks as the cluster view sees them: without their leading warm-up steps (``steps/warmup.py``).

A rank's collective instances in the warm-up steps, and those before the first steady step's window,
are dropped; later steps are renumbered from 0. The per-instance arrays sliced are the ``CommEvents``
fields marked ``per_instance`` (``comm_events.per_instance_fields``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..results import RankAnalysis
from .comm_events import CommEvents, per_instance_fields


def _steady_events(ev: CommEvents, k: int) -> CommEvents:
    """The instances from the first steady step's window on (step indices shifted down by ``k``)."""
    ws, we = ev.step_windows
    t0 = int(ws[k]) if k < ws.size else np.iinfo(np.int64).max
    keep = (ev.step >= k) | ((ev.step < 0) & (ev.start_ns >= t0))
    changes: dict[str, Any] = {f: v[keep] for f in per_instance_fields() if (v := getattr(ev, f)) is not None}
    changes["step"] = np.where(ev.step[keep] >= 0, ev.step[keep] - k, -1)
    changes["step_windows"] = (ws[k:], we[k:])
    if ev.tail is not None:
        changes["tail"] = ev.tail[k:]
    return dataclasses.replace(ev, **changes)


def steady_view(r: RankAnalysis) -> RankAnalysis:
    """The rank without its leading warm-up steps, their collective instances and those before them."""
    k = sum(1 for s in r.steps if s.warmup)  # warm-up steps are a prefix
    if k == 0:
        return r
    ev = r.comm_events
    return dataclasses.replace(r, steps=r.steps[k:], comm_events=_steady_events(ev, k) if ev is not None else None)
