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


def diagnose(
    steps: tuple[StepBreakdown, ...], phases: tuple[StepPhases, ...], roof: Roofline | None
) -> MfuDiagnosis | None:
    mfus = sorted(f.mfu for f in roof.steps if f.mfu is not None) if roof else []
    if not mfus or not steps:
        return None
    mfu = mfus[len(mfus) // 2]
    exposed_comm = _share(steps, lambda s: s.exposed_comm_ns)
    dataloader = _share(steps, lambda s: s.cpu.dataloader_ns)
    host_bound = _share(steps, lambda s: s.idle_causes.host_bound_ns)
    idle = _share(steps, lambda s: s.idle_ns)
    comm = sum(s.comm_ns for s in steps)
    overlap = sum(s.overlapped_comm_ns for s in steps) / comm if comm else 1.0
    rec = sum(p.recompute_ns for p in phases) / max(sum(s.step_time_ns for s in steps), 1)
    worst = (
        max((g.time_lost_ns for g in roof.groups), default=0) / max(sum(s.step_time_ns for s in steps), 1)
        if roof
        else 0.0
    )
    kernel_ns = roof.kernel_time_ns if roof else 0
    small_ops = (
        sum(g.dur_ns for g in roof.groups if g.bound in ("memory", "latency")) / kernel_ns
        if (roof and kernel_ns)
        else 0.0
    )
    checks: list[Check] = []

    def check(figure: str, value: float, threshold: float, hint: str, higher_is_bad: bool = True) -> None:
        ok = value <= threshold if higher_is_bad else value >= threshold
        checks.append(Check(figure, value, threshold, ok, hint))

    if mfu < 0.30:
        band, verdict = "<30%", "low: look for time the device is not computing"
        check(
            "exposed_comm_ns / step_time_ns",
            exposed_comm,
            0.10,
            "communication not hidden by compute: overlap, bucket, or reduce it",
        )
        check(
            "cpu.dataloader_ns / step_time_ns",
            dataloader,
            0.05,
            "input pipeline on the critical path: more workers, prefetch, pinned memory",
        )
        check(
            "idle_causes.host_bound_ns / step_time_ns",
            host_bound,
            0.10,
            "host cannot launch fast enough: CUDA graphs, torch.compile, fewer syncs",
        )
        check(
            "roofline memory/latency-bound dur_ns / kernel time",
            small_ops,
            0.30,
            "much time in memory- or latency-bound ops (elementwise, norms, copies): fuse them (torch.compile, fused kernels)",
        )
    elif mfu < 0.40:
        band, verdict = "30-40%", "fair: hide what remains"
        check(
            "overlapped_comm_ns / comm_ns",
            overlap,
            0.70,
            "communication overlap below 70%: overlap grads with backward, prefetch params",
            higher_is_bad=False,
        )
        check(
            "idle_ns / step_time_ns",
            idle,
            0.05,
            "bubbles (pipeline or sync): more micro-batches, interleaved schedule, fewer syncs",
        )
    elif mfu < 0.50:
        band, verdict = "40-50%", "normal for large dense training"
        check(
            "recompute_ns / step_time_ns",
            rec,
            0.15,
            "recompute costs time: selective instead of full activation checkpointing",
        )
        check(
            "roofline[0].time_lost_ns / step_time_ns",
            worst,
            0.10,
            "the op furthest from its roofline: see the roofline table",
        )
    elif mfu <= 1.0:
        band, verdict = ">50%", "excellent"
    else:  # more FLOPs than the device can do: the input, not the run
        band, verdict = ">100%", "impossible: the model FLOPs per step are too high for this run"
        check(
            "mfu",
            mfu,
            1.0,
            "check --model-flops, or --tokens-per-step (per rank, per step) and --model, and --mfu-dtype",
        )
    return MfuDiagnosis(mfu=mfu, band=band, verdict=verdict, checks=tuple(checks))
