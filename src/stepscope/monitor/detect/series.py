"""The steps the detectors look at: per rank, in step order, without tagged steps (warm-up, eval,
checkpoint, profiling, the job's own tags) and without leading warm-up steps the job did not tag
(over ``warmup_ratio`` x the median of the rest, as ``analyze`` does for traces).

``own_ns`` is a step's time minus the time it waited in collectives (level 2; 0 when not
measured): what the rank itself spent, the figure stragglers are judged on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..store import RunData

PHASE_COLUMNS = ("data_ns", "forward_ns", "backward_ns", "optimizer_ns")


@dataclass(frozen=True, kw_only=True)
class RankSeries:
    rank: int
    step: np.ndarray  # int64, usable steps only
    dur_ns: np.ndarray  # float64
    own_ns: np.ndarray
    gc_ns: np.ndarray
    phases: dict[str, np.ndarray]  # PHASE_COLUMNS -> float64 (NaN: not measured)
    excluded: int  # tagged or warm-up steps left out
    warmup: int  # of which untagged leading warm-up steps
    tagged: dict[int, str]  # step -> tags, of the steps left out for their tags (not warm-up)


def leading_warmup(dur: np.ndarray, ratio: float) -> int:
    """How many leading steps exceed ``ratio`` x the median of the last three quarters of the
    series (at most a quarter of it are warm-up)."""
    limit = dur.size // 4
    if limit == 0:
        return 0
    over = dur[:limit] > ratio * float(np.median(dur[limit:]))
    return int(limit if over.all() else np.argmin(over))


def rank_series(run: RunData, warmup_ratio: float) -> list[RankSeries]:
    s = run.steps
    out = []
    for r in run.ranks:
        sel = np.flatnonzero(s["rank"] == r)
        tags = s["tags"][sel]
        tagged = np.array([bool(t) for t in tags], dtype=bool)
        keep = sel[~tagged]
        own_tags = {
            int(st): str(t) for st, t in zip(s["step"][sel][tagged], tags[tagged]) if t != "warmup" and t != "profiling"
        }
        dur = s["dur_ns"][keep]
        w = leading_warmup(dur, warmup_ratio) if dur.size > 4 else 0
        keep = keep[w:]
        comm = np.nan_to_num(s["comm_ns"][keep], nan=0.0)
        out.append(
            RankSeries(
                rank=int(r),
                step=s["step"][keep],
                dur_ns=s["dur_ns"][keep],
                own_ns=s["dur_ns"][keep] - comm,
                gc_ns=np.nan_to_num(s["gc_ns"][keep], nan=0.0),
                phases={c: s[c][keep] for c in PHASE_COLUMNS},
                excluded=int(sel.size - keep.size),
                warmup=w,
                tagged=own_tags,
            )
        )
    return out


#: interquartile range -> standard deviation, for normal noise (IQR = 1.349 sigma)
IQR_TO_SIGMA = 1 / 1.349


def noise_scale(x: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Robust noise: the interquartile range over 1.349 (a standard deviation for normal noise).
    Not the median absolute deviation, which is 0 for a short two-valued series."""
    q1, q3 = np.percentile(x, [25.0, 75.0], axis=axis)  # step times: never NaN
    return np.asarray((q3 - q1) * IQR_TO_SIGMA)


def rolling_median(x: np.ndarray, window: int, min_history: int) -> tuple[np.ndarray, np.ndarray]:
    """``med[i]`` = median of ``x[max(0, i - window):i]`` (the steps before i) and ``noise[i]`` =
    their ``noise_scale``; NaN while fewer than ``min_history`` steps precede."""
    n = x.size
    med = np.full(n, np.nan)
    noise = np.full(n, np.nan)
    for i in range(min_history, min(window, n)):
        med[i] = np.median(x[:i])
        noise[i] = noise_scale(x[:i])
    if n > window:
        view = np.lib.stride_tricks.sliding_window_view(x[:-1], window)
        med[window:] = np.median(view, axis=1)
        noise[window:] = noise_scale(view, axis=1)
    return med, noise
