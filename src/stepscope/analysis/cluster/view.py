"""Cluster view: collectives matched across ranks, clock alignment, sync wait vs transfer,
bandwidth, stragglers and a what-if. Input: the per-rank results (``RankAnalysis`` with
``comm_events``); output: :class:`ClusterView`, its parts computed by the cluster analyses of
``registry.CLUSTER_ANALYSES`` over one :class:`ClusterContext`. Pure numpy on small per-instance arrays.

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

import dataclasses

from ...catalog import hardware
from ...errors import ConfigError
from .. import registry
from ..config import AnalyzeConfig
from ..results import RankAnalysis
from .context import build_context
from .matching import Links
from .results import ClusterView
from .warmup import steady_view

_IDENTITY = ("ranks", "clock_offsets_ns", "collectives", "threshold", "unmatched_instances", "extras")
_BUILT_IN = frozenset(f.name for f in dataclasses.fields(ClusterView)) - set(_IDENTITY)


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
    """Each cluster analysis of the registry in order, each seeing the results before it; None for one rank."""
    links = Links(
        gpus_per_node=gpus_per_node,
        peak_intra_gbps=peak_intra_gbps,
        peak_inter_gbps=peak_inter_gbps,
        measured_intra_busbw=dict(measured_intra_busbw or {}),
    )
    if len(ranks) < 2:
        return None
    ranks = tuple(steady_view(r) for r in ranks)  # warm-up steps are not in the cluster view
    ctx = build_context(ranks, threshold, links)
    built, extras = registry.run_registered(((e.name, e.compute) for e in registry.CLUSTER_ANALYSES), ctx, _BUILT_IN)
    m = ctx.matching
    return ClusterView(
        ranks=len(ranks),
        clock_offsets_ns=m.offsets_ns,
        collectives=m.instances,
        threshold=threshold,
        unmatched_instances=m.unmatched,
        extras=extras,
        **built,
    )
