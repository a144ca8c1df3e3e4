"""All-to-all imbalance: in expert parallelism each member of an all-to-all receives the tokens
routed to its experts; when routing is uneven the busiest member receives (and then computes) more,
and the others wait for it.

Per matched all-to-all instance whose every member recorded its ``In split size`` (and the group's
``Process Group Ranks``): member j receives ``sum_i own_i x split_i[j] / sum(split_i)`` bytes
(``own_i`` = member i's input bytes). The instance's imbalance is the largest of those over their
mean. An instance is imbalanced at ``IMBALANCE_RATIO`` or more. ``transfer_ns``: the imbalanced
instances' transfer time per steady step of the median rank; a balanced exchange would move at most
the mean where the busiest moved the max, so ``transfer x (1 - 1 / ratio)`` is what balance could
save on the exchange itself (the experts' compute on the busiest rank shrinks likewise).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from .context import ClusterContext
from .results import AllToAllImbalanceFinding, Instance

#: the busiest member receiving 1.5x the mean: a capacity factor of 1.5 would drop tokens there
IMBALANCE_RATIO = 1.5


def _received(c: ClusterContext, x: Instance) -> dict[int, float] | None:
    """Bytes each member (global rank) receives in instance ``x``, None without every split."""
    members = x.members
    if not members:
        return None
    recv = dict.fromkeys(members, 0.0)
    for r, tm in x.ranks.items():
        ev = c.events[r]
        if ev.in_split is None or not 0 <= tm.index < ev.size:
            return None
        split, own = ev.in_split[tm.index], int(ev.bytes[tm.index])
        if not split or len(split) != len(members) or sum(split) <= 0 or own <= 0:
            return None
        for peer, s in zip(members, split):
            recv[peer] += own * s / sum(split)
    return recv if len(x.ranks) == len(members) else None


def all_to_all_imbalance(c: ClusterContext) -> AllToAllImbalanceFinding | None:
    ratios: list[float] = []
    busiest: Counter[int] = Counter()
    per_rank: dict[int, float] = {}
    total = 0
    for x in c.matching.instances:
        if x.type != "all_to_all":
            continue
        recv = _received(c, x)
        if recv is None:
            continue
        total += 1
        mean = sum(recv.values()) / len(recv)
        ratio = max(recv.values()) / mean if mean > 0 else 1.0
        if ratio < IMBALANCE_RATIO:
            continue
        ratios.append(ratio)
        busiest[max(recv, key=lambda k: recv[k])] += 1
        if x.step >= 0:
            for r, t in x.ranks.items():
                per_rank[r] = per_rank.get(r, 0.0) + t.transfer_ns
    if not ratios:
        return None
    steps = {r.rank: sum(1 for s in r.steps if not s.warmup) for r in c.ranks}
    values = sorted(v / max(steps.get(r, 1), 1) for r, v in per_rank.items())
    return AllToAllImbalanceFinding(
        instances=len(ratios),
        total=total,
        median_ratio=float(np.median(ratios)),
        busiest_rank=busiest.most_common(1)[0][0],
        transfer_ns=values[(len(values) - 1) // 2] if values else 0.0,
        ratio_threshold=IMBALANCE_RATIO,
    )
