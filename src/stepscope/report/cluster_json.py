"""The ``cluster`` object of the analyze JSON (contract in docs/json-schema.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..analysis.cluster.view import ClusterView


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
        "findings": list(c.findings),
        "unmatched_instances": c.unmatched_instances,
        "comm_matrix": c.comm_matrix,
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
    }
