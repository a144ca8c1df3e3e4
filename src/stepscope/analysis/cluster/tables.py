"""Cross-rank tables: the rank x step matrix, message sizes, bytes between ranks, critical paths."""

from __future__ import annotations

import numpy as np

from .context import ClusterContext
from .critical_path import StepPath
from .critical_path import compute as critical_path
from .results import CommMatrix, RankStepRow, SizeBin

_HIST_EDGES = (0, 1 << 16, 1 << 20, 1 << 24, 1 << 28)
_HIST_LABELS = ("<64 KiB", "64 KiB-1 MiB", "1-16 MiB", "16-256 MiB", ">=256 MiB")


def matrix(c: ClusterContext) -> tuple[RankStepRow, ...]:
    """Per rank and step: the step's parts and the rank's sync wait in the step's collectives."""
    wait = c.matching.wait_ns
    return tuple(
        RankStepRow(
            ra.rank,
            k,
            s.step_time_ns,
            s.compute_ns,
            s.exposed_comm_ns,
            wait.get((ra.rank, k), 0),
            s.cpu.dataloader_ns,
            s.idle_ns,
        )
        for ra in c.ranks
        for k, s in enumerate(ra.steps)
    )


def critical_paths(c: ClusterContext) -> tuple[StepPath, ...]:
    return critical_path(list(c.matching.instances), c.events, c.matching.offsets_ns)


def size_histogram(c: ClusterContext) -> tuple[SizeBin, ...]:
    """Instances and their summed transfer time by message size."""
    insts = c.matching.instances
    bins = []
    for k, label in enumerate(_HIST_LABELS):
        lo = _HIST_EDGES[k]
        hi = _HIST_EDGES[k + 1] if k + 1 < len(_HIST_EDGES) else None
        sel = [x for x in insts if x.bytes >= 0 and x.bytes >= lo and (hi is None or x.bytes < hi)]
        bins.append(SizeBin(label, len(sel), sum(x.transfer_ns for x in sel)))
    unknown = [x for x in insts if x.bytes < 0]
    if unknown:
        bins.append(SizeBin("unknown size", len(unknown), sum(x.transfer_ns for x in unknown)))
    return tuple(bins)


def comm_matrix(c: ClusterContext) -> dict[str, CommMatrix]:
    """Bytes each rank sends to each other rank, for point-to-point (``send_recv``) and all-to-all
    instances with recorded sizes. Peers: the recorded ``Process Group Ranks`` (global ranks),
    else the ranks the instance was matched across. All-to-all: this rank's input bytes split by
    its recorded ``In split size``, else evenly over the group (1/n to each member; the part to
    itself does not cross a link). Send/recv: the whole message to the other member of a 2-rank
    group, else to each other matched rank."""
    insts, evs = c.matching.instances, c.events
    out: dict[str, CommMatrix] = {}
    for ctype in ("send_recv", "all_to_all"):
        flows: dict[tuple[int, int], int] = {}
        used_split = used_members = 0
        n_inst = 0
        for x in insts:
            if x.type != ctype or x.bytes <= 0:
                continue
            n_inst += 1
            peers = list(x.members) if x.members else sorted(x.ranks)
            used_members += x.members is not None
            for r, tm in x.ranks.items():
                ev = evs[r]
                own = int(ev.bytes[tm.index]) if 0 <= tm.index < ev.size else x.bytes
                if own <= 0:
                    continue
                if ctype == "all_to_all":
                    split = ev.in_split[tm.index] if ev.in_split is not None and 0 <= tm.index < ev.size else None
                    if split and len(split) == len(peers) and sum(split) > 0:
                        used_split += 1
                        shares = [own * s // sum(split) for s in split]
                    else:
                        shares = [own // len(peers)] * len(peers)
                    for peer, b in zip(peers, shares):
                        if peer != r and b:
                            flows[(r, peer)] = flows.get((r, peer), 0) + b
                else:
                    others = [q for q in peers if q != r]
                    for peer in others if len(peers) != 2 else others[:1]:
                        flows[(r, peer)] = flows.get((r, peer), 0) + own
        if not flows:
            continue
        ranks = sorted({a for a, _ in flows} | {b for _, b in flows})
        pos = {r: i for i, r in enumerate(ranks)}
        m = np.zeros((len(ranks), len(ranks)), np.int64)
        for (a, b), v in flows.items():
            m[pos[a], pos[b]] += v
        how = ["peers: " + ("recorded Process Group Ranks" if used_members else "the ranks matched in each instance")]
        if ctype == "all_to_all":
            how.append("splits: " + ("recorded In split size" if used_split else "even (no split recorded)"))
        out[ctype] = CommMatrix(
            ranks=tuple(ranks),
            bytes=tuple(tuple(int(b) for b in row) for row in m),
            instances=n_inst,
            assumption="; ".join(how),
        )
    return out
