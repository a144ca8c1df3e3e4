"""Calibration by op class: what the kernels the priors know least really achieve.

The grid fit (calibrate.py) scales every GEMM, every attention kernel and every link alike. Three
op classes escape such shared scales by large factors on real runs, each for a mechanism the
priors do not model:
- ``linear_attn_scale``: chunked linear-attention kernels (GLA, Gated DeltaNet) run their gating
  and intra-chunk work on the vector units, far below the matrix units' rate (Yang et al., "Gated
  Linear Attention Transformers with Hardware-Efficient Training", ICML 2024, section 3.3);
- ``expert_scale``: routed experts' grouped GEMMs with a few hundred tokens per expert are
  memory-bound and tile-padded (Megablox's and Transformer Engine's grouped GEMMs);
- ``ep_scale``: the MoE token exchange (all-to-all, ragged on TPUs) with its permutations, buffer
  padding and synchronisation, beyond its bytes over the link.

Each is a multiplier with prior 1 (efficiencies x, the exchange's time x), fitted only when the
runs hold that op class (a model with linear-attention layers; with experts; with ep > 1 in two
or more runs), and all runs of one model on one device (a user's own runs). The fit is
coordinate descent: each factor in turn (the op scales, then the grid
fit's own factors, which the op scales can free from absorbing what they could not express) set
to the grid value with the least summed |log error| over the runs, plus the grid fit's pull
toward the priors; until a sweep changes nothing (at most ``SWEEPS``); from the grid fit or from
the priors, or not at all, whichever predicts left-out runs better (:func:`refine`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from .fit import ATTN_GRID, COMM_GRID, GEMM_GRID, INTER_GRID, LAYER_GRID, SCALES, Fit, Run, predict_one

# log-spaced, holding the prior 1.0 exactly
OP_GRIDS: dict[str, np.ndarray] = {
    "linear_attn_scale": 2.0 ** (np.arange(-32, 5) / 4),  # 1/256 .. 2
    "expert_scale": 2.0 ** (np.arange(-16, 5) / 4),  # 1/16 .. 2
    "ep_scale": 2.0 ** (np.arange(-4, 29) / 4),  # 0.5 .. 128
}
SWEEPS = 4
MIN_EP_RUNS = 2  # the exchange's scale needs two runs with expert parallelism to be told from the rest


def op_classes(runs: Sequence[Run], pinned: frozenset[str] = frozenset()) -> list[str]:
    """The op-class factors the runs can inform (module docstring): none unless every run is of one
    model on one device: what a kernel class achieves is a property of its shapes on that device,
    and one scale per class fitted across NVIDIA's MoE runs of four models on three devices
    predicted them, leaving each out, no better than the shared scales (BENCHMARKS.md). Not the
    ``pinned`` ones (a profile measured them, op_profile.py)."""
    if len({(r.job.model, r.job.hw.name) for r in runs}) > 1:
        return []
    out = []
    if any(r.job.model.linear_layers for r in runs):
        out.append("linear_attn_scale")
    if any(r.job.model.n_experts for r in runs):
        out.append("expert_scale")
    if sum(int(r.strategy.get("ep", 1)) > 1 for r in runs) >= MIN_EP_RUNS:
        out.append("ep_scale")
    return [k for k in out if k not in pinned]


def _base_grids() -> dict[str, np.ndarray]:
    """The grid fit's factors on their grids, the links' scale and the host wait reaching further
    (the grid fit's edges, 4 and 51.2 ms, are where runs with an op class it cannot express land)."""
    return {
        "gemm_scale": GEMM_GRID,
        "attn_scale": ATTN_GRID,
        "comm_scale": np.concatenate([COMM_GRID, COMM_GRID[-1] * 2.0 ** (np.arange(1, 7) / 3)]),  # .. 16
        "inter_scale": INTER_GRID,
        "layer_overhead_s": np.concatenate([LAYER_GRID, LAYER_GRID[-1] * 2.0 ** np.arange(1, 3)]),  # .. 204.8 ms
    }


def _distance(name: str, grid: np.ndarray) -> np.ndarray:
    """Each grid value's distance from its prior (calibrate._prior_dist's terms)."""
    if name == "layer_overhead_s":
        return np.log1p(grid / LAYER_GRID[1])
    return np.abs(np.log(grid))


def _errors_along(runs: Sequence[Run], f: Fit, name: str, grid: np.ndarray) -> np.ndarray:
    """Summed |log error| over the runs with factor ``name`` at each grid value, the rest at ``f``."""
    total = np.zeros(grid.size)
    for r in runs:
        s = {k: np.full(grid.size, v) for k, v in r.strategy.items()}
        # a scale multiplies the job's own value, as Fit.apply does; the host wait is absolute
        own = getattr(r.job.calibration, name) if name in SCALES else 1.0
        job = f.apply(r.job).calibrated(**{name: grid * own})
        pred = np.maximum(r.predict(job, s), 1e-12)
        total += np.abs(np.log(pred / r.measured))
    return total


def _descend(runs: Sequence[Run], f: Fit, grids: dict[str, np.ndarray], pull: float) -> Fit:
    """Coordinate descent from ``f``: each factor in turn to its best grid value, until a sweep
    changes nothing (at most SWEEPS)."""
    for _ in range(SWEEPS):
        before = f
        for name, grid in grids.items():
            score = _errors_along(runs, f, name, grid) + pull * _distance(name, grid)
            best = float(grid[int(np.argmin(np.round(score, 9)))])
            f = dataclasses.replace(f, **{name: best})
        if f == before:
            break
    return f


def refine(
    runs: Sequence[Run],
    f: Fit,
    grid_fit: Callable[[list[int]], Fit] | None = None,
    pinned: frozenset[str] = frozenset(),
) -> Fit:
    """The grid fit ``f`` refined by op class (module docstring); ``f`` itself when the runs hold
    no op class of OP_GRIDS. Three candidates: no refinement, the descent from the grid fit, the
    descent from the priors (the grid fit may sit where a catch-all factor, the host wait, absorbed
    what an op class explains, a point no single factor's change improves; from the priors the op
    scales may absorb what the host wait explains). Which is used is model selection: each
    candidate, fitted on all runs but one, predicts the one left out; the lowest mean |log error|
    wins, ties to the simpler (no refinement, then the grid fit's start). ``grid_fit(rows)``: the
    grid fit on those runs (by index), for the first candidate; without it, or with fewer than 3
    runs, the descent from the grid fit is used. ``pinned``: factors held where they are (a
    profile measured them, op_profile.py)."""
    ops = op_classes(runs, pinned)
    if not ops or not runs:
        return f
    grids = {k: v for k, v in {**{k: OP_GRIDS[k] for k in ops}, **_base_grids()}.items() if k not in pinned}
    pull = max(f.prior_pull, 1e-9)  # ties go to the prior
    prior = dataclasses.replace(
        f, gemm_scale=1.0, attn_scale=1.0, comm_scale=1.0, inter_scale=1.0, layer_overhead_s=0.0
    )
    if len(runs) < 3 or grid_fit is None:
        return _descend(runs, f, grids, pull)
    scores = [
        _loo_score(runs, lambda rest, rows: grid_fit(rows)),
        _loo_score(runs, lambda rest, rows: _descend(rest, grid_fit(rows), grids, pull)),
        _loo_score(runs, lambda rest, rows: _descend(rest, prior, grids, pull)),
    ]
    choice = int(np.argmin(np.round(scores, 9)))
    return f if choice == 0 else _descend(runs, (f, prior)[choice - 1], grids, pull)


def _loo_score(runs: Sequence[Run], fit_on: Callable[[list[Run], list[int]], Fit]) -> float:
    """Mean |log error| of each run predicted by ``fit_on(the other runs, their indices)``."""
    errs = []
    for k, r in enumerate(runs):
        rows = [j for j in range(len(runs)) if j != k]
        fk = fit_on([runs[j] for j in rows], rows)
        errs.append(abs(float(np.log(max(predict_one(r, fk), 1e-12) / r.measured))))
    return float(np.mean(errs))
