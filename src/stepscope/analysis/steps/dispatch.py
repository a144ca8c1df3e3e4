"""Operator dispatch on the host: how many framework operators each step calls, how many are tiny,
and how the optimizer step runs (one operator per tensor, or a few foreach/fused ones).

An *operator* here is a top-level CPU op (``cpu_op`` rows not nested in another ``cpu_op`` of the
same thread: ``aten::add_`` called from Python, not the ``aten::empty`` inside it); each one pays the
framework's fixed cost (Python binding, dispatcher, allocation, and a launch on a device) whatever
its size. A *tiny* operator is shorter than ``TINY_OP_NS``: its fixed cost is most of it.

Per step (CPU step span ``[cpu_start, cpu_end)``; operators by their start):
- ``ops``, ``tiny_ops``: operators, and tiny ones;
- ``optimizer_ops``: operators inside the optimizer's ranges (``Optimizer.step#...``), and
  ``optimizer_op_p50_ns`` the median duration of those (over the whole step set);
- ``dataloader_op_ns``: the operators' time inside the data loader's ranges (tensor work: the
  collate's ``aten::stack``, transforms written in torch); the rest of the loader's time is Python,
  file reading and decoding (``dataloader_ns`` of the step's CPU figures minus this);
- ``optimizer_ns``: the time the optimizer holds the step: on a rank with device work, the span of
  the device work launched from the optimizer's ranges (first start to last end, inside the step
  window: the idle gaps between its kernels count, as the step waits through them); on a CPU-only
  rank, the union of the optimizer's host ranges.

Assumptions: operators of all threads count (the optimizer runs on the training thread); a range of
the optimizer that crosses a step boundary counts in the step where its operators start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import intervals as iv
from ..context import RankContext
from ..roofline.phases import ThreadRanges, time_band

#: an operator shorter than this is tiny: a few us is the fixed cost of one eager PyTorch op
#: (Python binding + dispatcher), the same bar as the short-kernel threshold
TINY_OP_NS = 10_000


@dataclass(frozen=True, kw_only=True)
class StepDispatch:
    name: str
    ops: int
    tiny_ops: int
    optimizer_ops: int
    optimizer_ns: int
    dataloader_op_ns: int  # operators (tensor work: collate, transforms) inside the data loader's ranges


@dataclass(frozen=True, kw_only=True)
class Dispatch:
    """Per step (same order as the rank's steps), and the median optimizer operator."""

    steps: tuple[StepDispatch, ...]
    optimizer_op_p50_ns: int
    tiny_op_threshold_ns: int = TINY_OP_NS


def compute(ctx: RankContext) -> Dispatch:
    h, d = ctx.data.host, ctx.data.dev
    ops = h.operators
    o_ts, o_dur = h.ts[ops], h.end[ops] - h.ts[ops]
    opt = ctx.optimizer_mask
    lo, span = time_band(ctx.data)
    optim = ThreadRanges(h.tid[opt], h.ts[opt], h.end[opt], lo, span)
    in_opt = optim.contains(h.tid[ops], o_ts)
    # operators per step: the step whose CPU span holds the operator's start
    c0, c1 = ctx.spans.cpu_start, ctx.spans.cpu_end
    i = np.searchsorted(c0, o_ts, side="right") - 1
    ok = (i >= 0) & (o_ts < c1[np.maximum(i, 0)])
    step_of = np.where(ok, i, -1)
    n = len(ctx.steps)

    def per_step(mask: np.ndarray) -> np.ndarray:
        return np.bincount(step_of[mask & ok], minlength=n)[:n]

    n_ops, n_tiny, n_opt = per_step(ok), per_step(o_dur < TINY_OP_NS), per_step(in_opt)
    dl = ctx.dataloader_mask
    # (an operator that is itself a loader range is the loader, not work inside it)
    in_dl = ThreadRanges(h.tid[dl], h.ts[dl], h.end[dl], lo, span).contains(h.tid[ops], o_ts) & ok & ~dl[ops]
    dl_ns = np.bincount(step_of[in_dl], weights=o_dur[in_dl], minlength=n)[:n]
    opt_ns = _device_span(ctx, optim) if d.size else _host_union(ctx, opt)
    steps = tuple(
        StepDispatch(
            name=s.name,
            ops=int(n_ops[k]),
            tiny_ops=int(n_tiny[k]),
            optimizer_ops=int(n_opt[k]),
            optimizer_ns=opt_ns[k],
            dataloader_op_ns=int(dl_ns[k]),
        )
        for k, s in enumerate(ctx.steps)
    )
    d_opt = o_dur[in_opt & ok]
    return Dispatch(steps=steps, optimizer_op_p50_ns=int(np.median(d_opt)) if d_opt.size else 0)


def _device_span(ctx: RankContext, optim: ThreadRanges) -> list[int]:
    """Per step, first start to last end of the device work launched from the optimizer's ranges,
    clipped to the step window."""
    d = ctx.data.dev
    rows = np.flatnonzero(optim.contains(d.launch_tid, d.launch_ts) & (ctx.dev_step >= 0))
    rows = rows[np.argsort(ctx.dev_step[rows], kind="stable")]
    st = ctx.dev_step[rows]
    n = len(ctx.steps)
    first = np.full(n, np.iinfo(np.int64).max, np.int64)
    last = np.full(n, np.iinfo(np.int64).min, np.int64)
    if rows.size:
        at = np.flatnonzero(np.r_[True, st[1:] != st[:-1]])
        first[st[at]] = np.minimum.reduceat(d.ts[rows], at)
        last[st[at]] = np.maximum.reduceat(d.end[rows], at)
    w0 = np.array([s.window_start_ns for s in ctx.steps], np.int64)
    w1 = np.array([s.window_end_ns for s in ctx.steps], np.int64)
    return [int(x) for x in np.maximum(0, np.minimum(last, w1) - np.maximum(first, w0))]


def _host_union(ctx: RankContext, opt: np.ndarray) -> list[int]:
    h = ctx.data.host
    out = []
    for s in ctx.steps:
        a, b = iv.clip(h.ts[opt], h.end[opt], s.cpu_start_ns, s.cpu_start_ns + s.cpu_step_ns)
        out.append(iv.union_length(a, b))
    return out
