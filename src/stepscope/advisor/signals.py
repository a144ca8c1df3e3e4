"""The figures the advisor's rules read, per rank, from that rank's analysis.

Every time is the mean over the steady steps (warm-up excluded), in ns per step, so that the parts of
the step add up: ``compute_ns + exposed_comm_ns + exposed_memcpy_ns + idle_ns == step_ns`` and the
idle parts (``idle_input_wait_ns``, ``idle_host_bound_ns``, ``idle_sync_wait_ns``, ``idle_other_ns``)
add up to ``idle_ns``. Ratios are of ``step_ns``. ``tiny_kernel_idle_ns``: the host time spent in
launch calls of kernels shorter than the short-kernel threshold (count x mean launch call), at most
the host-bound idle: what fusing them could give back. ``compile_idle_ns``: host time compiling inside
the steps, at most the idle time (the device waited while the host compiled). The roofline's figures cover every step of the
trace (warm-up included), so they are divided by the number of all steps.
"""

from __future__ import annotations

from collections.abc import Callable

from ..analysis.memory.usage import MemoryUsage
from ..analysis.results import RankAnalysis
from ..analysis.steps.ai_cpu import AiCpu
from ..analysis.steps.contention import Contention
from ..analysis.steps.dispatch import Dispatch
from ..analysis.steps.fusion import Fusion
from ..analysis.steps.hccl import HcclTiming
from ..analysis.steps.profiler_overhead import ProfilerOverhead
from ..analysis.steps.results import StepBreakdown
from ..catalog.hardware import by_name
from ..errors import ConfigError

#: A rank's signals: name -> value (ns per step, ratios 0-1, counts per step).
Signals = dict[str, float]


def _mean(steps: tuple[StepBreakdown, ...], get: Callable[[StepBreakdown], float]) -> float:
    return sum(float(get(s)) for s in steps) / len(steps)


def rank_signals(r: RankAnalysis) -> Signals | None:
    """The rank's signals (over its steps with device work; a rank without device work: over its
    CPU steps, where the CPU's top-level ops are the work), or None without a steady step."""
    steady = tuple(s for s in r.steps if not s.warmup)
    # device windows where the rank has device work; a CPU-only rank's windows are its CPU steps
    steps = tuple(s for s in steady if s.window_source == "device") or steady
    if not steps:
        return None
    n = len(steps)
    out: Signals = {
        "steps": float(n),
        "step_ns": _mean(steps, lambda s: s.step_time_ns),
        "compute_ns": _mean(steps, lambda s: s.compute_ns),
        "comm_ns": _mean(steps, lambda s: s.comm_ns),
        "overlapped_comm_ns": _mean(steps, lambda s: s.overlapped_comm_ns),
        "exposed_comm_ns": _mean(steps, lambda s: s.exposed_comm_ns),
        "exposed_memcpy_ns": _mean(steps, lambda s: s.exposed_memcpy_ns),
        "idle_ns": _mean(steps, lambda s: s.idle_ns),
        "idle_input_wait_ns": _mean(steps, lambda s: s.idle_causes.input_wait_ns),
        "idle_host_bound_ns": _mean(steps, lambda s: s.idle_causes.host_bound_ns),
        "idle_sync_wait_ns": _mean(steps, lambda s: s.idle_causes.wait_ns),
        "idle_other_ns": _mean(steps, lambda s: s.idle_causes.other_ns),
        "dataloader_ns": _mean(steps, lambda s: s.cpu.dataloader_ns),
        "sync_calls": _mean(steps, lambda s: s.cpu.sync_calls),
        "silent_ns": _mean(steps, lambda s: s.cpu.silent_ns),
        "compile_ns": _mean(steps, lambda s: s.cpu.compile_ns),
        "dataloader_in_process": float(r.step_stats.dataloader_in_process),
        "kernels": float(r.launch.kernels) / n,
        "short_kernels": float(r.launch.short_kernels) / n,
        "short_kernel_ns": float(r.launch.short_kernel_time_ns) / n,
        "launch_delay_p50_ns": float(r.launch.delay_p50_ns),
        "graph_launches": float(r.launch.graph_launches),  # in the whole trace: any at all is graph replay
    }
    _profiler(out, r)
    # the host's launch calls for the short kernels, as far as the device waited for the host
    out["short_launch_host_ns"] = out["short_kernels"] * float(r.launch.launch_call_mean_ns)
    out["tiny_kernel_idle_ns"] = min(out["idle_host_bound_net_ns"], out["short_launch_host_ns"])
    out["compile_idle_ns"] = min(out["compile_ns"], out["idle_ns"])
    step = out["step_ns"]
    for key in [k for k in out if k.endswith("_ns") and k != "step_ns"]:
        out[key[:-3] + "_ratio"] = out[key] / step if step > 0 else 0.0
    _comm(out, r, steps)
    _roofline(out, r)
    _fp32_gemm(out, r)
    _bf16_gemm(out, r)
    _layout_copies(out, r)
    _top_kernel(out, r)
    _mfu(out, r)
    _dispatch(out, r, steps)
    _memory(out, r)
    _fusion(out, r)
    _contention(out, r)
    _hccl(out, r)
    _ai_cpu(out, r)
    return out


