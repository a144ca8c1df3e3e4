"""Forward / backward / recompute / optimizer time per step.

Host side (PyTorch autograd as recorded by the profiler):
- the backward pass runs inside ``autograd::engine::evaluate_function: <Node>`` ranges;
- an op that records an autograd ``Sequence number`` and is not a backward node (no "Backward"
  in its name, not an evaluate_function) creates graph nodes, i.e. it is a *forward* op. Gradient
  math inside a backward node runs with grad mode off and records no sequence number. So a forward
  op executing inside a backward range is activation-checkpointing **recompute** (PyTorch's
  checkpoint re-runs the forward inside the backward node that needs the saved tensors).
Device work is attributed by the host range its launch call sits in (same thread): recompute >
backward > optimizer (``Optimizer.step``) > forward. Times are unions per phase inside the step
window; on CPU-only ranks the host ranges themselves are measured.

JAX/XLA (device rows naming an HLO op): the phase comes from the op's autodiff name stack
(:func:`xla_phase`), the same for this table and the XLA view's "By autodiff phase":
``transpose(jvp(...))`` = backward, a backward op under ``remat`` / ``rematted_computation`` /
``checkpoint`` recomputation = recompute, ``jvp(...)`` = forward, an op outside autodiff whose name
stack names an optimizer (optax, ``apply_gradients``, adam...) = optimizer, anything else (outside
autodiff, no name stack) = forward, the default PyTorch rows get too. ``recompute_ops`` counts the
recompute-phase XLA ops of the step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace.schema import KIND_CODE as KIND
from .. import intervals as iv
from ..context import RankContext
from ..rankdata import DeviceArrays, RankData

PHASES = ("forward", "backward", "recompute", "optimizer")
FORWARD, BACKWARD, RECOMPUTE, OPTIMIZER = range(len(PHASES))

_RECOMPUTE = re.compile(r"rematted_computation|/remat\d*/|/remat\(|checkpoint/rematted")
_OPTIMIZER = re.compile(
    r"(^|/|\()(optax|optimizer|apply_gradients|apply_updates|adamw?|sgd|lamb|lion|adafactor)\b", re.IGNORECASE
)


def xla_phase(stack: str | None) -> int:
    """Index into ``PHASES`` of an XLA op, from its name stack (``tf_op`` / HLO ``op_name``)."""
    if not stack:
        return FORWARD
    if "transpose(" in stack:
        return RECOMPUTE if _RECOMPUTE.search(stack) else BACKWARD
    if "jvp(" in stack:
        return FORWARD
    return OPTIMIZER if _OPTIMIZER.search(stack) else FORWARD


@dataclass(frozen=True)
class StepPhases:
    name: str
    phase_ns: dict[str, int]  # forward/backward/recompute/optimizer: union of work in the window
    recompute_ns: int
    recompute_ops: int  # recomputed forward ops (outermost) launched in the step's CPU span


def time_band(rd: RankData) -> tuple[int, int]:
    """(origin, span) covering every host and device time of the rank: a thread's keys
    (``ThreadRanges``) are its index x span + (time - origin), so one thread's never reach the next's."""
    h, d = rd.host, rd.dev
    parts = [a for a in (h.ts, h.end, d.ts, d.end) if a.size]
    lo = min((int(a.min()) for a in parts), default=0)
    return lo, max((int(a.max()) for a in parts), default=0) - lo + 2


class ThreadRanges:
    """Unions of host ranges per thread, queried by (tid, t) -> inside? (vectorized)."""

    def __init__(self, tid: np.ndarray, s: np.ndarray, e: np.ndarray, lo: int, span: int) -> None:
        self.tids = np.unique(tid)
        self.lo, self.span = lo, span
        key_s, key_e = self._key(tid, s), self._key(tid, e)
        self.s, self.e = iv.union(key_s, key_e)

    def _key(self, tid: np.ndarray, t: np.ndarray) -> np.ndarray:
        g = np.searchsorted(self.tids, tid)
        return g.astype(np.int64) * self.span + (t - self.lo)

    def contains(self, tid: np.ndarray, t: np.ndarray) -> np.ndarray:
        if self.s.size == 0 or t.size == 0:
            return np.zeros(t.shape, bool)
        g = np.searchsorted(self.tids, tid)
        known = (g < self.tids.size) & (self.tids[np.minimum(g, self.tids.size - 1)] == tid)
        k = self._key(tid, t)
        i = np.searchsorted(self.s, k, side="right") - 1
        return known & (i >= 0) & (k < self.e[np.maximum(i, 0)])


def compute(ctx: RankContext) -> tuple[StepPhases, ...]:
    rd, steps, dev_step, opt_mask = ctx.data, ctx.steps, ctx.dev_step, ctx.optimizer_mask
    h, d = rd.host, rd.dev
    names = h.names
    is_eval = np.array([n.startswith("autograd::engine::evaluate_function") for n in names], dtype=bool)[h.name_idx]
    is_bwd_node = np.array(["Backward" in n or n.startswith("autograd::") for n in names], dtype=bool)[h.name_idx]
    cpu = h.kind == KIND["cpu_op"]
    lo, span = time_band(rd)
    ev = cpu & is_eval
    bwd = ThreadRanges(h.tid[ev], h.ts[ev], h.end[ev], lo, span)
    fwd_op = cpu & (h.sequence_number >= 0) & ~is_bwd_node
    fwd_idx = np.flatnonzero(fwd_op)
    in_bwd = np.zeros(h.ts.size, bool)  # only forward ops are asked: a few of all host rows
    in_bwd[fwd_idx] = bwd.contains(h.tid[fwd_idx], h.ts[fwd_idx])
    rec = fwd_op & in_bwd
    recompute = ThreadRanges(h.tid[rec], h.ts[rec], h.end[rec], lo, span)
    optim = ThreadRanges(h.tid[opt_mask], h.ts[opt_mask], h.end[opt_mask], lo, span)
    # outermost recomputed ops (not nested in another recomputed op of the same thread)
    rec_idx = np.flatnonzero(rec)
    rec_top = rec_idx[iv.top_level(h.tid[rec_idx], h.ts[rec_idx], h.end[rec_idx])] if rec_idx.size else rec_idx
    out = []
    if d.size:
        phase, xla_rows = _device_phases(d, bwd, recompute, optim)
        # rows of each step, once: one stable sort, then a slice per step (rows keep their order)
        by_step = np.argsort(dev_step, kind="stable")
        bounds = np.searchsorted(dev_step[by_step], np.arange(len(steps) + 1))
        for i, s in enumerate(steps):
            rows = by_step[bounds[i] : bounds[i + 1]]
            ph = phase[rows]
            ps = {}
            for j, name in enumerate(PHASES):
                sel = rows[ph == j]
                a, b = iv.clip(d.ts[sel], d.end[sel], s.window_start_ns, s.window_end_ns)
                ps[name] = iv.union_length(a, b)
            n_rec = _count_in(h.ts[rec_top], s.cpu_start_ns, s.cpu_start_ns + s.cpu_step_ns)
            n_rec += int((xla_rows[rows] & (ph == RECOMPUTE)).sum())
            out.append(StepPhases(s.name, ps, ps["recompute"], n_rec))
    else:
        for s in steps:
            c0, c1 = s.cpu_start_ns, s.cpu_start_ns + s.cpu_step_ns
            a, b = iv.clip(h.ts[rec_top], h.end[rec_top], c0, c1)
            rec_ns = iv.union_length(a, b)
            ev_s, ev_e = iv.clip(h.ts[ev], h.end[ev], c0, c1)
            bwd_ns = iv.union_length(ev_s, ev_e) - rec_ns
            op_s, op_e = iv.clip(h.ts[opt_mask], h.end[opt_mask], c0, c1)
            fw = fwd_op & ~in_bwd
            fw_s, fw_e = iv.clip(h.ts[fw], h.end[fw], c0, c1)
            ps = {
                "forward": iv.union_length(fw_s, fw_e),
                "backward": max(bwd_ns, 0),
                "recompute": rec_ns,
                "optimizer": iv.union_length(op_s, op_e),
            }
            out.append(StepPhases(s.name, ps, rec_ns, _count_in(h.ts[rec_top], c0, c1)))
    return tuple(out)


def _device_phases(
    d: DeviceArrays, bwd: ThreadRanges, recompute: ThreadRanges, optim: ThreadRanges
) -> tuple[np.ndarray, np.ndarray]:
    """Per device row, its phase index (``PHASES``) and whether it is an XLA op: by the host range
    its launch sits in (recompute > backward > optimizer > forward), by the name stack for XLA ops."""
    lt, lts = d.launch_tid, d.launch_ts
    phase = np.full(d.size, FORWARD, np.int8)
    phase[optim.contains(lt, lts)] = OPTIMIZER
    phase[bwd.contains(lt, lts)] = BACKWARD
    phase[recompute.contains(lt, lts)] = RECOMPUTE
    if d.xla is None:
        return phase, np.zeros(d.size, bool)
    xla_rows = d.xla.op.valid
    if xla_rows.any():
        phase[xla_rows] = d.xla.scope.map(xla_phase, np.flatnonzero(xla_rows), dtype=np.int8)
    return phase, xla_rows


def _count_in(t: np.ndarray, lo: int, hi: int) -> int:
    return int(((t >= lo) & (t < hi)).sum())
