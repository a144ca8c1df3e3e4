"""Regression: a lasting change of a rank's step time. For every split of the series, the
``regression_window`` steps before against the ``regression_window`` after: a one-sided
Mann-Whitney rank test (normal approximation; average ranks and the tie-corrected variance) gives
the probability that the later steps are slower, and the ratio of the medians is the effect size. A change point needs both
(probability >= ``regression_probability`` and effect >= ``regression_ratio``); of adjacent
qualifying splits (less than a window apart), the one with the largest statistic is the change
point."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from ..config import DetectConfig
from .anomaly import Anomaly
from .fluctuation import explain
from .series import RankSeries


def _mann_whitney_z(view: np.ndarray, w: int, chunk: int = 2048) -> np.ndarray:
    """Per row (first ``w`` values before, ``w`` after): the normal-approximation z of the
    Mann-Whitney U of the later half, with average ranks for ties and the tie-corrected variance
    (timings rounded to a millisecond tie often). Pairwise comparisons in row chunks: O(rows x 4w^2)."""
    n = 2 * w
    z = np.empty(view.shape[0])
    for lo in range(0, view.shape[0], chunk):
        v = view[lo : lo + chunk]
        less = (v[:, :, None] > v[:, None, :]).sum(axis=2)
        ties = (v[:, :, None] == v[:, None, :]).sum(axis=2)  # each value's group size, itself included
        ranks = less + (ties + 1) / 2.0
        u = ranks[:, w:].sum(axis=1) - w * (w + 1) / 2
        tie_term = (ties.astype(np.float64) ** 2 - 1).sum(axis=1) / (n * (n - 1))  # sum(t^3 - t) / (n(n-1))
        var = w * w / 12.0 * ((n + 1) - tie_term)
        with np.errstate(divide="ignore", invalid="ignore"):
            z[lo : lo + chunk] = np.where(var > 0, (u - w * w / 2) / np.sqrt(np.maximum(var, 1e-300)), 0.0)
    return z


def change_points(x: np.ndarray, w: int, ratio: float, probability: float) -> list[tuple[int, float, float]]:
    """(split index, probability, effect) of each change point: ``x[i:]`` slower than ``x[:i]``."""
    n = x.size
    if n < 2 * w:
        return []
    view = np.lib.stride_tricks.sliding_window_view(x, 2 * w)  # row j: x[j : j + 2w], split at j + w
    before = np.median(view[:, :w], axis=1)
    after = np.median(view[:, w:], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        effect = after / before - 1.0
    z = np.full(effect.shape, -np.inf)
    big = np.flatnonzero(effect >= ratio)  # the rank test only where the effect size is there (cheap first)
    if big.size:
        z[big] = _mann_whitney_z(view[big], w)
    ok = (z >= NormalDist().inv_cdf(probability)) & (effect >= ratio)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return []
    out: list[tuple[int, float, float]] = []
    for group in np.split(idx, np.flatnonzero(np.diff(idx) > w) + 1):  # splits within w: one change
        j = int(group[np.argmax(z[group])])
        out.append((j + w, float(NormalDist().cdf(float(z[j]))), float(effect[j])))
    return out


def detect(series: RankSeries, cfg: DetectConfig) -> list[Anomaly]:
    w = cfg.regression_window
    out = []
    for i, prob, effect in change_points(series.dur_ns, w, cfg.regression_ratio, cfg.regression_probability):
        step = int(series.step[i])
        last = int(series.step[min(i + w, series.step.size) - 1])
        before = float(np.median(series.dur_ns[i - w : i])) / 1e6
        after = float(np.median(series.dur_ns[i : i + w])) / 1e6
        sel = np.arange(i, min(i + w, series.step.size))
        cause, shares = explain(series.dur_ns - before * 1e6, series.gc_ns, series.phases, sel)
        out.append(
            Anomaly(
                kind="regression",
                rank=series.rank,
                first_step=step,
                last_step=last,
                flagged_at_step=last,
                steps=int(min(w, series.step.size - i)),
                excess_ratio=effect,
                cause=cause,
                probability=prob,
                message=f"rank {series.rank}: from step {step} the median step went {before:.1f} -> {after:.1f} ms (+{effect:.0%})",
                evidence={
                    "median_before_ms": round(before, 3),
                    "median_after_ms": round(after, 3),
                    "window_steps": w,
                    "explained_share": shares,
                },
            )
        )
    return out