def _profiler(out: Signals, r: RankAnalysis) -> None:
    """The profiler's own overhead events (``analysis/steps/profiler_overhead.py``), and the host-bound
    idle without the part the profiler caused (``idle_host_bound_net_ns``: what the job would see)."""
    po = r.extras.get("profiler_overhead")
    if not isinstance(po, ProfilerOverhead):
        po = ProfilerOverhead(
            events=0, overhead_ns=0.0, overhead_idle_ns=0.0, overhead_host_bound_ns=0.0, lazy_loading_ns=0.0
        )
    out["profiler_overhead_ns"] = po.overhead_ns
    out["profiler_overhead_idle_ns"] = po.overhead_idle_ns
    out["idle_host_bound_net_ns"] = max(0.0, out["idle_host_bound_ns"] - po.overhead_host_bound_ns)


def _contention(out: Signals, r: RankAnalysis) -> None:
    """Stalled launch calls (``analysis/steps/contention.py``) per steady step."""
    c = r.extras.get("contention")
    if isinstance(c, Contention) and c.launch_call_p50_ns:
        out["stalled_calls"] = c.stalled_calls
        out["stalled_ns"] = c.stalled_ns
        out["stalled_idle_ns"] = c.stalled_idle_ns
        out["stalled_idle_ratio"] = c.stalled_idle_ns / out["step_ns"] if out["step_ns"] > 0 else 0.0
        out["launch_call_p50_ns"] = float(c.launch_call_p50_ns)


def _hccl(out: Signals, r: RankAnalysis) -> None:
    """HCCL's own wait for late peers (``analysis/steps/hccl.py``, Ascend ranks with
    ``communication.json``): per recorded step, its share of HCCL's wait + transit, and the part
    the step can see (``hccl_wait_exposed_ns``: at most the exposed communication)."""
    h = r.extras.get("hccl")
    if not isinstance(h, HcclTiming):
        return
    out["hccl_wait_ns"] = h.wait_ns_per_step
    out["hccl_transit_ns"] = h.transit_ns_per_step
    out["hccl_wait_share"] = h.wait_ratio
    out["hccl_wait_exposed_ns"] = min(h.wait_ns_per_step, out["exposed_comm_ns"])
    out["hccl_wait_exposed_ratio"] = out["hccl_wait_exposed_ns"] / out["step_ns"] if out["step_ns"] > 0 else 0.0


def _ai_cpu(out: Signals, r: RankAnalysis) -> None:
    """Ascend tasks on the AI CPU (``analysis/steps/ai_cpu.py``) per steady step."""
    a = r.extras.get("ai_cpu")
    if isinstance(a, AiCpu):
        out["ai_cpu_tasks"] = a.tasks
        out["ai_cpu_ns"] = a.time_ns
        out["ai_cpu_ratio"] = a.time_ns / out["step_ns"] if out["step_ns"] > 0 else 0.0


def _fusion(out: Signals, r: RankAnalysis) -> None:
    """Unfused chains (``analysis/steps/fusion.py``), all patterns together: matches, operators a
    fusion removes, kernel time and the estimated saving per steady step."""
    fusion = r.extras.get("fusion")
    if not isinstance(fusion, Fusion) or not fusion.patterns:
        return
    out["fusion_matches"] = sum(p.matches for p in fusion.patterns)
    out["fusion_ops_removed"] = sum(p.ops_removed for p in fusion.patterns)
    out["fusion_kernel_ns"] = sum(p.kernel_ns for p in fusion.patterns)
    out["fusion_saving_ns"] = sum(p.saving_ns for p in fusion.patterns)
    out["fusion_saving_ratio"] = out["fusion_saving_ns"] / out["step_ns"] if out["step_ns"] > 0 else 0.0


