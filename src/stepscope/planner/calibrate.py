"""Calibration: fit the compute-efficiency and communication scales to measured runs.

The fit minimizes the mean absolute log error ``|log(predicted / measured)|`` over a grid of
``eff_scale`` x ``comm_scale`` (vectorized: every grid point for every run in one evaluation per
run). Accuracy must be reported on runs the fit did not see: :func:`cross_validate` holds out one
group (e.g. one publication) at a time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .cost import Job, evaluate

EFF_GRID = np.geomspace(0.4, 2.5, 41)
COMM_GRID = np.geomspace(0.25, 4.0, 21)


@dataclass(frozen=True)
class Run:
    job: Job
    strategy: dict[str, int]
    measured: float
    predict: Callable[[Job, dict[str, np.ndarray]], np.ndarray]  # -> the run's metric, per config
    group: str


def _errors(run: Run) -> np.ndarray:
    """|log error| for every (eff, comm) grid point: shape (len(EFF_GRID), len(COMM_GRID))."""
    e, c = np.meshgrid(EFF_GRID, COMM_GRID, indexing="ij")
    n = e.size
    s = {k: np.full(n, v) for k, v in run.strategy.items()}
    job = dataclasses.replace(run.job, eff_scale=e.ravel(), comm_scale=c.ravel())  # type: ignore[arg-type]
    pred = np.maximum(run.predict(job, s), 1e-12)
    return np.abs(np.log(pred / run.measured)).reshape(e.shape)


def fit(runs: Sequence[Run]) -> tuple[float, float]:
    if not runs:
        return 1.0, 1.0
    total = np.sum(np.stack([_errors(r) for r in runs]), axis=0)
    i, j = np.unravel_index(int(np.argmin(total)), total.shape)
    return float(EFF_GRID[i]), float(COMM_GRID[j])


def cross_validate(runs: Sequence[Run]) -> dict[str, dict[str, float]]:
    """Leave-one-group-out: for each group, fit on the others and report its MAPE."""
    errs = {id(r): _errors(r) for r in runs}
    groups = sorted({r.group for r in runs})
    out = {}
    for g in groups:
        train = [r for r in runs if r.group != g]
        test = [r for r in runs if r.group == g]
        total = np.sum(np.stack([errs[id(r)] for r in train]), axis=0)
        i, j = np.unravel_index(int(np.argmin(total)), total.shape)
        ape = []
        for r in test:
            s = {k: np.array([v]) for k, v in r.strategy.items()}
            pred = r.predict(dataclasses.replace(r.job, eff_scale=float(EFF_GRID[i]), comm_scale=float(COMM_GRID[j])), s)[0]
            ape.append(abs(pred - r.measured) / r.measured)
        out[g] = {"rows": len(test), "mape": float(np.mean(ape)), "eff_scale": float(EFF_GRID[i]), "comm_scale": float(COMM_GRID[j])}
    return out


def predict_tokens(job: Job, s: dict[str, np.ndarray]) -> np.ndarray:
    return evaluate(job, s)["tokens_per_s_per_device"]
