"""Rules over an analysis -> findings, largest estimated saving first.

Per rank, each rule's conditions are checked against the rank's signals (``signals.py``). A rule
that holds on several ranks is one finding: its ``ranks`` are all of them, its evidence and saving
those of the median one (ranks sorted by the saving's basis; the lower middle of an even count).
Stragglers (several ranks) come from the cluster view, one finding per slow rank, with the cause
on that rank. The saving of a rule is ``fraction x basis`` (``data/advisor_rules.yaml``), per
step; of a straggler, fractions of the what-if saving of the cluster view (``stragglers.py``).
No finding is an answer: nothing in the trace crosses a rule's thresholds.
"""

from __future__ import annotations

import string
from typing import Any

from ..analysis.cluster.findings import SMALL_MESSAGE_BYTES
from ..analysis.cluster.results import (
    AllToAllImbalanceFinding,
    LowBandwidthFinding,
    SmallMessagesFinding,
    StragglerFinding,
)
from ..analysis.results import Analysis
from ..analysis.steps.fusion import Fusion
from .finding import NO_SAVING, Finding, Saving
from .rules import Card, Rule, RuleSet, load_rules
from .signals import Signals, rank_signals


class _Fields(string.Formatter):
    """Title fields from the signals; a missing one shows as ``?`` (titles are text, never code)."""

    def get_value(self, key: int | str, args: Any, kwargs: Any) -> Any:
        return kwargs.get(str(key), float("nan"))

    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, float) and value != value:
            return "?"
        return super().format_field(value, format_spec)


def _title(template: str, values: dict[str, Any]) -> str:
    with_ms = {**values, **{k[:-3] + "_ms": v / 1e6 for k, v in values.items() if k.endswith("_ns")}}
    return _Fields().format(template, **with_ms)


def advise(a: Analysis, rules: RuleSet | None = None) -> tuple[Finding, ...]:
    """The findings of ``a``, largest mid saving first (then by id)."""
    rules = rules if rules is not None else load_rules()
    signals = {r.rank: s for r in a.ranks if (s := rank_signals(r)) is not None}
    labels = {r.rank: _labels(r) for r in a.ranks}
    out = [f for rule in rules.rules if (f := _evaluate(rule, signals, labels)) is not None]
    out += _stragglers(a, rules, signals)
    out += _cluster_comm(a, rules, signals)
    return tuple(sorted(out, key=lambda f: (-f.saving.mid_ns, f.id, f.ranks)))


def _labels(r: Any) -> dict[str, str]:
    fusion = r.extras.get("fusion")
    chains = ", ".join(p.name for p in fusion.patterns) if isinstance(fusion, Fusion) else ""
    diag = r.mfu_diagnosis
    failing = "; ".join(c.hint for c in diag.checks if not c.ok) if diag is not None else ""
    return {
        "top_kernel": r.top_kernels[0].name if r.top_kernels else "",
        "fusion_chains": chains,
        "mfu_verdict": diag.verdict if diag is not None else "",
        "mfu_next": f"check: {failing}" if failing else "no check of its band fails",
    }


