"""Communication time of the cost model's groups: bandwidth and latency by where a group sits.

A group of n ranks laid out over ``span`` consecutive ranks is inside a node when span <= the
devices per node. By default a group inside a node gets the catalog's measured intra-node bus
bandwidth for its collective kind (``intra_node_busbw_gbps``; else the nominal link rate) and 10 us
per ring step, a group across nodes the catalog's per-device network rate (divided by the
calibration's ``inter_scale``) and 20 us per step. With a measured network profile
(planner/network.py) a group inside a node gets the profile's one-node bus bandwidth and 10 us
steps, a group across nodes the node's nominal network rate shared by the node's concurrent
groups and the profile's measured step latency. A ring collective moves (n-1)/n x bytes per rank
and pays (n-1) step latencies per call (an all-reduce: two calls of its bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .job import Job
from .network import NetworkProfile

INTRA_STEP_S, INTER_STEP_S = 10e-6, 20e-6


def ring_share(n: np.ndarray, factor: float = 1.0) -> np.ndarray:
    """factor x (n-1)/n: the share of a buffer each rank moves in a ring collective."""
    return factor * (n - 1) / np.maximum(n, 1)


@dataclass(frozen=True)
class Links:
    node: float  # devices per node
    intra_bps: float
    inter_bps: float  # per device
    inter_scale: float | np.ndarray
    network: NetworkProfile | None
    intra_busbw: dict[str, float] = field(default_factory=dict)  # measured, bytes/s by kind
    # 1 / the fraction of these bandwidths achieved (the calibration's or a trace's comm_scale):
    # it slows the transfers themselves, so the overlap rules then hide what they can of them
    comm_scale: float | np.ndarray = 1.0

    @classmethod
    def of(cls, job: Job) -> Links:
        hw = job.hw
        return cls(
            float(job.devices_per_node),
            (hw.intra_node_gbps or 100.0) * 1e9,
            (hw.inter_node_gbps or 25.0) * 1e9,
            job.calibration.inter_scale,
            job.network,
            {k: v * 1e9 for k, v in hw.intra_node_busbw_gbps.items()},
            job.calibration.comm_scale,
        )

    def bandwidth(self, span: np.ndarray, ranks: np.ndarray | None = None, kind: str = "all_gather") -> np.ndarray:
        """Bytes/s of a group's collective (module docstring); point-to-point (ranks None) keeps
        the nominal link."""
        prof = self.network
        if ranks is None:
            bps = np.where(span <= self.node, self.intra_bps, self.inter_bps / self.inter_scale)
        elif prof is None:
            bps = np.where(
                span <= self.node, self.intra_busbw.get(kind, self.intra_bps), self.inter_bps / self.inter_scale
            )
        else:
            _, per_node = prof.group_nodes(ranks, span)
            bps = np.where(span <= self.node, prof.busbw(kind, 1.0), self.inter_bps * per_node / self.inter_scale)
        return bps / self.comm_scale

    def step_s(self, span: np.ndarray, ranks: np.ndarray | None = None, kind: str = "all_gather") -> np.ndarray:
        """Latency of one ring step (module docstring)."""
        step = np.where(span <= self.node, INTRA_STEP_S, INTER_STEP_S)
        if self.network is not None and ranks is not None:
            nodes, _ = self.network.group_nodes(ranks, span)
            step = np.where(
                span <= self.node, step, self.network.step_latency_s(kind, nodes, self.node * self.inter_bps)
            )
        return step

    def ring(
        self,
        n: np.ndarray,
        nbytes: np.ndarray | float,
        span: np.ndarray,
        calls: float | np.ndarray = 1,
        kind: str = "all_gather",
    ) -> np.ndarray:
        """``calls`` ring collectives over n ranks whose group spans ``span`` ranks, moving
        (n-1)/n x nbytes per rank in all."""
        latency = np.where(n > 1, (n - 1) * self.step_s(span, n, kind), 0.0)
        return ring_share(n) * nbytes / self.bandwidth(span, n, kind) + calls * latency
