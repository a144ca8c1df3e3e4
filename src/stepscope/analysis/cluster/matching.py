"""Collective instances matched across ranks, with aligned clocks (method: ``view.py``'s docstring).

An instance is (process group, collective type, sequence number); instances seen on fewer than 2 ranks
are not used. Clock offset of a rank = median over instances of ``end_r - median_r'(end_r')``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import intervals as iv
from .comm_events import CommEvents
from .results import Instance, RankTiming

_BUS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}

Key = tuple[str, str, int]  # (group, collective type, sequence number)


@dataclass(frozen=True, kw_only=True)
class Links:
    """What a collective's bandwidth is judged against: ranks share a node when ``rank // gpus_per_node``
    is equal; within a node the node's measured bus bandwidth for the collective type where known, else
    the link's nominal peak (GB/s)."""

    gpus_per_node: int = 8
    peak_intra_gbps: float | None = None
    peak_inter_gbps: float | None = None
    measured_intra_busbw: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Matching:
    instances: tuple[Instance, ...]  # by aligned start
    offsets_ns: dict[int, int]  # per rank
    unmatched: int  # instances seen on one rank only
    late_ns: dict[int, list[int]]  # per rank: its start minus the instance's median start, per instance
    wait_ns: dict[tuple[int, int], int]  # per (rank, step): sync wait, the union over its instances


def match(evs: dict[int, CommEvents], links: Links) -> Matching:
    table: dict[Key, dict[int, int]] = {}
    for rank, ev in evs.items():
        for i in range(ev.size):
            table.setdefault((str(ev.group[i]), str(ev.ctype[i]), int(ev.seq[i])), {})[rank] = i
    matched = {k: v for k, v in table.items() if len(v) >= 2}
    offsets = _offsets(evs, matched)
    late: dict[int, list[int]] = {r: [] for r in evs}
    spans: dict[tuple[int, int], list[tuple[int, int]]] = {}
    insts = []
    for key, v in sorted(
        matched.items(), key=lambda kv: min(evs[r].start_ns[i] - offsets[r] for r, i in kv[1].items())
    ):
        x = _instance(key, v, evs, offsets, links)
        insts.append(x)
        med_start = float(np.median([t.start_ns for t in x.ranks.values()]))
        for r, i in v.items():
            late[r].append(int(x.ranks[r].start_ns - med_start))
            t = x.ranks[r]
            spans.setdefault((r, int(evs[r].step[i])), []).append((t.start_ns, t.start_ns + t.wait_ns))
    return Matching(
        instances=tuple(insts),
        offsets_ns=offsets,
        unmatched=sum(1 for v in table.values() if len(v) < 2),
        late_ns=late,
        wait_ns={k: _union_ns(v) for k, v in spans.items()},
    )


def _union_ns(spans: list[tuple[int, int]]) -> int:
    """Length of the union of ``[start, end)`` spans: collectives in flight together (DDP's buckets on
    gloo's threads, several NCCL streams) wait for the same late rank once, not once each."""
    s = np.array([a for a, _ in spans], np.int64)
    e = np.array([b for _, b in spans], np.int64)
    return iv.union_length(s, e)


def _offsets(evs: dict[int, CommEvents], matched: dict[Key, dict[int, int]]) -> dict[int, int]:
    diffs: dict[int, list[int]] = {r: [] for r in evs}
    # point-to-point transfers need not end together: use collectives when there are any
    sync = {k: v for k, v in matched.items() if k[1] != "send_recv"} or matched
    for v in sync.values():
        ends = {r: int(evs[r].start_ns[i] + evs[r].dur_ns[i]) for r, i in v.items()}
        med = float(np.median(list(ends.values())))
        for r, e in ends.items():
            diffs[r].append(int(e - med))
    return {r: int(np.median(d)) if d else 0 for r, d in diffs.items()}


def _instance(
    key: Key, v: dict[int, int], evs: dict[int, CommEvents], offsets: dict[int, int], links: Links
) -> Instance:
    """One instance: skew, transfer (the shortest duration: the last to arrive did not wait), each rank's
    wait, the last arriver, and the bandwidths (nccl-tests: algbw = bytes / transfer, busbw = algbw x f)."""
    grp, ctype, seq = key
    starts = {r: int(evs[r].start_ns[i] - offsets[r]) for r, i in v.items()}
    durs = {r: int(evs[r].dur_ns[i]) for r, i in v.items()}
    transfer = min(durs.values())
    nbytes = max(int(evs[r].bytes[i]) for r, i in v.items())
    gsize = max(int(evs[r].group_size[i]) for r, i in v.items())
    members = next((m_i for r, i in v.items() if (m_i := _member(evs[r], i))), None)
    n = gsize if gsize > 1 else (len(members) if members else len(v))
    nodes = {r // max(links.gpus_per_node, 1) for r in (members or v)}
    link = "intra" if len(nodes) == 1 else "inter"
    # the reference a collective is judged against: within a node, the node's measured bus
    # bandwidth for its type where the catalog has one (an HGX H100 all-gather reaches ~250 of
    # NVLink's 450 GB/s), else the link's nominal peak
    peak = links.measured_intra_busbw.get(ctype, links.peak_intra_gbps) if link == "intra" else links.peak_inter_gbps
    algbw = nbytes / transfer if (nbytes > 0 and transfer > 0) else None  # bytes/ns = GB/s
    return Instance(
        grp,
        seq,
        ctype,
        nbytes,
        int(np.median([evs[r].step[i] for r, i in v.items()])),
        max(starts.values()) - min(starts.values()),
        transfer,
        max(starts, key=lambda r: (starts[r], -r)),
        {r: RankTiming(starts[r], durs[r], durs[r] - transfer, transfer, int(v[r])) for r in v},
        algbw,
        algbw * _BUS.get(ctype, lambda _n: 1.0)(n) if algbw is not None else None,
        peak,
        link,
        tuple(members) if members else None,
    )


def _member(ev: CommEvents, i: int) -> tuple[int, ...] | None:
    if ev.members is None or not 0 <= i < ev.members.size:
        return None
    m = ev.members[i]
    return tuple(m) if m else None
