"""A calibration's runs and its fit, as data: the measured runs (:class:`Run`), the fitted factors
(:class:`Fit`), the grids the factors are searched on, and one run's prediction under a fit.
Shared by the grid fit (calibrate.py) and the fit by op class (calibrate_ops.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .job import Job

# log-spaced grids that hold the prior, 1.0, exactly (a factor the runs cannot inform stays there)
GEMM_GRID = 2.0 ** (np.arange(-16, 13) / 12)  # 0.40 .. 2.0
ATTN_GRID = 2.0 ** (np.arange(-8, 7) / 4)  # 0.25 .. 2.83
COMM_GRID = 2.0 ** (np.arange(-6, 7) / 3)  # 0.25 .. 4.0
INTER_GRID = 2.0 ** (np.arange(-2, 7) / 2)  # 0.5 .. 8.0
# host-bound seconds per layer and micro-batch: none (the prior), then 25 us .. 51.2 ms
LAYER_GRID = np.concatenate([[0.0], 25e-6 * 2.0 ** np.arange(12)])


@dataclass(frozen=True)
class Run:
    job: Job
    strategy: dict[str, int]
    measured: float
    predict: Callable[[Job, dict[str, np.ndarray]], np.ndarray]  # -> the run's metric, per config
    group: str
    family: str = ""  # e.g. the framework: with by_family, a held-out group is fitted on its family


@dataclass(frozen=True)
class Fit:
    gemm_scale: float
    attn_scale: float
    comm_scale: float
    inter_scale: float = 1.0
    layer_overhead_s: float = 0.0
    # how hard the fit was pulled toward the priors (PULLS, chosen leave-one-out); not a factor of the job
    prior_pull: float = 0.0
    # by op class, where the runs hold it (calibrate_ops.py)
    linear_attn_scale: float = 1.0
    expert_scale: float = 1.0
    ep_scale: float = 1.0

    def apply(self, job: Job) -> Job:
        """The job with the fit's scales multiplying its own (a profile's, op_profile.py, where a
        calibration was pinned to one; 1 otherwise) and the fit's host wait."""
        c = job.calibration
        return job.calibrated(
            **{k: getattr(self, k) * getattr(c, k) for k in SCALES}, layer_overhead_s=self.layer_overhead_s
        )


# the fit's multipliers (relative to the job's own values); the host wait is absolute
SCALES = (
    "gemm_scale",
    "attn_scale",
    "comm_scale",
    "inter_scale",
    "linear_attn_scale",
    "expert_scale",
    "ep_scale",
)


def predict_one(run: Run, f: Fit) -> float:
    s = {k: np.array([v]) for k, v in run.strategy.items()}
    return float(run.predict(f.apply(run.job), s)[0])
