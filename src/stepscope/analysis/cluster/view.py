"""Cluster view: collectives matched across ranks, clock alignment, sync wait vs transfer,
bandwidth, stragglers and a what-if. Input: the per-rank results (``RankAnalysis`` with
``comm_events``); output: :class:`ClusterView`. Pure numpy on small per-instance arrays.

Matching: an instance is (process group, collective type, sequence number) — the n-th collective
of that type in that group on each rank (see ``comm_events``). Instances seen on fewer than 2
ranks are not used.

Clock alignment: a collective ends at nearly the same moment on all its ranks, so each rank's
offset is the median over instances of ``end_r - median_r'(end_r')``; aligned time = own time -
offset. Offsets are reported (ns). Point-to-point (send/recv) instances are used only when there
are no collectives. The estimate is as good as "ends together" holds: ring collectives on
gloo end within ~1 ms of each other, NCCL within microseconds.

Per instance (aligned): ``skew = max start - min start``; ``transfer = min duration`` over ranks
(the last to arrive did not wait); ``wait_r = dur_r - transfer``; the slowest rank is the last to
arrive. Bandwidth (nccl-tests): ``algbw = bytes / transfer``, ``busbw = algbw x f`` with f =
2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 otherwise; n =
recorded group size, else the ranks seen. The link peak is the device's intra-node bandwidth
when all the instance's ranks share a node (rank // gpus_per_node), else inter-node.

Stragglers: per rank, three robust z-scores ``(x - median) / (1.4826 MAD)`` (MAD floored at 2% of
the median and 20 us so identical ranks do not explode): compute per step (collectives excluded
by the accounting), data-loader time per step, and late arrival (median over instances of
``start_r - median start``). Score = the largest; cause = which one (``compute``: slow device or
throttling; ``host: data loader``; ``host``: late with normal compute and loader), or ``link`` when
the rank's groups move data at < 50% of the median bus bandwidth of same-type instances. Ranks
with score >= the threshold (default 3) are stragglers; the top-k are always listed.

What-if per straggler: per step, each rank's busy time ``step - sync wait`` bounds the step (all
ranks meet at the collectives); with the straggler's busy time replaced by the median, the step
shrinks by ``max busy - max(max busy of the others, median busy)``; averaged over steps.
"""

from __future__ import annotations

import numpy as np

from ...catalog import hardware
from ...errors import ConfigError
from ..config import AnalyzeConfig
from ..results import RankAnalysis
from .comm_events import CommEvents, finalize
from .critical_path import compute as critical_paths
from .results import ClusterView, Instance, RankStepRow, RankTiming, SizeBin, Straggler

_BUS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}
SMALL_MESSAGE_BYTES = 1 << 20
_HIST_EDGES = (0, 1 << 16, 1 << 20, 1 << 24, 1 << 28)
_HIST_LABELS = ("<64 KiB", "64 KiB-1 MiB", "1-16 MiB", "16-256 MiB", ">=256 MiB")


def _robust_z(x: np.ndarray) -> np.ndarray:
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    scale = 1.4826 * max(mad, 0.02 * abs(med), 20_000.0)
    return (x - med) / scale


def cluster_view(ranks: tuple[RankAnalysis, ...], cfg: AnalyzeConfig) -> ClusterView | None:
    """The cross-rank view (2+ ranks), with link peaks of the ranks' device when it is known."""
    intra = inter = None
    measured: dict[str, float] = {}
    per_node = cfg.gpus_per_node
    name = next((r.roofline.hardware.name for r in ranks if r.roofline and r.roofline.hardware), None)
    if name:
        try:
            hw = hardware.by_name(name, cfg.hardware_file)
            intra, inter, measured = hw.intra_node_gbps, hw.inter_node_gbps, dict(hw.intra_node_busbw_gbps)
            per_node = per_node or hw.node_devices
        except ConfigError:
            pass
    return build(
        ranks,
        threshold=cfg.straggler_threshold,
        gpus_per_node=per_node or 8,
        peak_intra_gbps=intra,
        peak_inter_gbps=inter,
        measured_intra_busbw=measured,
    )


