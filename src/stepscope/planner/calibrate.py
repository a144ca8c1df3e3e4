"""Calibration: fit efficiencies by op class and the communication scale to measured runs.

Four factors are fitted, each a multiplier on the model's prior: ``gemm_scale`` (efficiency of
the non-attention work), ``attn_scale`` (attention kernels), ``comm_scale`` (1 / the fraction
of the catalog link bandwidth achieved: every transfer slower before the overlap rules hide what
they can of it) and
``inter_scale`` (transfers over inter-node links on top of that: the network tier); and a fifth
that adds time, ``layer_overhead_s`` (seconds per layer and micro-batch the device waits on the
host: launches and host synchronisations, as MoE dispatchers make; prior 0), which the fit may
use only when leaving one run out at a time shows that it predicts the runs better (_select).
Among equally
good grid points the one closest to the priors (all scales 1) wins, so a factor the runs cannot
inform (no inter-node traffic, say) stays at 1. Scales rather than absolute efficiencies keep what
the priors know per device (the measured matmul ceiling). The fit minimizes the summed absolute log
error ``|log(predicted / measured)|`` over a grid (vectorized: every grid point for a run in one
evaluation), plus, when leaving one run out at a time shows that it predicts better, a pull toward
the priors (``PULLS`` x the grid point's distance from them): a few runs do not pin five factors,
and without it an exact fit through a handful of runs lands anywhere along the trade-offs.
Accuracy must be reported on runs the fit did not see: :func:`cross_validate` holds out one group
(e.g. one publication) at a time. Where the runs hold op classes the priors know least (linear
attention, routed experts, the MoE exchange), the fit is then refined by op class
(calibrate_ops.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import cache

import numpy as np

from .calibrate_ops import refine
from .cost import evaluate
from .fit import ATTN_GRID, COMM_GRID, GEMM_GRID, INTER_GRID, LAYER_GRID, Fit, Run, predict_one
from .job import Job


@cache
def _grid() -> tuple[np.ndarray, ...]:
    """The flattened factor grids (built once; read-only, shared by every fit and fold)."""
    out = tuple(x.ravel() for x in np.meshgrid(GEMM_GRID, ATTN_GRID, COMM_GRID, INTER_GRID, LAYER_GRID, indexing="ij"))
    for x in out:
        x.setflags(write=False)
    return out


def _errors(run: Run) -> np.ndarray:
    """|log error| for every grid point (flattened); the grid's scales multiply the job's own (a
    profile's, where the calibration is pinned to one)."""
    g, a, c, i, o = _grid()
    s = {k: np.full(g.size, v) for k, v in run.strategy.items()}
    own = run.job.calibration
    job = run.job.calibrated(
        gemm_scale=g * own.gemm_scale,
        attn_scale=a * own.attn_scale,
        comm_scale=c * own.comm_scale,
        inter_scale=i * own.inter_scale,
        layer_overhead_s=o,
    )
    pred = np.maximum(run.predict(job, s), 1e-12)
    return np.abs(np.log(pred / run.measured))


@cache
def _prior_dist() -> np.ndarray:
    """Each grid point's distance from the priors (ties go to the nearest); built once, read-only."""
    g, a, c, i, o = _grid()
    out = np.abs(np.log(g)) + np.abs(np.log(a)) + np.abs(np.log(c)) + np.abs(np.log(i)) + np.log1p(o / LAYER_GRID[1])
    out.setflags(write=False)
    return out


@cache
def _held(pinned: frozenset[str]) -> np.ndarray:
    """0 at the grid points where every pinned factor is 1 (the job's own value: a profile
    measured it), inf elsewhere; built once per set, read-only."""
    out = np.zeros(_grid()[0].size)
    for name, x in zip(("gemm_scale", "attn_scale", "comm_scale", "inter_scale"), _grid()[:4], strict=True):
        if name in pinned:
            out[x != 1.0] = np.inf
    out.setflags(write=False)
    return out


# the pull toward the priors, per unit of _prior_dist, added to the summed |log errors| of the runs
# (a prior whose weight does not grow with the runs: a few runs stay near the priors, many runs
# outweigh them); which one is used is chosen by leaving one run out at a time (_select)
PULLS = (0.0, 0.03, 0.1, 0.3, 1.0)


def _best(total: np.ndarray, pull: float = 0.0) -> Fit:
    g, a, c, i, o = _grid()
    if pull > 0:
        k = int(np.argmin(total + pull * _prior_dist()))
    else:  # ties (factors the runs do not inform) go to the point nearest the priors
        k = int(np.lexsort((_prior_dist(), np.round(total, 9)))[0])
    return Fit(float(g[k]), float(a[k]), float(c[k]), float(i[k]), float(o[k]), pull)


def _select(errs: np.ndarray, rows: Sequence[int] | None = None, pinned: frozenset[str] = frozenset()) -> Fit:
    """The fit to the runs whose |log errors| over the grid are ``errs[rows]`` (all rows: None).
    Two choices are model selection by cross-validation: whether the host wait
    (``layer_overhead_s``) is used (it trades off against the efficiencies, and only runs that
    differ in their micro-batches tell them apart), and how hard the fit is pulled toward the
    priors (``PULLS``: few runs do not pin five factors). Each candidate (each pull, with and
    without the host wait) is scored by how well its fits, leaving one run out at a time, predict
    the left-out runs (mean |log error|). The host wait is used if the best candidate uses it
    (ties: not); the pull is the strongest whose score, with that host-wait choice, is within one
    standard error of the best score (the one-standard-error rule: the best score is itself an
    estimate from the same runs, and the simpler fit within its noise varies less from one set of
    runs to the next; leave-one-source-out figures: BENCHMARKS.md, "Planner accuracy on 117
    published runs"). With fewer than 3 runs leaving one out cannot choose: no host wait, and the
    strongest pull (two runs do not pin five factors: calibrated on two runs of a validation
    source, the source's other runs come out 18.7% off unpulled, 15.8% with the pull, 16.2% with
    the priors alone; the same section, bench_few_runs.py). ``pinned``: factors held at 1 (the
    runs' jobs carry a profile's values, op_profile.py)."""
    rows = range(len(errs)) if rows is None else rows
    total = _held(pinned).copy()
    for k in rows:  # row by row: no copy of the (runs x grid) block
        total += errs[k]
    without = _grid()[4] > 0  # grid points with an overhead
    if len(rows) < 3:
        return _best(np.where(without, np.inf, total), PULLS[-1])
    dist = _prior_dist()
    tie = dist * 1e-12  # below the 1e-9 rounding: the prior wins ties, as in _best
    step = len(LAYER_GRID)  # the host wait varies fastest in the grid: [::step] are the points without one
    loo = np.zeros((len(PULLS), 2, len(rows)))  # [pull, with the host wait, left-out run]
    rest = np.empty_like(total)
    for n, k in enumerate(rows):
        e = errs[k]
        base = total - e
        for j, pull in enumerate(PULLS):
            if pull > 0:
                np.multiply(dist, pull, out=rest)
                rest += base
            else:
                np.round(base, 9, out=rest)
                rest += tie
            loo[j, 0, n] = float(e[int(np.argmin(rest[::step])) * step])
            loo[j, 1, n] = float(e[int(np.argmin(rest))])
    candidates = [(pull, host) for pull in PULLS for host in (False, True)]  # loo's order, flattened
    pull, host = one_standard_error(candidates, loo.reshape(len(candidates), -1))
    return _best(total if host else np.where(without, np.inf, total), pull)


def one_standard_error(candidates: Sequence[tuple[float, bool]], scores: np.ndarray) -> tuple[float, bool]:
    """(pull, host wait) by the one-standard-error rule (_select): ``scores[c]`` are candidate c's
    leave-one-out errors, one per run. The host-wait choice is the best mean's (the first of
    equals); the pull the strongest, with that choice, whose mean is within one standard error
    (sample standard deviation / sqrt(runs)) of the best mean."""
    means = scores.mean(axis=1)
    best = int(np.argmin(means))
    host = candidates[best][1]
    runs = scores.shape[1]
    se = float(np.std(scores[best], ddof=1) / np.sqrt(runs)) if runs > 1 else 0.0
    pull = max(p for c, (p, h) in enumerate(candidates) if h == host and means[c] <= means[best] + se)
    return pull, host


def at_grid_edge(f: Fit) -> list[str]:
    """The factors that landed on the edge of their grid: the runs ask for more than the grid
    allows, which usually means they do not describe the jobs given (or the model misses a term)."""
    grids = {"gemm_scale": GEMM_GRID, "attn_scale": ATTN_GRID, "comm_scale": COMM_GRID, "inter_scale": INTER_GRID}
    edge = [k for k, g in grids.items() if getattr(f, k) in (float(g[0]), float(g[-1]))]
    return edge + (
        ["layer_overhead_s"] if f.layer_overhead_s == float(LAYER_GRID[-1]) else []
    )  # 0 is its prior, not an edge


def errors(runs: Sequence[Run], progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """(runs x grid) |log errors|: what fit and cross_validate start from (pass it to both to
    evaluate each run's grid once); ``progress(done, total)`` after each run."""
    out = []
    for k, r in enumerate(runs, 1):
        out.append(_errors(r))
        if progress is not None:
            progress(k, len(runs))
    return np.stack(out)


def fit(runs: Sequence[Run], errs: np.ndarray | None = None, pinned: frozenset[str] = frozenset()) -> Fit:
    """The fit to the runs; ``pinned``: the factors a profile measured (the runs' jobs carry its
    values, op_profile.py), held at 1 x those."""
    if not runs:
        return Fit(1.0, 1.0, 1.0, 1.0)
    errs = errors(runs) if errs is None else errs
    return refine(runs, _select(errs, None, pinned), lambda rows: _select(errs, rows, pinned), pinned)


def cross_validate(
    runs: Sequence[Run], by_family: bool = False, errs: np.ndarray | None = None, pinned: frozenset[str] = frozenset()
) -> dict[str, dict[str, float | str]]:
    """Leave-one-group-out: for each group, fit on the others and report its MAPE and mean signed
    relative error (predicted / measured - 1 of the run's metric), and the MAPE of the step time
    that metric implies (``mape_step_time``: the metric is a throughput, so the time's relative
    error is measured / predicted - 1; it weighs a prediction 2x too fast as 50%, not 100%). ``by_family``:
    fit on the other groups of the held-out group's family (e.g. other publications of the same
    framework) when there are any, else on all other groups; ``fit_on`` says which. ``pinned``: as
    for :func:`fit`."""
    errs = errors(runs) if errs is None else errs
    out: dict[str, dict[str, float | str]] = {}
    for grp in sorted({r.group for r in runs}):
        test = [r for r in runs if r.group == grp]
        train = [k for k, r in enumerate(runs) if r.group != grp]
        fam = [k for k in train if runs[k].family == test[0].family] if by_family and test[0].family else []
        on = fam or train

        def grid_fit(rows: list[int], on: list[int] = on) -> Fit:
            return _select(errs, [on[i] for i in rows], pinned)

        f = refine([runs[k] for k in on], _select(errs, on, pinned), grid_fit, pinned)
        pred = [predict_one(r, f) for r in test]
        rel = [(p - r.measured) / r.measured for p, r in zip(pred, test, strict=True)]
        out[grp] = {
            "rows": len(test),
            "mape": float(np.mean(np.abs(rel))),
            "mean_signed": float(np.mean(rel)),
            "mape_step_time": float(
                np.mean([abs(r.measured / max(p, 1e-12) - 1) for p, r in zip(pred, test, strict=True)])
            ),
            "fit_on": "family" if fam else "all",
            **dataclasses.asdict(f),
        }
    return out


def predict_tokens(job: Job, s: dict[str, np.ndarray]) -> np.ndarray:
    return evaluate(job, s, keys=("tokens_per_s_per_device",))["tokens_per_s_per_device"]
