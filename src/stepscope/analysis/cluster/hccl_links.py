"""HCCL's links across the ranks, by global rank, and the slow ones (Ascend, ``communication_matrix.json``).

Each rank's links (``analysis/steps/hccl_links.py``) name ranks local to a group; a rank's link to
itself gives its local rank there, so the ranks profiled together map each group's local ranks to
global ones (as msprof-analyze's ``comm_matrix_analysis`` does). A link reported by both of its
ends is summed (MB and time), its bandwidth is MB / ms (HCCL's GB/s). A link is slow when it moved
at least ``MIN_MB`` and its bandwidth is under ``SLOW_RATIO`` of the median of the links of the same
transport (at least ``MIN_PEERS`` of them): a degraded link or port, not a slow rank. Links whose
ends cannot be mapped (a rank of the group not profiled) are counted, not listed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..steps.hccl_links import HcclLinks
from .context import ClusterContext

SLOW_RATIO = 0.5
MIN_MB = 1.0
MIN_PEERS = 3
TOP = 50


@dataclass(frozen=True, kw_only=True)
class ClusterLink:
    src: int  # global rank
    dst: int
    transport: str
    mb: float
    transit_ns: int
    gbps: float | None  # HCCL's GB/s (MB per ms)
    median_gbps: float | None  # of the links of the same transport
    slow: bool


@dataclass(frozen=True, kw_only=True)
class HcclLinkView:
    links: tuple[ClusterLink, ...]  # slowest first, at most TOP
    slow: tuple[ClusterLink, ...]
    unmapped: int  # links with an end not mapped to a global rank


def compute(c: ClusterContext) -> HcclLinkView | None:
    per_rank = [(r.rank, x) for r in c.ranks if isinstance(x := r.extras.get("hccl_links"), HcclLinks)]
    if not per_rank:
        return None
    to_global: dict[str, dict[int, int]] = {}
    for rank, x in per_rank:
        for group, local in x.local_rank.items():
            to_global.setdefault(group, {})[local] = rank
    sums: dict[tuple[int, int, str], list[float]] = {}
    unmapped = 0
    for _, x in per_rank:
        for link in x.links:
            m = to_global.get(link.group, {})
            if link.src not in m or link.dst not in m:
                unmapped += 1
                continue
            acc = sums.setdefault((m[link.src], m[link.dst], link.transport), [0.0, 0.0])
            acc[0] += link.mb
            acc[1] += link.transit_ns
    medians = _medians(sums)
    links = [_link(key, mb, ns, medians.get(key[2])) for key, (mb, ns) in sums.items()]
    links.sort(key=lambda x: (x.gbps is None, x.gbps or 0.0, x.src, x.dst))
    return HcclLinkView(links=tuple(links[:TOP]), slow=tuple(x for x in links if x.slow), unmapped=unmapped)


def _medians(sums: dict[tuple[int, int, str], list[float]]) -> dict[str, float]:
    """Per transport with at least ``MIN_PEERS`` links of ``MIN_MB`` or more: their median GB/s."""
    by: dict[str, list[float]] = {}
    for (_, _, transport), (mb, ns) in sums.items():
        if mb >= MIN_MB and ns > 0:
            by.setdefault(transport, []).append(mb / (ns / 1e6))
    return {t: float(np.median(v)) for t, v in by.items() if len(v) >= MIN_PEERS}


def _link(key: tuple[int, int, str], mb: float, ns: float, median: float | None) -> ClusterLink:
    src, dst, transport = key
    gbps = mb / (ns / 1e6) if ns > 0 else None
    slow = bool(gbps is not None and median is not None and mb >= MIN_MB and gbps < SLOW_RATIO * median)
    return ClusterLink(
        src=src, dst=dst, transport=transport, mb=mb, transit_ns=int(ns), gbps=gbps, median_gbps=median, slow=slow
    )