def _memory(out: Signals, r: RankAnalysis) -> None:
    """Device memory (``analysis/memory/usage.py``): the fullest device's peak (reserved, else
    allocated) against its capacity, the pool's unallocated share at its peak, and the allocator's
    driver calls per step (their time while the device was idle)."""
    mem = r.extras.get("memory")
    if not isinstance(mem, MemoryUsage):
        return
    out["allocator_calls"] = mem.allocator_calls
    out["allocator_ns"] = mem.allocator_ns
    out["allocator_idle_ns"] = mem.allocator_idle_ns
    out["allocator_idle_ratio"] = mem.allocator_idle_ns / out["step_ns"] if out["step_ns"] > 0 else 0.0
    known = [d for d in mem.devices if d.peak_used_ratio is not None and d.capacity_bytes]
    if not known:
        return
    d = max(known, key=lambda x: x.peak_used_ratio or 0.0)
    out["memory_peak_used_ratio"] = float(d.peak_used_ratio or 0.0)
    out["memory_capacity_gb"] = float(d.capacity_bytes or 0.0) / 1e9
    out["memory_peak_used_gb"] = out["memory_peak_used_ratio"] * out["memory_capacity_gb"]
    if d.unallocated_at_peak_ratio is not None:
        out["memory_unallocated_at_peak_ratio"] = d.unallocated_at_peak_ratio


def _dispatch(out: Signals, r: RankAnalysis, steps: tuple[StepBreakdown, ...]) -> None:
    """Operators per step (``analysis/steps/dispatch.py``) over the same steps: all, tiny, and the
    optimizer's (with the time it holds the step and its median operator)."""
    disp = r.extras.get("dispatch")
    if not isinstance(disp, Dispatch):
        return
    by_name = {s.name: s for s in disp.steps}
    mine = [by_name[s.name] for s in steps if s.name in by_name]
    if not mine:
        return
    n = len(mine)
    out["ops"] = sum(s.ops for s in mine) / n
    out["tiny_ops"] = sum(s.tiny_ops for s in mine) / n
    out["optimizer_ops"] = sum(s.optimizer_ops for s in mine) / n
    out["optimizer_ns"] = sum(s.optimizer_ns for s in mine) / n
    out["optimizer_ratio"] = out["optimizer_ns"] / out["step_ns"] if out["step_ns"] > 0 else 0.0
    out["optimizer_op_p50_ns"] = float(disp.optimizer_op_p50_ns)
    out["dataloader_op_ns"] = min(sum(s.dataloader_op_ns for s in mine) / n, out["dataloader_ns"])
    out["dataloader_other_ns"] = out["dataloader_ns"] - out["dataloader_op_ns"]


def _comm(out: Signals, r: RankAnalysis, steps: tuple[StepBreakdown, ...]) -> None:
    """The collective type with the most exposed time, and how much compute could still hide it:
    compute not already under communication (``compute_ns - overlapped_comm_ns``)."""
    exposed: dict[str, float] = {}
    for s in steps:
        for c in s.collectives:
            exposed[c.type] = exposed.get(c.type, 0.0) + c.exposed_ns / len(steps)
    top = max(exposed.items(), key=lambda kv: kv[1], default=("", 0.0))
    out["exposed_p2p_ns"] = exposed.get("send_recv", 0.0)
    out["exposed_p2p_ratio"] = out["exposed_p2p_ns"] / out["step_ns"] if out["step_ns"] > 0 else 0.0
    out["top_collective_exposed_ns"] = top[1]
    out["comm_hideable_ns"] = max(0.0, min(out["exposed_comm_ns"], out["compute_ns"] - out["overlapped_comm_ns"]))
    out["comm_hidden_ratio"] = out["overlapped_comm_ns"] / out["comm_ns"] if out["comm_ns"] > 0 else 1.0


def _roofline(out: Signals, r: RankAnalysis) -> None:
    """The op group losing the most time to its roofline: its time lost per step and efficiency."""
    roof = r.roofline
    groups = [g for g in roof.groups if g.efficiency is not None] if roof is not None else []
    if not groups or not r.steps:
        return
    g = max(groups, key=lambda x: x.time_lost_ns)
    out["roofline_lost_ns"] = g.time_lost_ns / len(r.steps)
    out["roofline_op_ns"] = g.dur_ns / len(r.steps)
    out["roofline_efficiency"] = float(g.efficiency or 0.0)
    out["roofline_lost_ratio"] = out["roofline_lost_ns"] / out["step_ns"] if out["step_ns"] > 0 else 0.0


