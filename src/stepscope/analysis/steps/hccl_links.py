"""HCCL's links as one rank recorded them (``communication_matrix.json``, ``trace/ascend_matrix.py``).

Per (group, source, destination, transport), summed over the op types and steps recorded: HCCL's
MB moved and transit time, and the bandwidth ``mb / ms`` in HCCL's GB/s. Source and destination are
ranks local to the group; ``local_rank`` holds this rank's own in each group (the file's link from
a rank to itself), so the cluster view can map them to global ranks
(``analysis/cluster/hccl_links.py``). Links of a rank to itself (on-chip copies) are not listed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..context import RankContext


@dataclass(frozen=True, kw_only=True)
class HcclLink:
    group: str
    src: int  # rank local to the group
    dst: int
    transport: str  # HCCS, RDMA, PCIE, SIO...
    mb: float  # HCCL's MB
    transit_ns: int
    gbps: float | None  # MB per ms, HCCL's GB/s; None without transit time


@dataclass(frozen=True, kw_only=True)
class HcclLinks:
    local_rank: dict[str, int]  # group -> this rank's rank in it
    links: tuple[HcclLink, ...]  # slowest first


def applies(ctx: RankContext) -> bool:
    return ctx.info.hccl_links is not None


def compute(ctx: RankContext) -> HcclLinks | None:
    cols = ctx.info.hccl_links
    keys = ("group", "src", "dst", "transport", "mb", "transit_ns")
    if not cols or any(k not in cols for k in keys):
        return None
    local: dict[str, int] = {}
    sums: dict[tuple[str, int, int, str], list[float]] = {}
    for group, src, dst, transport, mb, ns in zip(*(cols[k] for k in keys), strict=True):
        if int(src) == int(dst):
            local[str(group)] = int(src)
            continue
        acc = sums.setdefault((str(group), int(src), int(dst), str(transport)), [0.0, 0.0])
        acc[0] += float(mb)
        acc[1] += float(ns)
    links = [
        HcclLink(
            group=g, src=s, dst=d, transport=t, mb=mb, transit_ns=int(ns), gbps=mb / (ns / 1e6) if ns > 0 else None
        )
        for (g, s, d, t), (mb, ns) in sums.items()
    ]
    links.sort(key=lambda x: (x.gbps is None, x.gbps or 0.0, x.group, x.src, x.dst))
    return HcclLinks(local_rank=local, links=tuple(links))