def _evaluate(rule: Rule, signals: dict[int, Signals], labels: dict[int, dict[str, str]]) -> Finding | None:
    fired = [
        (rank, s)
        for rank, s in signals.items()
        if all(c.holds(s.get(c.signal)) for c in rule.when) and not any(c.holds(s.get(c.signal)) for c in rule.unless)
    ]
    if not fired:
        return None
    fired.sort(key=lambda rs: (rs[1].get(rule.saving.basis, 0.0), rs[0]))
    rank, s = fired[(len(fired) - 1) // 2]
    m = rule.saving
    saving = NO_SAVING if m.method == "none" else Saving.scaled(s.get(m.basis, 0.0), m.fractions)
    return Finding(
        id=rule.id,
        category=rule.category,
        title=_title(rule.title, {**s, **labels.get(rank, {})}),
        ranks=tuple(sorted(r for r, _ in fired)),
        evidence={k: round(s[k], 6) for k in rule.evidence if k in s},
        cause=rule.cause,
        actions=rule.actions,
        saving=saving,
        saving_method=m.method,
        confidence=rule.confidence,
        step_ns=s["step_ns"],
        group=rule.group,
    )


def _stragglers(a: Analysis, rules: RuleSet, signals: dict[int, Signals]) -> list[Finding]:
    if a.cluster is None:
        return []
    by_cause: dict[str, Card] = {s.key: s for s in rules.stragglers}
    out = []
    for f in a.cluster.findings:
        if not isinstance(f, StragglerFinding) or f.cause not in by_cause:
            continue  # an unexplained straggler has no cause to act on: the cluster table shows it
        sr = by_cause[f.cause]
        step = signals.get(f.rank, {}).get("step_ns", 0.0)
        if f.cause != "link" and f.excess_ns < rules.straggler_min_excess_ratio * step:
            continue
        values = {"rank": f.rank, "saving_ns": float(f.saving_ns), "excess_ns": float(f.excess_ns), "score": f.score}
        out.append(
            Finding(
                id=f"straggler.{sr.category}",
                category=sr.category,
                title=_title(sr.title, values),
                ranks=(f.rank,),
                evidence={
                    "score": round(f.score, 3),
                    "excess_ns": float(f.excess_ns),
                    "what_if_saving_ns": float(f.saving_ns),
                },
                cause=sr.explanation,
                actions=sr.actions,
                saving=Saving.scaled(f.saving_ns, sr.fractions),
                saving_method=sr.method,
                confidence="medium",
                step_ns=step,
                group="straggler",
            )
        )
    return out


def _slow_transfer_ns(a: Analysis, ratio: float) -> float:
    """Per steady step, of the median rank: the transfer time of its collectives of 1 MiB or more
    under ``ratio`` of their link's bus bandwidth, above what that bandwidth would take
    (``transfer x (1 - busbw / peak)``); instances outside every step are left out. A ceiling: the
    part of it hidden under compute would save nothing."""
    assert a.cluster is not None
    per_rank: dict[int, float] = {}
    for x in a.cluster.collectives:
        slow = x.busbw_gbps is not None and x.peak_gbps and x.busbw_gbps < ratio * x.peak_gbps
        if not slow or x.bytes < SMALL_MESSAGE_BYTES or x.step < 0:
            continue
        assert x.busbw_gbps is not None and x.peak_gbps
        for r, t in x.ranks.items():
            per_rank[r] = per_rank.get(r, 0.0) + t.transfer_ns * (1.0 - x.busbw_gbps / x.peak_gbps)
    steps = {r.rank: sum(1 for s in r.steps if not s.warmup) for r in a.ranks}
    values = sorted(v / max(steps.get(r, 1), 1) for r, v in per_rank.items())
    return values[(len(values) - 1) // 2] if values else 0.0


def _cluster_comm(a: Analysis, rules: RuleSet, signals: dict[int, Signals]) -> list[Finding]:
    """The cluster view's small-message and low-bandwidth findings, worded by ``rules.cluster``."""
    if a.cluster is None:
        return []
    by_kind = {c.key: c for c in rules.cluster}
    steps = sorted(s["step_ns"] for s in signals.values())
    step = steps[(len(steps) - 1) // 2] if steps else 0.0
    out = []
    for f in a.cluster.findings:
        if isinstance(f, SmallMessagesFinding) and "small_messages" in by_kind:
            cr, basis = by_kind["small_messages"], 0.0
            values = {"small": float(f.small), "total": float(f.total)}
        elif isinstance(f, AllToAllImbalanceFinding) and "all_to_all_imbalance" in by_kind:
            cr, basis = by_kind["all_to_all_imbalance"], f.transfer_ns * (1.0 - 1.0 / f.median_ratio)
            values = {
                "imbalanced": float(f.instances),
                "total": float(f.total),
                "median_ratio": f.median_ratio,
                "busiest_rank": float(f.busiest_rank),
                "transfer_ns": f.transfer_ns,
            }
        elif isinstance(f, LowBandwidthFinding) and "low_bandwidth" in by_kind:
            cr, basis = by_kind["low_bandwidth"], _slow_transfer_ns(a, f.ratio)
            values = {"count": float(f.count), "median_busbw_gbps": f.median_busbw_gbps}
        else:
            continue
        out.append(
            Finding(
                id=f"communication.{cr.key}",
                category=cr.category,
                title=_title(cr.title, values),
                ranks=tuple(sorted(r.rank for r in a.ranks)),
                evidence={k: round(v, 6) for k, v in values.items()}
                | ({"slow_transfer_ns": round(basis, 1)} if cr.key == "low_bandwidth" else {}),
                cause=cr.explanation,
                actions=cr.actions,
                saving=Saving.scaled(basis, cr.fractions),
                saving_method=cr.method,
                confidence="low",
                step_ns=step,
                group="exposed_comm",
            )
        )
    return out
