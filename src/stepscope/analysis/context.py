"""What every per-rank analysis reads: a :class:`RankContext`, built once per rank.

It holds the rank's events and prepared arrays (``rankdata``), its steps and the step accounting's
products, the hardware it is judged against (resolved once), its hardware counters, and the results of
the analyses listed before the one running (``registry.RANK_ANALYSES``). An analysis is a function
``compute(ctx) -> frozen result``; it reads the context and never a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import pyarrow as pa

from ..catalog import hardware
from ..catalog.hardware import Hardware
from ..notices import Notice
from ..trace.assemble import RankInfo
from ..trace.counters import CounterRange
from ..trace.memory import MemoryEvents
from .classify import Rules
from .config import AnalyzeConfig
from .extra import earlier_result
from .rankdata import RankData, build
from .roofline.costs import OpCosts, op_costs
from .roofline.results import HardwareInfo
from .steps.breakdown import Accounting, account
from .steps.idle import IdleGaps
from .steps.results import StepBreakdown
from .steps.windows import StepSpans, assign_device_work, find_steps, marker_candidates

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class RankInput:
    """One rank as read: its events and what its file held beside them."""

    info: RankInfo
    events: pa.Table
    comm_args: pa.Table | None = None  # collective side args (``FileRead.comm_args``)
    counters: tuple[CounterRange, ...] = ()  # CUPTI range-profiler counters
    memory: MemoryEvents | None = None  # allocator events (``trace/memory.py``)


@dataclass(frozen=True, kw_only=True)
class RankContext:
    config: AnalyzeConfig
    rules: Rules
    info: RankInfo
    events: pa.Table  # the rank's rows of the event table
    comm_args: pa.Table | None
    counters: tuple[CounterRange, ...]
    memory: MemoryEvents | None
    data: RankData
    spans: StepSpans
    dev_step: np.ndarray  # per device row: its step, -1 outside every step
    steps: tuple[StepBreakdown, ...]
    idle_gaps: IdleGaps
    dataloader_mask: np.ndarray  # over host rows: data-loader ranges
    optimizer_mask: np.ndarray  # over host rows: optimizer-step ranges
    device_busy_ns: int = 0  # union of all device work
    outside_steps_ns: int = 0  # the part of it outside every step window
    hardware: Hardware | None  # the catalog's device (``--hardware``, else detected from the trace)
    hardware_info: HardwareInfo | None  # what the report says about it
    costs: OpCosts  # FLOPs and bytes of the op instances and kernels
    earlier: Mapping[str, object] = field(default_factory=dict)  # results of the analyses run before, by name

    def result(self, name: str, kind: type[T]) -> T:
        """The result of the analysis ``name``, listed before the caller in the registry."""
        return earlier_result(self.earlier, name, kind)

    @property
    def peak_flops(self) -> float | None:
        """The device's peak FLOP/s at the MFU dtype."""
        return self.hardware_info.peak_tflops * 1e12 if self.hardware_info else None

    @property
    def hbm_bytes_per_s(self) -> float | None:
        return self.hardware_info.hbm_gbps * 1e9 if self.hardware_info else None


def build_context(unit: RankInput, cfg: AnalyzeConfig, rules: Rules) -> tuple[RankContext, list[Notice]]:
    """The rank's context, and the notices about it (step marker not found, no device work, device
    not in the catalog), in that order."""
    info = unit.info
    rd = build(info.rank, unit.events, rules, unit.comm_args)
    spans = find_steps(rd, cfg.step_marker)
    notices = _step_notices(info.rank, rd, spans, cfg)
    dev_step, windows = assign_device_work(rd, spans)
    acct = account(rd, spans, dev_step, windows, rules, cfg.skip_steps)
    notices += _accounting_notices(info.rank, acct, cfg)
    hw, hw_info, hw_notices = _hardware(info, rd, cfg)
    ctx = RankContext(
        config=cfg,
        rules=rules,
        info=info,
        events=unit.events,
        comm_args=unit.comm_args,
        counters=unit.counters,
        memory=unit.memory,
        data=rd,
        spans=spans,
        dev_step=dev_step,
        steps=acct.steps,
        idle_gaps=acct.idle_gaps,
        dataloader_mask=acct.dataloader_mask,
        optimizer_mask=acct.optimizer_mask,
        device_busy_ns=acct.device_busy_ns,
        outside_steps_ns=acct.outside_steps_ns,
        hardware=hw,
        hardware_info=hw_info,
        costs=op_costs(unit.events, rd, dev_step),
    )
    return ctx, notices + hw_notices


