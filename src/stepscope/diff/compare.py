"""Two runs -> deltas, a significance test and a verdict.

Steps inside a trace are repeats of the same work, so they are the samples: each steady step's time
(the median over the ranks, which run in lockstep), compared with a two-sided Mann-Whitney U test (normal approximation with the
tie correction; no distribution assumed). The verdict:

- ``inconclusive``: fewer than ``MIN_STEPS`` steady steps on a side, so no test can be trusted;
- ``slower`` / ``faster``: the test's p-value is under ``ALPHA`` *and* the medians differ by at least
  ``NOISE_FLOOR_RATIO`` (asv's rule: a change must be both significant and large enough);
- ``same``: otherwise. A run diffed with itself is ``same`` (p = 1, no difference).

Breakdown deltas are of the means per step, so they add up to the mean step delta exactly. Kernels
are matched by name (the top kernels of each rank); across renamed kernels (another vendor or library
version) by category, whose deltas add up to the change in kernel time, and by the framework op that
launched them with its input shapes and dtype (the roofline's groups), which do not change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .profile import COMPONENTS, RunProfile

MIN_STEPS = 3
ALPHA = 0.01
NOISE_FLOOR_RATIO = 0.02

Verdict = Literal["slower", "faster", "same", "inconclusive"]


@dataclass(frozen=True, kw_only=True)
class Change:
    """One name or category: per step, ns, on each side (0 where absent) and the kind of change."""

    name: str
    category: str
    a_ns: float
    b_ns: float
    kind: Literal["added", "removed", "slower", "faster", "same"]

    @property
    def delta_ns(self) -> float:
        return self.b_ns - self.a_ns


@dataclass(frozen=True, kw_only=True)
class RunDiff:
    a: str
    b: str
    verdict: Verdict
    reason: str
    a_steps: int
    b_steps: int
    a_median_ns: float
    b_median_ns: float
    a_mean_ns: float
    b_mean_ns: float
    p_value: float | None  # None: too few steps for the test
    components: dict[str, tuple[float, float]]  # COMPONENTS -> (a, b) mean ns per step
    categories: tuple[Change, ...]  # kernel time by category, largest |delta| first
    kernels: tuple[Change, ...]  # top kernels by name, largest |delta| first
    ops: tuple[Change, ...]  # framework ops by name, input shapes and dtype (kernel time they launched)
    ranks: dict[int, tuple[float, float]]  # rank -> (a, b) median step ns, ranks on both sides
    findings_gone: tuple[str, ...]
    findings_new: tuple[str, ...]

    @property
    def delta_ratio(self) -> float:
        """Relative change of the median step (B over A, minus 1)."""
        return self.b_median_ns / self.a_median_ns - 1.0 if self.a_median_ns > 0 else 0.0


def mann_whitney_p(x: np.ndarray, y: np.ndarray) -> float:
    """Two-sided p-value of the Mann-Whitney U test, normal approximation with tie correction and
    continuity correction; 1.0 when every value is equal."""
    n1, n2 = x.size, y.size
    if n1 == 0 or n2 == 0:
        return 1.0
    allv = np.concatenate([x, y]).astype(np.float64)
    order = np.argsort(allv, kind="stable")
    ranks = np.empty(allv.size, np.float64)
    sv = allv[order]
    uniq, first, counts = np.unique(sv, return_index=True, return_counts=True)
    avg = first + (counts + 1) / 2.0  # 1-based average rank of each tie group
    ranks[order] = np.repeat(avg, counts)
    u1 = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    tie = float(((counts**3) - counts).sum())
    var = n1 * n2 / 12.0 * ((n + 1) - tie / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u1 - n1 * n2 / 2.0) - 0.5) / math.sqrt(var)
    return float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0))))


def _samples(p: RunProfile) -> np.ndarray:
    """One sample per steady step: the median over the ranks of that step (ranks run the same steps
    in lockstep, so 64 ranks x 10 steps are 10 samples, not 640)."""
    n = max((len(r.steps) for r in p.ranks), default=0)
    per_step = [[r.steps[k].step_ns for r in p.ranks if k < len(r.steps)] for k in range(n)]
    return np.array([float(np.median(v)) for v in per_step if v], dtype=np.float64)


def _verdict(x: np.ndarray, y: np.ndarray) -> tuple[Verdict, str, float | None]:
    if x.size < MIN_STEPS or y.size < MIN_STEPS:
        return "inconclusive", f"fewer than {MIN_STEPS} steady steps on a side ({x.size}, {y.size})", None
    p = mann_whitney_p(x, y)
    ma, mb = float(np.median(x)), float(np.median(y))
    rel = mb / ma - 1.0 if ma > 0 else 0.0
    if p < ALPHA and abs(rel) >= NOISE_FLOOR_RATIO:
        word: Verdict = "slower" if rel > 0 else "faster"
        return word, f"median step {rel:+.1%} (p = {p:.2g}, {x.size} and {y.size} steps)", p
    why = "not significant" if p >= ALPHA else f"under the {NOISE_FLOOR_RATIO:.0%} noise floor"
    return "same", f"median step {rel:+.1%}, {why} (p = {p:.2g}, {x.size} and {y.size} steps)", p


def _mean_parts(p: RunProfile) -> dict[str, float]:
    rows = [s for r in p.ranks for s in r.steps]
    return {c: (sum(s.parts[c] for s in rows) / len(rows) if rows else 0.0) for c in COMPONENTS}


def _changes(a: dict[str, tuple[str, float]], b: dict[str, tuple[str, float]]) -> tuple[Change, ...]:
    out = []
    for name in sorted(set(a) | set(b)):
        ca, va = a.get(name, ("", 0.0))
        cb, vb = b.get(name, ("", 0.0))
        if name not in a:
            kind = "added"
        elif name not in b:
            kind = "removed"
        elif abs(vb - va) <= NOISE_FLOOR_RATIO * max(va, vb):
            kind = "same"
        else:
            kind = "slower" if vb > va else "faster"
        out.append(Change(name=name, category=cb or ca, a_ns=va, b_ns=vb, kind=kind))  # type: ignore[arg-type]
    return tuple(sorted(out, key=lambda c: (-abs(c.delta_ns), c.name)))


def _per_step(p: RunProfile, get: str) -> dict[str, tuple[str, float]]:
    """Kernel time per step (summed over ranks, divided by their steps), by kernel name
    (``kernels``), category, or framework op and shapes (``ops``: over all the trace's steps)."""
    n = sum(len(r.steps) for r in p.ranks) or 1
    if get == "ops":
        n = sum(r.all_steps for r in p.ranks) or 1
    out: dict[str, tuple[str, float]] = {}
    for r in p.ranks:
        if get == "kernels":
            items = list(r.kernels.items())
        elif get == "ops":
            items = list(r.ops.items())
        else:
            items = [(c, (c, v)) for c, v in r.kernel_categories.items()]
        for name, (cat, v) in items:
            out[name] = (cat, out.get(name, (cat, 0.0))[1] + v / n)
    return out


def compare(a: RunProfile, b: RunProfile) -> RunDiff:
    x, y = _samples(a), _samples(b)
    verdict, reason, p = _verdict(x, y)
    pa, pb = _mean_parts(a), _mean_parts(b)
    ra = {r.rank: float(np.median([s.step_ns for s in r.steps])) for r in a.ranks if r.steps}
    rb = {r.rank: float(np.median([s.step_ns for s in r.steps])) for r in b.ranks if r.steps}
    return RunDiff(
        a=a.source,
        b=b.source,
        verdict=verdict,
        reason=reason,
        a_steps=int(x.size),
        b_steps=int(y.size),
        a_median_ns=float(np.median(x)) if x.size else 0.0,
        b_median_ns=float(np.median(y)) if y.size else 0.0,
        a_mean_ns=float(x.mean()) if x.size else 0.0,
        b_mean_ns=float(y.mean()) if y.size else 0.0,
        p_value=p,
        components={c: (pa[c], pb[c]) for c in COMPONENTS},
        categories=_changes(_per_step(a, "categories"), _per_step(b, "categories")),
        kernels=_changes(_per_step(a, "kernels"), _per_step(b, "kernels")),
        ops=_changes(_per_step(a, "ops"), _per_step(b, "ops")),
        ranks={k: (ra[k], rb[k]) for k in sorted(set(ra) & set(rb))},
        findings_gone=tuple(sorted(set(a.findings) - set(b.findings))),
        findings_new=tuple(sorted(set(b.findings) - set(a.findings))),
    )
