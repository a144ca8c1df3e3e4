"""Regression: a lasting change of a rank's step time. For every split of the series, the
``regression_window`` steps before against the ``regression_window`` after: a one-sided
Mann-Whitney rank test (normal approximation, ties broken by order) gives the probability that the
later steps are slower, and the ratio of the medians is the effect size. A change point needs both
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


def change_points(x: np.ndarray, w: int, ratio: float, probability: float) -> list[tuple[int, float, float]]:
    """(split index, probability, effect) of each change point: ``x[i:]`` slower than ``x[:i]``."""
    n = x.size
    if n < 2 * w:
        return []
    view = np.lib.stride_tricks.sliding_window_view(x, 2 * w)  # row j: x[j : j + 2w], split at j + w
    ranks = np.argsort(np.argsort(view, axis=1), axis=1) + 1
    u = ranks[:, w:].sum(axis=1) - w * (w + 1) / 2
    z = (u - w * w / 2) / np.sqrt(w * w * (2 * w + 1) / 12)
    before = np.median(view[:, :w], axis=1)
    after = np.median(view[:, w:], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        effect = after / before - 1.0
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