def _step_notices(rank: int, rd: RankData, spans: StepSpans, cfg: AnalyzeConfig) -> list[Notice]:
    out = []
    if cfg.step_marker and spans.source != f"marker:{cfg.step_marker}":
        out.append(Notice(f"step marker {cfg.step_marker!r} not found; using {spans.source}", rank=rank))
    if spans.source == "whole-trace":
        seen = marker_candidates(rd)
        hint = f"; recurring annotations here: {', '.join(f'{n!r} ({c}x)' for n, c in seen)}" if seen else ""
        out.append(
            Notice(
                f"no ProfilerStep#N annotations{' or marker' if cfg.step_marker else ''}; the whole trace is "
                f"analyzed as one window (use --step-marker NAME for your step annotation{hint})",
                rank=rank,
            )
        )
    if spans.nested:
        inner, outer = spans.nested[0]
        more = f" and {len(spans.nested) - 1} more" if len(spans.nested) > 1 else ""
        out.append(
            Notice(
                f"step annotation {inner!r} lies inside {outer!r}{more}: nested steps are not taken as steps "
                "of their own (the outer one is the step)",
                rank=rank,
            )
        )
    if rd.dev.size == 0 and spans.names:
        out.append(Notice("no device work in the trace; accounting on the CPU (top-level host ops)", rank=rank))
    return out


OUTSIDE_STEPS_WARN_RATIO = 0.05


def _accounting_notices(rank: int, acct: Accounting, cfg: AnalyzeConfig) -> list[Notice]:
    """Device work outside every step window above 5% of device busy time; warm-up steps."""
    out = []
    busy, outside = acct.device_busy_ns, acct.outside_steps_ns
    if busy and outside > OUTSIDE_STEPS_WARN_RATIO * busy:
        out.append(
            Notice(
                f"{outside / busy:.0%} of device busy time ({outside / 1e6:.1f} ms) runs outside every step "
                "window (before the first step or after the last) and is in no step's figures",
                rank=rank,
            )
        )
    warm = [s.name for s in acct.steps if s.warmup]
    if warm:
        why = f"--skip-steps {cfg.skip_steps}" if cfg.skip_steps is not None else "> 3x the median of the rest"
        names = warm[0] if len(warm) == 1 else f"{warm[0]} .. {warm[-1]}"
        out.append(
            Notice(
                f"{len(warm)} warm-up step(s) ({names}; {why}) kept out of step statistics, means and the cluster view",
                rank=rank,
            )
        )
    return out


def _hardware(
    info: RankInfo, rd: RankData, cfg: AnalyzeConfig
) -> tuple[Hardware | None, HardwareInfo | None, list[Notice]]:
    """The device: ``--hardware`` (an unknown name is an error), else detected from the trace's device
    name or properties; the memory is what the runtime reported, else the catalog's capacity."""
    notices = []
    if cfg.hardware:
        hw: Hardware | None = hardware.by_name(cfg.hardware, cfg.hardware_file)
        source = "--hardware"
    else:
        hw = hardware.detect(info.device_name, cfg.hardware_file)
        if hw is None and info.device_properties:
            hw = hardware.detect_from_properties(info.device_properties[0], cfg.hardware_file)
        source = "trace"
        if hw is None and rd.dev.size:
            what = (
                f"device {info.device_name!r} is not in the hardware catalog"
                if info.device_name
                else "the trace names no device"
            )
            notices.append(
                Notice(
                    f"{what}; roofline and MFU need --hardware NAME (or --hardware-file for your own device)",
                    rank=info.rank,
                )
            )
    if hw is None:
        return None, None, notices
    reported = next((m for p in info.device_properties if (m := hardware.reported_memory_bytes(p))), None)
    hw_info = HardwareInfo(
        hw.name,
        hw.peak_flops(cfg.mfu_dtype) / 1e12,
        hw.hbm_gbps,
        hw.source,
        source,
        float(reported) if reported else hw.capacity_bytes,
    )
    return hw, hw_info, notices
