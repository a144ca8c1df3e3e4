"""HCCL's own timing of an Ascend rank's collectives: how much of their time was waiting for the
peers and how much moving data, and at what bandwidth per link.

The source is what HCCL measured (torch_npu's ``communication.json``, read by
``trace/ascend_comm.py``), not inferred from the timeline: per operator, ``wait`` is the time the
rank waited for its peers to arrive (a late peer, a load imbalance: no faster link helps),
``transit`` the time data moved, ``sync`` the handshakes. ``wait_ratio`` is HCCL's own
``wait / (wait + transit)``. Per transport (HCCS inside a node, RDMA between nodes, ...) the
bandwidth is the data moved over the transit time, in HCCL's own units (its MB per ms, which it
reports as GB/s), so it equals the ``Bandwidth(GB/s)`` HCCL writes for one operator. Only for ranks whose profile has the file
(torch_npu profiler level 1 and up).

Per collective type, summed over the recorded steps; ``*_per_step`` means over them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..context import RankContext

_OP = re.compile(r"^hcom_([A-Za-z]+?)_")
_TYPES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "allgatherv": "all_gather",
    "reducescatter": "reduce_scatter",
    "reducescatterv": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoallv": "all_to_all",
    "alltoallvc": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "send": "send_recv",
    "receive": "send_recv",
    "batchsendrecv": "send_recv",
}


@dataclass(frozen=True, kw_only=True)
class HcclCollective:
    collective: str  # all_reduce, all_gather, ... (other: a name HCCL gives that we do not know)
    count: int
    elapse_ns: int
    transit_ns: int
    wait_ns: int
    sync_ns: int
    wait_ratio: float  # wait / (wait + transit), 0-1
    transit_mb: float  # per operator the most any one transport moved (HCCL's MB), summed
    link_gbps: dict[str, float]  # per transport: MB / transit ms (HCCL's GB/s)


@dataclass(frozen=True, kw_only=True)
class HcclTiming:
    steps: int
    elapse_ns_per_step: float
    transit_ns_per_step: float
    wait_ns_per_step: float
    wait_ratio: float
    by_collective: tuple[HcclCollective, ...]  # most elapsed time first


def applies(ctx: RankContext) -> bool:
    return ctx.info.hccl_ops is not None


def collective_of(op: str) -> str:
    """HCCL operator name (``hcom_allReduce__844_2_1``) -> collective type."""
    m = _OP.match(op)
    return _TYPES.get(m.group(1).lower(), "other") if m else "other"


def compute(ctx: RankContext) -> HcclTiming | None:
    ops = ctx.info.hccl_ops
    if not ops:
        return None
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(ops["name"]):
        groups.setdefault(collective_of(str(name)), []).append(i)
    rows = sorted((_one(c, idx, ops) for c, idx in groups.items()), key=lambda r: -r.elapse_ns)
    steps = max(len(set(ops["step"])), 1)
    wait = sum(r.wait_ns for r in rows)
    transit = sum(r.transit_ns for r in rows)
    return HcclTiming(
        steps=steps,
        elapse_ns_per_step=sum(r.elapse_ns for r in rows) / steps,
        transit_ns_per_step=transit / steps,
        wait_ns_per_step=wait / steps,
        wait_ratio=wait / (wait + transit) if wait + transit else 0.0,
        by_collective=tuple(rows),
    )


def _one(collective: str, idx: list[int], ops: dict[str, list[Any]]) -> HcclCollective:
    def total(col: str) -> int:
        return int(sum(int(ops[col][i]) for i in idx))

    link_mb: dict[str, float] = {}
    link_ns: dict[str, int] = {}
    for i in idx:
        for transport, (mb, ns) in dict(ops["links"][i]).items():
            link_mb[transport] = link_mb.get(transport, 0.0) + float(mb)
            link_ns[transport] = link_ns.get(transport, 0) + int(ns)
    wait, transit = total("wait_ns"), total("transit_ns")
    return HcclCollective(
        collective=collective,
        count=len(idx),
        elapse_ns=total("elapse_ns"),
        transit_ns=transit,
        wait_ns=wait,
        sync_ns=total("sync_ns"),
        wait_ratio=wait / (wait + transit) if wait + transit else 0.0,
        transit_mb=float(sum(float(ops["mb"][i]) for i in idx)),
        link_gbps={t: round(link_mb[t] / (link_ns[t] / 1e6), 4) for t in sorted(link_mb) if link_ns.get(t)},
    )
