"""Fluctuation: steps over ``fluctuation_ratio`` above the rolling median of the rank's previous
``window`` steps (and over ``noise_mads`` x the window's noise), ``persist_k`` of ``persist_m`` in
a row. Each episode names what explains its excess: GC pauses, one of the phases (data, forward,
backward, optimizer), else a tagged step (checkpoint, eval) just before or inside it
(``after checkpoint``), else ``unknown``."""

from __future__ import annotations

import numpy as np

from ..config import DetectConfig
from .anomaly import Anomaly, episodes, main_cause
from .series import PHASE_COLUMNS, RankSeries, rolling_median


def explain(
    excess_ns: np.ndarray, gc_ns: np.ndarray, phases: dict[str, np.ndarray], sel: np.ndarray
) -> tuple[str, dict[str, float]]:
    """Shares of the slow steps' summed excess explained by GC pauses and by each phase's rise
    over its median on the other steps; the largest share of 0.5 or more is the cause."""
    total = float(excess_ns[sel].sum())
    shares: dict[str, float] = {}
    if total <= 0:
        return "unknown", shares
    shares["gc"] = float(np.minimum(gc_ns[sel], excess_ns[sel]).sum()) / total
    rest = np.ones(excess_ns.size, dtype=bool)
    rest[sel] = False
    for col in PHASE_COLUMNS:
        x = phases[col]
        if np.isnan(x[sel]).all() or not rest.any() or np.isnan(x[rest]).all():
            continue
        rise = np.clip(x[sel] - np.nanmedian(x[rest]), 0, None)
        shares[col.removesuffix("_ns")] = float(np.nansum(rise)) / total
    shares = {k: round(min(v, 1.0), 3) for k, v in shares.items()}
    return main_cause(shares), shares


def detect(series: RankSeries, cfg: DetectConfig) -> list[Anomaly]:
    d = series.dur_ns
    ref, noise = rolling_median(d, cfg.window, cfg.min_history)
    with np.errstate(invalid="ignore"):
        slow = (d > (1.0 + cfg.fluctuation_ratio) * ref) & (d - ref > cfg.noise_mads * noise)
    out = []
    for ep in episodes(slow, cfg.persist_k, cfg.persist_m):
        excess = np.nan_to_num(d - ref, nan=0.0)
        ratio = float(np.median(d[ep.slow] / ref[ep.slow]) - 1.0)
        cause, shares = explain(excess, series.gc_ns, series.phases, ep.slow)
        first, last = int(series.step[ep.first]), int(series.step[ep.last])
        near = {st: t for st, t in series.tagged.items() if first - cfg.persist_m <= st <= last}
        if cause == "unknown" and near:
            cause = "after " + near[min(near)].split(",")[0]
        out.append(
            Anomaly(
                kind="fluctuation",
                rank=series.rank,
                first_step=first,
                last_step=last,
                flagged_at_step=int(series.step[ep.flagged]),
                steps=int(ep.slow.size),
                excess_ratio=ratio,
                cause=cause,
                message=f"rank {series.rank}: {ep.slow.size} steps {ratio:.0%} over the rolling median, steps {first}-{last}"
                + (f"; {cause} explains most of it" if cause != "unknown" else ""),
                evidence={
                    "median_step_ms": round(float(np.median(ref[ep.slow])) / 1e6, 3),
                    "slow_step_ms": round(float(np.median(d[ep.slow])) / 1e6, 3),
                    "explained_share": shares,
                    "tagged_steps_nearby": {str(k): v for k, v in sorted(near.items())},
                },
            )
        )
    return out
