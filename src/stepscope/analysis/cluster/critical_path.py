"""Cross-rank critical path of each step, joined at the collectives.

Model: ranks run independently between collectives and meet at each one; a collective can only
finish after its last rank arrives, so the path runs through the **last arriver** of each
collective (aligned clocks, see ``matching.py``):

    [window start of the first critical rank, its arrival] local work on that rank
    [arrival, arrival + transfer]                           communication
    [end of that collective, next last arrival]             local work on the next critical rank
    ...
    [end of the last collective, latest step end]           local work on the rank that ends last

Collectives whose end lies before the path's current time were overlapped with work on the path
and are not on it. Local work is split by that rank's own intervals (evaluated in the worker over
the rank's own local segment before the same collective, then scaled to the path segment's
length, so only O(collectives) numbers per rank reach the parent), in this precedence:
``compute`` (its device compute kernels, or top-level CPU ops on CPU-only ranks), ``data loading``
(its data-loader ranges), ``CPU`` (device idle before the host called the launch of the next
work: host-bound), ``launch overhead`` (device idle after that call, before the work started),
``sync wait`` (device idle while
the host sat in a synchronizing call) and ``other idle``. Every ns of the path is in exactly one
bound type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .comm_events import CommEvents

KINDS = ("compute", "communication", "data loading", "CPU", "launch overhead", "sync wait", "other idle", "memcpy")


@dataclass(frozen=True)
class Segment:
    rank: int
    start_ns: int  # aligned clock
    end_ns: int
    kind: str  # "local" (split below) | "communication"
    compute_ns: int
    loader_ns: int
    host_ns: int  # CPU: device idle, the host had not yet called the launch of the next work
    launch_ns: int  # launch overhead: device idle, the launch call made but the work not started
    wait_ns: int  # device idle while the host synchronized
    other_ns: int
    label: str  # the collective, for communication segments
    comm_ns: int = 0  # other collectives' kernels on the rank's local path
    memcpy_ns: int = 0


@dataclass(frozen=True)
class StepPath:
    step: int
    length_ns: int
    by_kind_ns: dict[str, int]
    by_rank_ns: dict[int, int]  # local time on the path per rank
    segments: tuple[Segment, ...]


def _local(rank: int, parts: np.ndarray | None, lo: int, hi: int) -> Segment:
    """Local segment [lo, hi) (aligned) on ``rank``, split like the rank's own local time before the
    same point (``CommEvents.before`` / ``tail``: computed in the worker from its intervals),
    scaled to the segment's length when the path's segment and the rank's own differ."""
    length = hi - lo
    if parts is None or parts.sum() <= 0 or length <= 0:
        return Segment(rank, lo, hi, "local", 0, 0, 0, 0, 0, max(length, 0), "", 0, 0)
    scaled = (parts.astype(np.float64) * (length / float(parts.sum()))).astype(np.int64)
    scaled[5] += length - int(scaled.sum())  # rounding goes to "other idle"
    c, ld, cpu, launch, wait, other, comm, mem = (int(x) for x in scaled)
    return Segment(rank, lo, hi, "local", c, ld, cpu, launch, wait, other, "", comm, mem)


def compute(instances: list, evs: dict[int, CommEvents], offsets: dict[int, int]) -> tuple[StepPath, ...]:
    steps = sorted({x.step for x in instances if x.step >= 0})
    out = []
    for k in steps:
        insts = sorted((x for x in instances if x.step == k), key=lambda x: x.ranks[x.last_rank].start_ns)
        windows = {
            r: (int(ev.step_windows[0][k]) - offsets.get(r, 0), int(ev.step_windows[1][k]) - offsets.get(r, 0))
            for r, ev in evs.items()
            if k < ev.step_windows[0].size
        }
        if not insts or not windows:
            continue
        first = insts[0].last_rank
        t = windows.get(first, (insts[0].ranks[first].start_ns, 0))[0]
        segs: list[Segment] = []
        for x in insts:
            r = x.last_rank
            arrive = x.ranks[r].start_ns
            end = arrive + x.transfer_ns
            if end <= t:
                continue  # overlapped with work already on the path
            if arrive > t:
                before = evs[r].before
                idx = x.ranks[r].index
                segs.append(
                    _local(r, before[idx] if before is not None and 0 <= idx < len(before) else None, t, arrive)
                )
                t = arrive
            segs.append(Segment(r, t, end, "communication", 0, 0, 0, 0, 0, 0, f"{x.type} {x.group}#{x.seq}"))
            t = end
        last_rank = max(windows, key=lambda r: windows[r][1])
        if windows[last_rank][1] > t:
            tails = evs[last_rank].tail
            segs.append(
                _local(last_rank, tails[k] if tails is not None and k < len(tails) else None, t, windows[last_rank][1])
            )
        by_kind = dict.fromkeys(KINDS, 0)
        by_rank: dict[int, int] = {}
        for s in segs:
            if s.kind == "communication":
                by_kind["communication"] += s.end_ns - s.start_ns
            else:
                by_kind["compute"] += s.compute_ns
                by_kind["data loading"] += s.loader_ns
                by_kind["CPU"] += s.host_ns
                by_kind["launch overhead"] += s.launch_ns
                by_kind["sync wait"] += s.wait_ns
                by_kind["other idle"] += s.other_ns
                by_kind["communication"] += s.comm_ns
                by_kind["memcpy"] += s.memcpy_ns
                by_rank[s.rank] = by_rank.get(s.rank, 0) + s.end_ns - s.start_ns
        length = sum(s.end_ns - s.start_ns for s in segs)
        out.append(StepPath(k, length, by_kind, by_rank, tuple(segs)))
    return tuple(out)