#: framework ops whose fp32 form runs on fp32 units (or TF32) and whose bf16 form on tensor cores
_GEMM_OPS = (
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::linear",
    "aten::_scaled_mm",
)


def _fp32_gemm(out: Signals, r: RankAnalysis) -> None:
    """GEMMs run in fp32, per step: their time (``fp32_gemm_ns``) and their time above the roofline
    at the device's MFU-dtype peak (bf16 unless ``--mfu-dtype``): what bf16 could at most save
    (``fp32_gemm_gap_ns``). Needs the device in the catalog."""
    roof = r.roofline
    if roof is None or roof.hardware is None or not r.steps:
        return
    peak = roof.hardware.peak_tflops * 1e12
    fp32 = [g for g in roof.groups if g.dtype == "fp32" and g.name in _GEMM_OPS and g.flops > 0]
    n = len(r.steps)
    out["fp32_gemm_ns"] = sum(g.dur_ns for g in fp32) / n
    out["fp32_gemm_gap_ns"] = sum(max(0.0, g.dur_ns - g.flops / peak * 1e9) for g in fp32) / n
    out["fp32_gemm_ratio"] = out["fp32_gemm_ns"] / out["step_ns"] if out["step_ns"] > 0 else 0.0


#: framework ops that only move or reformat data (no arithmetic): layout copies, concatenation,
#: dtype casts ("data formatting")
_LAYOUT_OPS = frozenset(
    ("aten::copy_", "aten::contiguous", "aten::clone", "aten::cat", "aten::stack", "aten::_to_copy", "aten::to")
)


def _layout_copies(out: Signals, r: RankAnalysis) -> None:
    """Kernel time of the ops that only move or reformat data, per step (the roofline's op groups,
    over all the trace's steps as ``_roofline``)."""
    roof = r.roofline
    if roof is None or not r.steps:
        return
    out["layout_copy_ns"] = sum(g.dur_ns for g in roof.groups if g.name in _LAYOUT_OPS) / len(r.steps)
    out["layout_copy_ratio"] = out["layout_copy_ns"] / out["step_ns"] if out["step_ns"] > 0 else 0.0


def _fp8_speedup(device: str) -> float | None:
    """fp8 over bf16 GEMM throughput on ``device``: the catalog's peaks times its measured matmul
    efficiencies (MAMF) where it has them; None for a device without fp8 or not in the catalog."""
    try:
        hw = by_name(device)
    except ConfigError:
        return None
    fp8, bf16 = hw.peak_tflops.get("fp8"), hw.peak_tflops.get("bf16")
    if not fp8 or not bf16:
        return None
    return (fp8 * hw.matmul_eff.get("fp8", 1.0)) / (bf16 * hw.matmul_eff.get("bf16", 1.0))


def _bf16_gemm(out: Signals, r: RankAnalysis) -> None:
    """GEMMs in bf16/fp16 per step (``bf16_gemm_ns``) and what fp8 GEMMs would take off them at
    the device's fp8/bf16 throughput ratio (``fp8_gemm_gap_ns`` = time x (1 - 1/ratio))."""
    roof = r.roofline
    if roof is None or roof.hardware is None or not r.steps:
        return
    speedup = _fp8_speedup(roof.hardware.name)
    if speedup is None or speedup <= 1.0:
        return
    gemm = sum(g.dur_ns for g in roof.groups if g.dtype in ("bf16", "fp16") and g.name in _GEMM_OPS) / len(r.steps)
    out["bf16_gemm_ns"] = gemm
    out["bf16_gemm_ratio"] = gemm / out["step_ns"] if out["step_ns"] > 0 else 0.0
    out["fp8_speedup"] = speedup
    out["fp8_gemm_gap_ns"] = gemm * (1.0 - 1.0 / speedup)


def _mfu(out: Signals, r: RankAnalysis) -> None:
    """The MFU decision tree's median step MFU (``analysis/roofline/mfu_diagnosis.py``; needs the
    model's FLOPs) and how many checks of its band fail."""
    diag = r.mfu_diagnosis
    if diag is not None:
        out["mfu"] = diag.mfu
        out["mfu_failing_checks"] = float(sum(not c.ok for c in diag.checks))


def _top_kernel(out: Signals, r: RankAnalysis) -> None:
    if r.top_kernels:
        out["top_kernel_share_ratio"] = float(r.top_kernels[0].share_of_step_ratio)
