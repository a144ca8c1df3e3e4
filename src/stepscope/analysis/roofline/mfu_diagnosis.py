"""The MFU diagnosis tree: which figures decide where a run's MFU goes.

Bands (median step MFU): < 30% check communication, data loading, host-bound launches and the
share of time in memory/latency-bound ops first; 30-40% check overlap
and bubbles (idle); 40-50% is normal for large dense training, check recompute and the ops
furthest from their roofline; > 50% is excellent; above 100% is impossible, so the model FLOPs
per step given are wrong (too many tokens per step per rank, the wrong model or MFU dtype). Each
check names the JSON figure it reads, its value, the threshold and whether it passes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..context import RankContext
from ..steps.results import StepBreakdown
from .phases import StepPhases
from .results import Roofline


@dataclass(frozen=True)
class Check:
    figure: str  # the JSON field this check reads
    value: float
    threshold: float
    ok: bool
    hint: str
    label: str = ""  # the figure in words
    per_step_ns: float | None = None  # the figure as time per step, when it is a share of the step
    higher_is_bad: bool = True  # the threshold is a ceiling (else a floor)


@dataclass(frozen=True)
class MfuDiagnosis:
    mfu: float
    band: str
    verdict: str
    checks: tuple[Check, ...]


def _share(steps: tuple[StepBreakdown, ...], get: Callable[[StepBreakdown], int]) -> float:
    total = sum(s.step_time_ns for s in steps)
    return sum(get(s) for s in steps) / total if total else 0.0


def compute(ctx: RankContext) -> MfuDiagnosis | None:
    """Reads the ``roofline`` and ``phases`` results (listed before it in the registry)."""
    phases: tuple[StepPhases, ...] = ctx.result("phases", tuple)
    return diagnose(ctx.steps, phases, ctx.result("roofline", Roofline))


# per band: (name, verdict, checks); a check: (figure as the JSON names it, the key in ``_figures``,
# threshold, True when a value over the threshold is bad, hint)
_Rule = tuple[str, str, float, bool, str]
_LOW: tuple[_Rule, ...] = (
    (
        "exposed_comm_ns / step_time_ns",
        "exposed_comm",
        0.10,
        True,
        "communication not hidden by compute: overlap, bucket, or reduce it",
    ),
    (
        "cpu.dataloader_ns / step_time_ns",
        "dataloader",
        0.05,
        True,
        "input pipeline on the critical path: more workers, prefetch, pinned memory",
    ),
    (
        "idle_causes.host_bound_ns / step_time_ns",
        "host_bound",
        0.10,
        True,
        "host cannot launch fast enough: CUDA graphs, torch.compile, fewer syncs",
    ),
    (
        "roofline memory/latency-bound dur_ns / kernel time",
        "small_ops",
        0.30,
        True,
        "much time in memory- or latency-bound ops (elementwise, norms, copies): fuse them (torch.compile, fused kernels)",
    ),
)
_FAIR: tuple[_Rule, ...] = (
    (
        "overlapped_comm_ns / comm_ns",
        "overlap",
        0.70,
        False,
        "communication overlap below 70%: overlap grads with backward, prefetch params",
    ),
    (
        "idle_ns / step_time_ns",
        "idle",
        0.05,
        True,
        "bubbles (pipeline or sync): more micro-batches, interleaved schedule, fewer syncs",
    ),
)
_NORMAL: tuple[_Rule, ...] = (
    (
        "recompute_ns / step_time_ns",
        "recompute",
        0.15,
        True,
        "recompute costs time: selective instead of full activation checkpointing",
    ),
    (
        "roofline[0].time_lost_ns / step_time_ns",
        "worst_op",
        0.10,
        True,
        "the op furthest from its roofline: see the roofline table",
    ),
)
_IMPOSSIBLE: tuple[_Rule, ...] = (
    (
        "mfu",
        "mfu",
        1.0,
        True,
        "check --model-flops, or --tokens-per-step (per rank, per step) and --model, and --mfu-dtype",
    ),
)


#: each figure in words, and those that are shares of the step (shown also as ms per step)
_WORDS = {
    "exposed_comm": "communication not hidden by compute",
    "dataloader": "data loading on the host",
    "host_bound": "device idle waiting for the host to launch",
    "small_ops": "kernel time in memory- or latency-bound ops",
    "overlap": "communication overlapped with compute",
    "idle": "device idle",
    "recompute": "recomputation (activation checkpointing)",
    "worst_op": "time the op furthest from its roofline loses",
    "mfu": "MFU",
}
_SHARE_OF_STEP = frozenset(("exposed_comm", "dataloader", "host_bound", "idle", "recompute", "worst_op"))


def _band(mfu: float) -> tuple[str, str, tuple[_Rule, ...]]:
    if mfu < 0.30:
        return "<30%", "low: look for time the device is not computing", _LOW
    if mfu < 0.40:
        return "30-40%", "fair: hide what remains", _FAIR
    if mfu < 0.50:
        return "40-50%", "normal for large dense training", _NORMAL
    if mfu <= 1.0:
        return ">50%", "excellent", ()
    # more FLOPs than the device can do: the input, not the run
    return ">100%", "impossible: the model FLOPs per step are too high for this run", _IMPOSSIBLE


def _figures(
    steps: tuple[StepBreakdown, ...], phases: tuple[StepPhases, ...], roof: Roofline | None, mfu: float
) -> dict[str, float]:
    total = max(sum(s.step_time_ns for s in steps), 1)
    comm = sum(s.comm_ns for s in steps)
    kernel_ns = roof.kernel_time_ns if roof else 0
    return {
        "mfu": mfu,
        "exposed_comm": _share(steps, lambda s: s.exposed_comm_ns),
        "dataloader": _share(steps, lambda s: s.cpu.dataloader_ns),
        "host_bound": _share(steps, lambda s: s.idle_causes.host_bound_ns),
        "idle": _share(steps, lambda s: s.idle_ns),
        "overlap": sum(s.overlapped_comm_ns for s in steps) / comm if comm else 1.0,
        "recompute": sum(p.recompute_ns for p in phases) / total,
        "worst_op": max((g.time_lost_ns for g in roof.groups), default=0) / total if roof else 0.0,
        "small_ops": (
            sum(g.dur_ns for g in roof.groups if g.bound in ("memory", "latency")) / kernel_ns
            if (roof and kernel_ns)
            else 0.0
        ),
    }


def diagnose(
    steps: tuple[StepBreakdown, ...], phases: tuple[StepPhases, ...], roof: Roofline | None
) -> MfuDiagnosis | None:
    mfus = sorted(f.mfu for f in roof.steps if f.mfu is not None) if roof else []
    if not mfus or not steps:
        return None
    mfu = mfus[len(mfus) // 2]
    band, verdict, rules = _band(mfu)
    figures = _figures(steps, phases, roof, mfu)
    checks = []
    mean_step = sum(s.step_time_ns for s in steps) / len(steps)
    for figure, key, threshold, higher_is_bad, hint in rules:
        value = figures[key]
        ok = value <= threshold if higher_is_bad else value >= threshold
        per_step = value * mean_step if key in _SHARE_OF_STEP else None
        checks.append(Check(figure, value, threshold, ok, hint, _WORDS[key], per_step, higher_is_bad))
    return MfuDiagnosis(mfu=mfu, band=band, verdict=verdict, checks=tuple(checks))
