"""The calibration's pull toward the priors (calibrate.PULLS): the objective by hand on a grid of
made-up errors, and its selection by leave-one-out on noisy runs the priors generated."""

from __future__ import annotations

import random

import numpy as np
import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.planner.calibrate import (
    GEMM_GRID,
    Fit,
    Run,
    _best,
    _grid,
    errors,
    fit,
    predict_tokens,
)
from stepscope.planner.job import Job, make_job
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy

MODEL = from_config_dict(
    {
        "hidden_size": 1024,
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
        "vocab_size": 32000,
        "hidden_act": "silu",
    }
)
STRATEGIES = ("dp=8,mb=1", "dp=8,mb=2", "dp=8,mb=4", "dp=4,tp=2,mb=1", "dp=4,tp=2,mb=4", "dp=2,tp=4,mb=2")


def job() -> Job:
    return make_job(MODEL, hardware("h100"), 8, 8, 32, 2048)


def _index(f: Fit) -> int:
    """The grid index of a fit's factors."""
    g, a, c, i, o = _grid()
    return int(
        np.flatnonzero(
            (g == f.gemm_scale)
            & (a == f.attn_scale)
            & (c == f.comm_scale)
            & (i == f.inter_scale)
            & (o == f.layer_overhead_s)
        )[0]
    )


@pytest.mark.parametrize(
    ("pull", "gemm"),
    [
        (0.0, 2.0),  # no pull: the lowest error wins, 0 < 0.05
        (0.03, 2.0),  # 0 + 0.03 x ln 2 = 0.0208 < 0.05
        (0.1, 1.0),  # 0 + 0.1 x ln 2 = 0.0693 > 0.05: the priors win
    ],
)
def test_the_pulled_objective_by_hand(pull: float, gemm: float) -> None:
    total = np.full(_grid()[0].size, 10.0)
    total[_index(Fit(1.0, 1.0, 1.0, 1.0))] = 0.05  # the priors: summed |log error| 0.05
    total[_index(Fit(float(GEMM_GRID[-1]), 1.0, 1.0, 1.0))] = 0.0  # GEMM x2 (distance ln 2 from the priors): 0
    assert GEMM_GRID[-1] == 2.0
    assert _best(total, pull).gemm_scale == gemm


def _noisy(seed: int) -> list[Run]:
    """Six runs the priors predict, each measured +-15% off (uniform, fixed seed)."""
    rng = random.Random(seed)
    runs = []
    for n, text in enumerate(STRATEGIES):
        s = parse_strategy(text + ",recompute=none")
        measured = float(predict_tokens(job(), s)[0]) * (1 + rng.uniform(-0.15, 0.15))
        runs.append(Run(job(), {k: int(v[0]) for k, v in s.items()}, measured, predict_tokens, group=str(n)))
    return runs


def test_noise_is_not_fitted_when_leaving_runs_out_says_so() -> None:
    """Noise only (the truth is the priors): the unpulled fit chases it (attention x2.4 on these
    six runs), the selected pull keeps the priors."""
    runs = _noisy(1)
    e = errors(runs)
    unpulled = _best(np.where(_grid()[4] > 0, np.inf, e.sum(axis=0)))
    assert unpulled.attn_scale > 2.0
    f = fit(runs, e)
    assert f.prior_pull > 0
    assert (f.gemm_scale, f.attn_scale, f.comm_scale, f.inter_scale, f.layer_overhead_s) == (1.0, 1.0, 1.0, 1.0, 0.0)


def test_exact_runs_keep_the_priors() -> None:
    """Runs the priors predict exactly: every candidate predicts the left-out runs exactly, so by
    the one-standard-error rule the strongest pull is as good as any; the factors stay at 1."""
    runs = [
        Run(
            r.job,
            r.strategy,
            float(predict_tokens(r.job, {k: np.array([v]) for k, v in r.strategy.items()})[0]),
            predict_tokens,
            r.group,
        )
        for r in _noisy(1)
    ]
    assert fit(runs) == Fit(1.0, 1.0, 1.0, 1.0, 0.0, 1.0)


def test_one_standard_error_rule_by_hand() -> None:
    from stepscope.planner.calibrate import one_standard_error

    cands = [(0.0, False), (0.0, True), (0.3, False), (0.3, True), (1.0, False), (1.0, True)]
    # four runs' leave-one-out errors; no pull without the wait is best (mean 0.10, sample sd of
    # (0.05, 0.15, 0.05, 0.15) = 0.0577, se = 0.0289): pull 0.3 (mean 0.12) is within it, 1.0
    # (mean 0.20) is not; the wait's candidates do not count
    scores = np.array(
        [[0.05, 0.15, 0.05, 0.15], [0.3] * 4, [0.12] * 4, [0.01, 0.9, 0.9, 0.9], [0.2] * 4, [0.0, 1.0, 1.0, 1.0]]
    )
    assert one_standard_error(cands, scores) == (0.3, False)
    # the same with the wait's best clearly ahead: its choice is kept and its pulls are weighed
    scores_wait = scores.copy()
    scores_wait[1] = [0.01, 0.03, 0.01, 0.03]  # mean 0.02, se 0.00577
    scores_wait[3] = [0.024] * 4  # within: 0.024 <= 0.0258
    scores_wait[5] = [0.03] * 4  # not within
    assert one_standard_error(cands, scores_wait) == (0.3, True)
    # identical scores everywhere: the strongest pull, no wait (the first of equals)
    assert one_standard_error(cands, np.full((6, 4), 0.1)) == (1.0, False)


def test_the_calibration_line_names_the_pull() -> None:
    from stepscope.report.plan_lines import what_if_lines

    cal = {
        "runs": 6,
        "gemm_scale": 1.0,
        "attn_scale": 1.0,
        "comm_scale": 1.0,
        "inter_scale": 1.0,
        "mape_before": 0.2,
        "mape_after_leave_one_out": 0.05,
    }
    assert "held toward the priors" not in what_if_lines({"calibration": {**cal, "prior_pull": 0.0}})[0]
    assert (
        "held toward the priors at strength 0.3, chosen leave-one-out"
        in what_if_lines({"calibration": {**cal, "prior_pull": 0.3}})[0]
    )
    two = what_if_lines({"calibration": {**cal, "runs": 2, "prior_pull": 1.0}})[0]
    assert "at strength 1, the strongest: too few runs to choose" in two


def test_two_runs_take_the_strongest_pull() -> None:
    """Two runs cannot choose a pull by leaving one out; they get the strongest. Two noisy runs
    (seed 1's first two): the unpulled fit moves factors the two cannot pin, the pulled one
    stays nearer the priors by the grid's own distance."""
    from stepscope.planner.calibrate import PULLS, _prior_dist

    runs = _noisy(1)[:2]
    e = errors(runs)
    f = fit(runs, e)
    assert f.prior_pull == PULLS[-1] and f.layer_overhead_s == 0.0
    unpulled = _best(np.where(_grid()[4] > 0, np.inf, e.sum(axis=0)))
    dist = {fit_: float(_prior_dist()[_index(fit_)]) for fit_ in (f, unpulled)}
    assert dist[f] < dist[unpulled]
