"""Frozen result types of the roofline: per op signature, per kernel, per category, per step (MFU/HFU),
and the device they are judged against. Units are in the names."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RooflineGroup:
    name: str
    signature: str
    dtype: str
    count: int
    dur_ns: int
    flops: float
    bytes: float
    achieved_tflops: float
    achieved_gbps: float
    intensity: float | None
    attainable_tflops: float | None
    ridge_flop_per_byte: float | None
    roofline_ns: int
    time_lost_ns: int
    efficiency: float | None
    bound: str
    source: str = "model"  # "model" (FLOPs from shapes) | "counters" (CUPTI range profiler)


@dataclass(frozen=True)
class CategoryRoofline:
    """Modeled op instances by kernel category: how close the category runs to its roofline."""

    category: str
    dur_ns: int
    modeled_dur_ns: int
    flops: float
    bytes: float
    achieved_tflops: float
    roofline_ns: int
    efficiency: float | None


@dataclass(frozen=True)
class StepFlops:
    name: str
    executed_flops: float
    model_flops: float | None
    mfu: float | None
    hfu: float | None
    excess_flops: float | None  # executed - model FLOPs (recompute and other extra work; executed is a lower bound)


@dataclass(frozen=True)
class HardwareInfo:
    name: str
    peak_tflops: float  # for the MFU dtype
    hbm_gbps: float
    source: str
    detected_from: str  # "trace" | "--hardware"
    # device memory, bytes: what the trace's runtime reported (deviceProperties.totalGlobalMem), else
    # the catalog's capacity for the device (Hardware.capacity_bytes); None when neither is known
    memory_bytes: float | None = None


@dataclass(frozen=True)
class Roofline:
    hardware: HardwareInfo | None
    groups: tuple[RooflineGroup, ...]  # by time lost, largest first
    coverage_ratio: float  # share of kernel time (in steps) launched by ops with a cost model
    kernel_time_ns: int
    steps: tuple[StepFlops, ...]
    note: str
    by_category: tuple[CategoryRoofline, ...] = ()
    measured: tuple[RooflineGroup, ...] = ()  # from hardware counters, when the trace has them
    kernels: tuple[RooflineGroup, ...] = ()  # per kernel name (each kernel gets its op's FLOPs/bytes share)
