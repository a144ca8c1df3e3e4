"""Stragglers: per rank, three robust z-scores ``(x - median) / (1.4826 MAD)`` (MAD floored at 2% of the
median and 20 us so identical ranks do not explode): compute per step, data-loader time per step, and
late arrival (median over instances of ``start_r - median start``). Score = the largest; cause = which
one (``compute``, ``host: data loader``, ``host``), named only when its evidence is positive (z > 0: the
rank is above the median on that figure), else ``unexplained``; or ``link`` when the rank's groups move
data at < 50% of the median bus bandwidth of same-type instances. What-if per rank: per step, each rank's busy time
``step - sync wait`` bounds the step; with this rank's replaced by the median, the step shrinks by
``max busy - max(max busy of the others, median busy)``, averaged over steps."""

from __future__ import annotations

import numpy as np

from .context import ClusterContext
from .results import Instance, Straggler

#: the cause of a rank none of whose figures is above the median
UNEXPLAINED = "unexplained"


def compute(c: ClusterContext) -> tuple[Straggler, ...]:
    """Every rank, worst first; ``is_straggler`` marks those at or over the threshold."""
    ranks, threshold = c.ranks, c.threshold
    late = c.matching.late_ns
    comp = np.array([np.median([s.compute_ns for s in r.steps]) if r.steps else 0.0 for r in ranks], dtype=np.float64)
    dl = np.array(
        [np.median([s.cpu.dataloader_ns for s in r.steps]) if r.steps else 0.0 for r in ranks], dtype=np.float64
    )
    arr = np.array([np.median(late[r.rank]) if late.get(r.rank) else 0.0 for r in ranks], dtype=np.float64)
    zc, zd, za = _robust_z(comp), _robust_z(dl), _robust_z(arr)
    slow_link = _slow_link_ranks(c.matching.instances)
    what_if = _what_if(c)
    out = []
    for j, r in enumerate(ranks):
        zs = {"compute": zc[j], "host: data loader": zd[j], "host": za[j]}
        cause = _cause(zs, threshold)
        score = float(max(zs.values()))
        if r.rank in slow_link and score < threshold:
            cause, score = "link", max(score, threshold)
        excess = {
            "compute": comp[j] - np.median(comp),
            "host: data loader": dl[j] - np.median(dl),
            "host": arr[j] - np.median(arr),
            "link": 0.0,
            UNEXPLAINED: 0.0,
        }[cause]
        out.append(
            Straggler(
                r.rank,
                score,
                cause,
                float(zc[j]),
                float(zd[j]),
                float(za[j]),
                int(excess),
                what_if.get(r.rank, 0),
                score >= threshold,
            )
        )
    out.sort(key=lambda s: -s.score)
    return tuple(out)


def _cause(zs: dict[str, float], threshold: float) -> str:
    """The figure with the largest positive z-score; late arrival ("host") gives way to compute or
    the data loader when either is itself over the threshold (they make the rank arrive late).
    No positive z-score: nothing stands out, ``UNEXPLAINED``."""
    positive = {k: z for k, z in zs.items() if z > 0}
    if not positive:
        return UNEXPLAINED
    cause = max(positive, key=lambda k: positive[k])
    zc, zd = zs["compute"], zs["host: data loader"]
    if cause == "host" and (zc >= threshold or zd >= threshold):
        cause = "compute" if zc >= zd else "host: data loader"
    return cause


def _robust_z(x: np.ndarray) -> np.ndarray:
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    scale = 1.4826 * max(mad, 0.02 * abs(med), 20_000.0)
    return (x - med) / scale


def _slow_link_ranks(insts: tuple[Instance, ...]) -> set[int]:
    """Ranks whose instances move data at < 50% of the median bus bandwidth of instances of the
    same type and size class (a slow link slows every instance that crosses it)."""
    out: set[int] = set()
    by_type: dict[tuple[str, int], list[Instance]] = {}
    for x in insts:
        if x.busbw_gbps is not None and x.bytes > 0:
            by_type.setdefault((x.type, int(np.log2(max(x.bytes, 1)))), []).append(x)
    for group in by_type.values():
        if len(group) < 4:
            continue
        med = float(np.median([x.busbw_gbps for x in group]))
        slow = [x for x in group if x.busbw_gbps is not None and x.busbw_gbps < 0.5 * med]
        if slow and len(slow) < len(group) / 2:
            # the ranks every slow instance shares: the ends of the slow link (a pair group: both)
            out |= set.intersection(*(set(x.ranks) for x in slow))
    return out


def _what_if(c: ClusterContext) -> dict[int, int]:
    ranks, wait = c.ranks, c.matching.wait_ns
    n_steps = min((len(r.steps) for r in ranks), default=0)
    if n_steps == 0:
        return {}
    busy = np.array(
        [[r.steps[k].step_time_ns - wait.get((r.rank, k), 0) for k in range(n_steps)] for r in ranks], dtype=np.float64
    )
    med = np.median(busy, axis=0)
    out = {}
    for j, r in enumerate(ranks):
        others = np.delete(busy, j, axis=0).max(axis=0) if len(ranks) > 1 else med
        saving = busy.max(axis=0) - np.maximum(others, med)
        out[r.rank] = int(np.maximum(saving, 0).mean())
    return out