def build(
    ranks: tuple[RankAnalysis, ...],
    *,
    threshold: float = 3.0,
    gpus_per_node: int = 8,
    peak_intra_gbps: float | None = None,
    peak_inter_gbps: float | None = None,
    measured_intra_busbw: dict[str, float] | None = None,
) -> ClusterView | None:
    evs = {
        r.rank: (r.comm_events if r.comm_events.before is not None else finalize(r.comm_events))
        for r in ranks
        if r.comm_events is not None
    }
    if len(ranks) < 2:
        return None
    # ---- match instances ---------------------------------------------------------------------
    table: dict[tuple[str, str, int], dict[int, int]] = {}
    for rank, ev in evs.items():
        for i in range(ev.size):
            table.setdefault((str(ev.group[i]), str(ev.ctype[i]), int(ev.seq[i])), {})[rank] = i
    matched = {k: v for k, v in table.items() if len(v) >= 2}
    unmatched = sum(1 for v in table.values() if len(v) < 2)
    # ---- clock offsets from end times ----------------------------------------------------------
    diffs: dict[int, list[int]] = {r: [] for r in evs}
    # point-to-point transfers need not end together: use collectives when there are any
    sync = {k: v for k, v in matched.items() if k[1] != "send_recv"} or matched
    for v in sync.values():
        ends = {r: int(evs[r].start_ns[i] + evs[r].dur_ns[i]) for r, i in v.items()}
        med = float(np.median(list(ends.values())))
        for r, e in ends.items():
            diffs[r].append(int(e - med))
    offsets = {r: int(np.median(d)) if d else 0 for r, d in diffs.items()}
    # ---- per instance ----------------------------------------------------------------------------
    insts = []
    late: dict[int, list[int]] = {r: [] for r in evs}
    wait_by_rank_step: dict[tuple[int, int], int] = {}
    for (grp, ctype, seq), v in sorted(
        matched.items(), key=lambda kv: min(evs[r].start_ns[i] - offsets[r] for r, i in kv[1].items())
    ):
        starts = {r: int(evs[r].start_ns[i] - offsets[r]) for r, i in v.items()}
        durs = {r: int(evs[r].dur_ns[i]) for r, i in v.items()}
        transfer = min(durs.values())
        med_start = float(np.median(list(starts.values())))
        for r, s in starts.items():
            late[r].append(int(s - med_start))
        last = max(starts, key=lambda r: (starts[r], -r))
        timing = {r: RankTiming(starts[r], durs[r], durs[r] - transfer, transfer, int(v[r])) for r in v}
        step = int(np.median([evs[r].step[i] for r, i in v.items()]))
        for r, i in v.items():
            key = (r, int(evs[r].step[i]))
            wait_by_rank_step[key] = wait_by_rank_step.get(key, 0) + durs[r] - transfer
        nbytes = max(int(evs[r].bytes[i]) for r, i in v.items())
        gsize = max(int(evs[r].group_size[i]) for r, i in v.items())
        members = next((m_i for r, i in v.items() if (m_i := _member(evs[r], i))), None)
        n = gsize if gsize > 1 else (len(members) if members else len(v))
        nodes = {r // max(gpus_per_node, 1) for r in (members or v)}
        link = "intra" if len(nodes) == 1 else "inter"
        # the reference a collective is judged against: within a node, the node's measured bus
        # bandwidth for its type where the catalog has one (an HGX H100 all-gather reaches ~250 of
        # NVLink's 450 GB/s), else the link's nominal peak
        peak = (measured_intra_busbw or {}).get(ctype, peak_intra_gbps) if link == "intra" else peak_inter_gbps
        algbw = nbytes / transfer if (nbytes > 0 and transfer > 0) else None  # bytes/ns = GB/s
        busbw = algbw * _BUS.get(ctype, lambda _n: 1.0)(n) if algbw is not None else None
        insts.append(
            Instance(
                grp,
                seq,
                ctype,
                nbytes,
                step,
                max(starts.values()) - min(starts.values()),
                transfer,
                last,
                timing,
                algbw,
                busbw,
                peak,
                link,
                tuple(members) if members else None,
            )
        )
    # ---- per rank x step matrix ----------------------------------------------------------------
    matrix = [
        RankStepRow(
            ra.rank,
            k,
            s.step_time_ns,
            s.compute_ns,
            s.exposed_comm_ns,
            wait_by_rank_step.get((ra.rank, k), 0),
            s.cpu.dataloader_ns,
            s.idle_ns,
        )
        for ra in ranks
        for k, s in enumerate(ra.steps)
    ]
    # ---- stragglers ----------------------------------------------------------------------------
    order = [r.rank for r in ranks]
    comp = np.array([np.median([s.compute_ns for s in r.steps]) if r.steps else 0.0 for r in ranks], dtype=np.float64)
    dl = np.array(
        [np.median([s.cpu.dataloader_ns for s in r.steps]) if r.steps else 0.0 for r in ranks], dtype=np.float64
    )
    arr = np.array([np.median(late[r]) if late.get(r) else 0.0 for r in order], dtype=np.float64)
    zc, zd, za = _robust_z(comp), _robust_z(dl), _robust_z(arr)
    slow_link = _slow_link_ranks(insts)
    what_if = _what_if(ranks, wait_by_rank_step)
    strag = []
    for j, rank in enumerate(order):
        zs = {"compute": zc[j], "host: data loader": zd[j], "host": za[j]}
        cause = max(zs, key=lambda k: zs[k])
        if cause == "host" and (zc[j] >= threshold or zd[j] >= threshold):
            cause = "compute" if zc[j] >= zd[j] else "host: data loader"
        score = float(max(zs.values()))
        if rank in slow_link and score < threshold:
            cause, score = "link", max(score, threshold)
        excess = {
            "compute": comp[j] - np.median(comp),
            "host: data loader": dl[j] - np.median(dl),
            "host": arr[j] - np.median(arr),
            "link": 0.0,
        }[cause]
        strag.append(
            Straggler(
                rank,
                score,
                cause,
                float(zc[j]),
                float(zd[j]),
                float(za[j]),
                int(excess),
                what_if.get(rank, 0),
                score >= threshold,
            )
        )
    strag.sort(key=lambda s: -s.score)
    # ---- sizes and findings -----------------------------------------------------------------------
    hist = _histogram(insts)
    findings = _findings(insts, strag)
    paths = critical_paths(insts, evs, offsets)
    return ClusterView(
        len(ranks),
        offsets,
        tuple(insts),
        tuple(strag),
        tuple(matrix),
        hist,
        findings,
        threshold,
        unmatched,
        paths,
        _comm_matrix(insts, evs),
    )


def _comm_matrix(insts: list[Instance], evs: dict[int, CommEvents]) -> dict[str, dict[str, object]]:
    """Bytes each rank sends to each other rank, for point-to-point (``send_recv``) and all-to-all
    instances with recorded sizes. Peers: the recorded ``Process Group Ranks`` (global ranks),
    else the ranks the instance was matched across. All-to-all: this rank's input bytes split by
    its recorded ``In split size``, else evenly over the group (1/n to each member; the part to
    itself does not cross a link). Send/recv: the whole message to the other member of a 2-rank
    group, else to each other matched rank."""
    out: dict[str, dict[str, object]] = {}
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
        out[ctype] = {"ranks": ranks, "bytes": m.tolist(), "instances": n_inst, "assumption": "; ".join(how)}
    return out


def _member(ev: CommEvents, i: int) -> tuple[int, ...] | None:
    if ev.members is None or not 0 <= i < ev.members.size:
        return None
    m = ev.members[i]
    return tuple(m) if m else None


def _slow_link_ranks(insts: list[Instance]) -> set[int]:
    """Ranks whose instances move data at < 50% of the median bus bandwidth of instances of the
    same type and size class (a slow link slows every instance that crosses it)."""
    out: set[int] = set()
    by_type: dict[tuple[str, int], list[Instance]] = {}
    for x in insts:
        if x.busbw_gbps is not None and x.bytes > 0:
            by_type.setdefault((x.type, int(np.log2(max(x.bytes, 1)))), []).append(x)
    for group in by_type.values():
        if len(group) < 4:
            continue
        med = float(np.median([x.busbw_gbps for x in group]))
        slow = [x for x in group if x.busbw_gbps is not None and x.busbw_gbps < 0.5 * med]
        if slow and len(slow) < len(group) / 2:
            # the ranks every slow instance shares: the ends of the slow link (a pair group: both)
            out |= set.intersection(*(set(x.ranks) for x in slow))
    return out


def _what_if(ranks: tuple[RankAnalysis, ...], wait: dict[tuple[int, int], int]) -> dict[int, int]:
    n_steps = min((len(r.steps) for r in ranks), default=0)
    if n_steps == 0:
        return {}
    busy = np.array(
        [[r.steps[k].step_time_ns - wait.get((r.rank, k), 0) for k in range(n_steps)] for r in ranks], dtype=np.float64
    )
    med = np.median(busy, axis=0)
    out = {}
    for j, r in enumerate(ranks):
        others = np.delete(busy, j, axis=0).max(axis=0) if len(ranks) > 1 else med
        saving = busy.max(axis=0) - np.maximum(others, med)
        out[r.rank] = int(np.maximum(saving, 0).mean())
    return out


def _histogram(insts: list[Instance]) -> tuple[SizeBin, ...]:
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


def _findings(insts: list[Instance], strag: list[Straggler]) -> tuple[str, ...]:
    out = []
    for s in strag:
        if s.is_straggler:
            out.append(
                f"rank {s.rank} is a straggler ({s.cause}; score {s.score:.1f}, {s.excess_ns / 1e6:.2f} ms/step over the median); "
                f"if it ran like the median rank the step would be ~{s.what_if_saving_ns / 1e6:.2f} ms shorter"
            )
    small = [x for x in insts if 0 <= x.bytes < SMALL_MESSAGE_BYTES]
    if len(small) >= 8 and len(small) > 0.5 * len(insts):
        out.append(
            f"{len(small)} of {len(insts)} collectives move < 1 MiB: latency-bound; bucket them (larger DDP/FSDP buckets, coalescing)"
        )
    low = [
        x
        for x in insts
        if x.busbw_gbps is not None
        and x.peak_gbps
        and x.bytes >= SMALL_MESSAGE_BYTES
        and x.busbw_gbps < 0.5 * x.peak_gbps
    ]
    if low:
        out.append(
            f"{len(low)} collectives >= 1 MiB reach < 50% of the link's bus bandwidth (the node's measured figure for "
            f"the collective where the catalog has one, else the nominal peak; median "
            f"{np.median([x.busbw_gbps for x in low]):.1f} GB/s)"
        )
    waits = sum(t.wait_ns for x in insts for t in x.ranks.values())
    if insts:
        out.append(
            f"collective sync wait (waiting for the last rank): {waits / 1e6:.2f} ms summed over ranks; "
            f"transfer: {sum(x.transfer_ns * len(x.ranks) for x in insts) / 1e6:.2f} ms"
        )
    return tuple(out)
