"""Stragglers: on each step every rank's own time (its step minus the time it waited in
collectives) against the median of its peers' on the same step. A rank over ``straggler_ratio``
(and over ``noise_mads`` x the step-to-step noise of the ratios) for ``persist_k`` of ``persist_m``
steps is a straggler from the first of them. The waiting peers
of a slow rank are not flagged: their long collectives are subtracted. Without collective timing
(level < 2) own time is the step time, equal across ranks that synchronize every step, so nothing
is flagged there (the report says so).

Also the worst ranks by median own-time ratio over the last ``window`` common steps, always listed,
with the phase that holds most of their excess.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..config import DetectConfig
from .anomaly import Anomaly, episodes, main_cause
from .series import PHASE_COLUMNS, RankSeries


@dataclass(frozen=True, kw_only=True)
class Grid:
    """Ranks x common steps: ``own[r, t]``, ``phase[name][r, t]`` (steps every rank kept)."""

    ranks: np.ndarray
    steps: np.ndarray
    own: np.ndarray
    phases: dict[str, np.ndarray]


def grid(series: list[RankSeries]) -> Grid | None:
    if len(series) < 2:
        return None
    common = series[0].step
    for s in series[1:]:
        common = np.intersect1d(common, s.step, assume_unique=True)
    if common.size == 0:
        return None
    rows = [np.searchsorted(s.step, common) for s in series]
    own = np.stack([s.own_ns[i] for s, i in zip(series, rows)])
    phases = {}
    for c in PHASE_COLUMNS:
        phases[c] = np.stack([s.phases[c][i] for s, i in zip(series, rows)])
    if not np.isnan(phases["backward_ns"]).all():  # the DDP wait sits in backward: take it out
        comm = np.stack([(s.dur_ns - s.own_ns)[i] for s, i in zip(series, rows)])
        phases["backward_ns"] = phases["backward_ns"] - comm
    return Grid(ranks=np.array([s.rank for s in series]), steps=common, own=own, phases=phases)


def peer_median(x: np.ndarray) -> np.ndarray:
    """``out[r, t]`` = median over the other ranks of ``x[:, t]`` (over all ranks beyond 16)."""
    n = x.shape[0]
    if n > 16:
        return np.broadcast_to(np.nanmedian(x, axis=0), x.shape)
    out = np.empty_like(x)
    for r in range(n):
        out[r] = np.nanmedian(np.delete(x, r, axis=0), axis=0)
    return out


def step_noise(ratio: np.ndarray) -> float:
    """The step-to-step noise of the ratios: 1.4826 x the median absolute difference between a
    rank's consecutive ratios, over sqrt(2) (a standard deviation for normal noise). Differences,
    not spread around a level: a straggler's lasting shift is one difference, so it does not raise
    the noise it is judged against, even with two ranks."""
    if ratio.shape[1] < 2:
        return 0.0
    d = np.abs(np.diff(ratio, axis=1))
    return float(1.4826 * np.nanmedian(d) / np.sqrt(2.0)) if np.isfinite(d).any() else 0.0


def cause_of(g: Grid, r: int, cols: np.ndarray) -> tuple[str, dict[str, float]]:
    """The phase whose excess over the peers' median holds most of rank ``r``'s own excess."""
    excess = float(np.sum(g.own[r, cols] - peer_median(g.own)[r, cols]))
    shares: dict[str, float] = {}
    if excess <= 0:
        return "unknown", shares
    for c, x in g.phases.items():
        if np.isnan(x[r, cols]).all():
            continue
        rise = np.nansum(x[r, cols] - peer_median(x)[r, cols])
        shares[c.removesuffix("_ns")] = round(float(rise) / excess, 3)
    return main_cause(shares), shares


def detect(series: list[RankSeries], cfg: DetectConfig) -> tuple[list[Anomaly], list[dict[str, object]]]:
    g = grid(series)
    if g is None:
        return [], []
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = g.own / peer_median(g.own) - 1.0
    noise = step_noise(ratio)
    limit = max(cfg.straggler_ratio, cfg.noise_mads * noise)
    out = []
    for i, r in enumerate(g.ranks):
        for ep in episodes(ratio[i] > limit, cfg.persist_k, cfg.persist_m):
            first, last = int(g.steps[ep.first]), int(g.steps[ep.last])
            excess = float(np.median(ratio[i, ep.slow]))
            cause, shares = cause_of(g, i, ep.slow)
            where = f", in {cause}" if cause != "unknown" else ""
            out.append(
                Anomaly(
                    kind="straggler",
                    rank=int(r),
                    first_step=first,
                    last_step=last,
                    flagged_at_step=int(g.steps[ep.flagged]),
                    steps=int(ep.slow.size),
                    excess_ratio=excess,
                    cause=cause,
                    message=f"rank {r}'s own time is {excess:.0%} over its peers' median{where}, steps {first}-{last}",
                    evidence={
                        "own_ms": round(float(np.median(g.own[i, ep.slow])) / 1e6, 3),
                        "peers_own_ms": round(float(np.median(peer_median(g.own)[i, ep.slow])) / 1e6, 3),
                        "explained_share": shares,
                        "threshold_ratio": round(limit, 4),
                    },
                )
            )
    return out, worst(g, ratio, cfg)


def worst(g: Grid, ratio: np.ndarray, cfg: DetectConfig) -> list[dict[str, object]]:
    cols = np.arange(max(0, g.steps.size - cfg.window), g.steps.size)
    med = np.nanmedian(ratio[:, cols], axis=1)
    order = np.argsort(-med, kind="stable")[: cfg.worst_ranks]
    rows = []
    for i in order:
        cause, _ = cause_of(g, int(i), cols)
        rows.append({"rank": int(g.ranks[i]), "own_over_peers_ratio": round(float(med[i]), 4), "cause": cause})
    return rows


def with_collectives(a: Anomaly, coll: dict[str, np.ndarray]) -> Anomaly:
    """A straggler's evidence in the collectives (level 2): per kind, the median time per step the
    straggler and its peers spent in it over the episode. The peers' is the longer: they wait for
    it there. The kind where they wait most is named in the message."""
    if not coll["rank"].size:
        return a
    sel = (coll["step"] >= a.first_step) & (coll["step"] <= a.last_step)
    per_op: dict[str, dict[str, float]] = {}
    for op in np.unique(coll["op"][sel]):
        m = sel & (coll["op"] == op)
        mine, peers = coll["host_ns"][m & (coll["rank"] == a.rank)], coll["host_ns"][m & (coll["rank"] != a.rank)]
        if mine.size and peers.size:
            per_op[str(op)] = {
                "rank_ms": round(float(np.median(mine)) / 1e6, 3),
                "peers_ms": round(float(np.median(peers)) / 1e6, 3),
            }
    if not per_op:
        return a
    op, t = max(per_op.items(), key=lambda kv: kv[1]["peers_ms"] - kv[1]["rank_ms"])
    msg = a.message
    if t["peers_ms"] > t["rank_ms"]:
        msg += f"; its peers wait for it in {op} ({t['peers_ms']:.1f} ms per step against {t['rank_ms']:.1f})"
    return replace(a, message=msg, evidence={**a.evidence, "collectives": per_op})
