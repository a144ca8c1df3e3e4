"""What the cluster view finds, as records with their numbers (``results.py``); the renderers word them.

- each straggler (``stragglers.py``), worst first;
- small messages: at least 8 instances, more than half of them under 1 MiB;
- low bandwidth: instances of 1 MiB or more whose bus bandwidth is under 50% of their link's reference
  (the node's measured figure for the collective where the catalog has one, else the nominal peak);
- all-to-all imbalance (``alltoall.py``): the busiest member receiving 1.5x the mean or more;
- sync wait: the wait and transfer time of all matched instances, summed over their ranks.
"""

from __future__ import annotations

import numpy as np

from .alltoall import all_to_all_imbalance
from .context import ClusterContext
from .results import (
    Finding,
    LowBandwidthFinding,
    SmallMessagesFinding,
    Straggler,
    StragglerFinding,
    SyncWaitFinding,
)

SMALL_MESSAGE_BYTES = 1 << 20
LOW_BANDWIDTH_RATIO = 0.5


def compute(c: ClusterContext) -> tuple[Finding, ...]:
    """Reads the ``stragglers`` result (listed before it in the registry)."""
    insts = c.matching.instances
    out: list[Finding] = [
        StragglerFinding(
            rank=s.rank, cause=s.cause, score=s.score, excess_ns=s.excess_ns, saving_ns=s.what_if_saving_ns
        )
        for s in c.result("stragglers", tuple)
        if isinstance(s, Straggler) and s.is_straggler
    ]
    small = [x for x in insts if 0 <= x.bytes < SMALL_MESSAGE_BYTES]
    if len(small) >= 8 and len(small) > 0.5 * len(insts):
        out.append(SmallMessagesFinding(small=len(small), total=len(insts), threshold_bytes=SMALL_MESSAGE_BYTES))
    low = [
        x.busbw_gbps
        for x in insts
        if x.busbw_gbps is not None
        and x.peak_gbps
        and x.bytes >= SMALL_MESSAGE_BYTES
        and x.busbw_gbps < LOW_BANDWIDTH_RATIO * x.peak_gbps
    ]
    if low:
        out.append(
            LowBandwidthFinding(
                count=len(low),
                min_bytes=SMALL_MESSAGE_BYTES,
                ratio=LOW_BANDWIDTH_RATIO,
                median_busbw_gbps=float(np.median(low)),
            )
        )
    imbalance = all_to_all_imbalance(c)
    if imbalance is not None:
        out.append(imbalance)
    if insts:
        out.append(
            SyncWaitFinding(
                wait_ns=sum(t.wait_ns for x in insts for t in x.ranks.values()),
                transfer_ns=sum(x.transfer_ns * len(x.ranks) for x in insts),
            )
        )
    return tuple(out)
