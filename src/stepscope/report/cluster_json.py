"""The ``cluster`` object of the analyze JSON (contract in docs/json-schema.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..analysis.cluster.results import (
    AllToAllImbalanceFinding,
    ClusterView,
    Finding,
    LowBandwidthFinding,
    SmallMessagesFinding,
    StragglerFinding,
    SyncWaitFinding,
)


def finding_text(f: Finding) -> str:
    """A cluster finding in a sentence (the same in every report)."""
    if isinstance(f, StragglerFinding):
        return (
            f"rank {f.rank} is a straggler ({f.cause}; score {f.score:.1f}, {f.excess_ns / 1e6:.2f} ms/step over the "
            f"median); if it ran like the median rank the step would be ~{f.saving_ns / 1e6:.2f} ms shorter"
        )
    if isinstance(f, SmallMessagesFinding):
        return (
            f"{f.small} of {f.total} collectives move < {_size(f.threshold_bytes)}: latency-bound; bucket them "
            "(larger DDP/FSDP buckets, coalescing)"
        )
    if isinstance(f, LowBandwidthFinding):
        return (
            f"{f.count} collectives >= {_size(f.min_bytes)} reach < {f.ratio:.0%} of the link's bus bandwidth (the "
            "node's measured figure for the collective where the catalog has one, else the nominal peak; median "
            f"{f.median_busbw_gbps:.1f} GB/s)"
        )
    if isinstance(f, AllToAllImbalanceFinding):
        return (
            f"{f.instances} of {f.total} all-to-alls are imbalanced: the busiest member receives a median "
            f"{f.median_ratio:.2f}x the mean (rank {f.busiest_rank} most often)"
        )
    if isinstance(f, SyncWaitFinding):
        return (
            f"collective sync wait (waiting for the last rank): {f.wait_ns / 1e6:.2f} ms summed over ranks; "
            f"transfer: {f.transfer_ns / 1e6:.2f} ms"
        )
    raise TypeError(f"no wording for the finding {type(f).__name__}")


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n:,} B"


def to_dict(c: ClusterView | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "clock_offsets_ns": {str(r): v for r, v in c.clock_offsets_ns.items()},
        "collectives": [
            {
                "group": x.group,
                "seq": x.seq,
                "type": x.type,
                "bytes": x.bytes,
                "step": x.step,
                "skew_ns": x.skew_ns,
                "transfer_ns": x.transfer_ns,
                "last_rank": x.last_rank,
                "link": x.link,
                "peak_gbps": x.peak_gbps,
                "members": list(x.members) if x.members else None,
                "ranks": {str(r): dataclasses.asdict(t) for r, t in x.ranks.items()},
                "algbw_gbps": x.algbw_gbps,
                "busbw_gbps": x.busbw_gbps,
            }
            for x in c.collectives
        ],
        "stragglers": [dataclasses.asdict(s) for s in c.stragglers],
        "straggler_threshold": c.threshold,
        "rank_step_matrix": [dataclasses.asdict(m) for m in c.matrix],
        "message_sizes": [dataclasses.asdict(b) for b in c.size_histogram],
        "findings": [finding_text(f) for f in c.findings],
        "unmatched_instances": c.unmatched_instances,
        "comm_matrix": {k: dataclasses.asdict(m) for k, m in c.comm_matrix.items()},
        "critical_path": [
            {
                "step": p.step,
                "length_ns": p.length_ns,
                "by_kind_ns": p.by_kind_ns,
                "by_rank_ns": {str(r): v for r, v in p.by_rank_ns.items()},
                "segments": [dataclasses.asdict(s) for s in p.segments],
            }
            for p in c.critical_paths
        ],
        **(
            {"extras": {k: dataclasses.asdict(v) if v is not None else None for k, v in c.extras.items()}}
            if c.extras
            else {}
        ),
    }
