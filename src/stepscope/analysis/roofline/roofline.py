"""Roofline per op signature, FLOPs coverage, MFU/HFU per step.

Attribution: a kernel belongs to the CPU op with the same External id (the op that launched it).
An op instance's time is the summed duration of its kernels inside the analyzed steps.

For an op group with FLOPs F, bytes B, measured time T, peak P (by dtype) and bandwidth W:
``intensity = F/B``, ``ridge = P/W``, ``roofline_time = max(F/P, B/W)``,
``efficiency = roofline_time / T`` (0-1), ``time_lost = T - roofline_time``.
bound = ``latency`` when the mean time per op instance is under ``latency_ns`` (too small to fill
the device), else ``compute`` if intensity >= ridge, else ``memory``.

MFU per step = model FLOPs per step (per rank) / (step time x peak); HFU uses the FLOPs executed
by the ops with a formula (a lower bound when coverage < 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...catalog.hardware import Hardware
from ...trace.counters import CounterRange
from ...trace.dictcol import dict_mask
from ...trace.schema import KIND_CODE as KIND
from ..steps.results import StepBreakdown
from .flops import op_cost


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


def compute(
    events: pa.Table,
    dev_step: np.ndarray,
    dev_kind: np.ndarray,
    dev_ext: np.ndarray,
    dev_dur: np.ndarray,
    dev_category: np.ndarray,
    dev_names: list[str],
    dev_name_idx: np.ndarray,
    steps: tuple[StepBreakdown, ...],
    hw: HardwareInfo | None,
    hw_full: Hardware | None,
    *,
    model_flops_per_step: float | None,
    mfu_dtype: str = "bf16",
    latency_ns: int = 10_000,
    top_k: int = 50,
) -> tuple[Roofline, np.ndarray]:
    """The roofline, and the FLOPs per device event (an op's FLOPs split evenly over its kernels)."""
    in_step = (dev_step >= 0) & (dev_kind == KIND["kernel"])
    kernel_time = int(dev_dur[in_step].sum())
    # op instances: CPU ops with an External id that launched kernels in the steps
    k_ext, k_dur, k_step, k_cat = dev_ext[in_step], dev_dur[in_step], dev_step[in_step], dev_category[in_step]
    has = k_ext >= 0
    k_ext, k_dur, k_step, k_cat = k_ext[has], k_dur[has], k_step[has], k_cat[has]
    uniq_ext, first_k, inv = np.unique(k_ext, return_index=True, return_inverse=True)
    inst_cat = k_cat[first_k].astype(str) if first_k.size else np.empty(0, str)
    inst_dur = np.bincount(inv, weights=k_dur).astype(np.int64)
    inst_step = np.full(uniq_ext.size, -1, np.int64)
    np.maximum.at(inst_step, inv, k_step)
    is_op = dict_mask(events["kind"], lambda k: k == "cpu_op")
    ext_all = events["external_id"].to_numpy()
    pos_all = np.searchsorted(uniq_ext, ext_all)
    is_op &= (
        (pos_all < uniq_ext.size) & (uniq_ext[np.minimum(pos_all, max(uniq_ext.size - 1, 0))] == ext_all)
        if uniq_ext.size
        else False
    )
    del ext_all, pos_all
    ops = events.select(["name", "external_id", "input_dims", "input_types"]).take(pa.array(np.flatnonzero(is_op)))
    op_ext = ops["external_id"].to_numpy()
    # one row per External id (the first op recorded with it)
    op_ext_u, first = np.unique(op_ext, return_index=True)
    ops = ops.take(pa.array(first))
    pos = np.searchsorted(op_ext_u, uniq_ext)
    pos = np.clip(pos, 0, max(op_ext_u.size - 1, 0))
    found = (op_ext_u.size > 0) & (op_ext_u[pos] == uniq_ext) if op_ext_u.size else np.zeros(uniq_ext.size, bool)
    # raw JSON text may be pretty-printed: drop whitespace so equal shapes give equal signatures
    compact = lambda col: pc.replace_substring_regex(pc.fill_null(ops[col], ""), r"\s+", "")  # noqa: E731
    sig_arr = pc.binary_join_element_wise(
        pc.fill_null(ops["name"].cast(pa.string()), ""), compact("input_dims"), compact("input_types"), "\x1f"
    ).combine_chunks()
    sig_d = sig_arr.dictionary_encode()
    sig_of_op = sig_d.indices.to_numpy()
    sigs = sig_d.dictionary.to_pylist()
    costs = []
    for s in sigs:
        name, dims, types = (s.split("\x1f") + ["", "", ""])[:3]
        costs.append((name, dims, op_cost(name, dims or None, types or None)))
    inst_sig = np.where(found, sig_of_op[pos] if sig_of_op.size else -1, -1)
    # per-signature lookup tables (index n = "no op found"), broadcast to instances: no loop over
    # instances, one small loop over distinct signatures
    n_sig = len(costs)
    sig_flops = np.array([c.flops if c else 0.0 for _, _, c in costs] + [0.0])
    sig_bytes = np.array([c.bytes if c else 0.0 for _, _, c in costs] + [0.0])
    sig_modeled = np.array([c is not None for _, _, c in costs] + [False])
    sig_dtype = np.array([c.dtype if c else "fp32" for _, _, c in costs] + ["fp32"], dtype=object)
    si = np.where(inst_sig >= 0, inst_sig, n_sig)
    inst_flops, inst_bytes, modeled = sig_flops[si], sig_bytes[si], sig_modeled[si]
    coverage = float(inst_dur[modeled].sum() / kernel_time) if kernel_time else 0.0
    groups = []
    peak_bw = hw_full.hbm_bytes_per_s if hw_full else None
    g_count = np.bincount(si, minlength=n_sig + 1)
    g_dur = np.bincount(si, weights=inst_dur, minlength=n_sig + 1)
    g_flops = np.bincount(si, weights=inst_flops, minlength=n_sig + 1)
    g_bytes = np.bincount(si, weights=inst_bytes, minlength=n_sig + 1)
    for j in np.flatnonzero(g_count[:n_sig]):
        name, dims, c = costs[j]
        groups.append(
            _group(
                name,
                f"{name}{dims}",
                str(sig_dtype[j]),
                int(g_count[j]),
                int(g_dur[j]),
                float(g_flops[j]),
                float(g_bytes[j]),
                c is not None,
                hw_full,
                peak_bw,
                latency_ns,
            )
        )
    groups.sort(key=lambda g: (g.bound == "unknown", -g.time_lost_ns, -g.dur_ns))
    by_cat = _by_category(inst_cat, inst_dur, inst_flops, inst_bytes, modeled, sig_dtype[si], hw_full)
    # per step: executed FLOPs, MFU, HFU
    peak = hw_full.peak_flops(mfu_dtype) if hw_full else None
    step_rows = []
    executed = np.bincount(inst_step[inst_step >= 0], weights=inst_flops[inst_step >= 0], minlength=len(steps))
    for i, s in enumerate(steps):
        ex = float(executed[i])
        t_s = s.step_time_ns / 1e9
        mfu = model_flops_per_step / (t_s * peak) if (model_flops_per_step and peak and t_s > 0) else None
        hfu = ex / (t_s * peak) if (peak and t_s > 0 and ex > 0) else None
        excess = ex - model_flops_per_step if (model_flops_per_step and ex > 0) else None
        step_rows.append(StepFlops(s.name, ex, model_flops_per_step, mfu, hfu, excess))
    notes = []
    if hw_full is None:
        notes.append("device not in the catalog: pass --hardware NAME for roofline and MFU")
    if kernel_time and not pc.any(pc.is_valid(ops["input_dims"])).as_py():
        notes.append("the trace has no recorded shapes, so no FLOPs: profile with record_shapes=True")
    note = "; ".join(notes)
    per_kernel = np.zeros(dev_ext.size)
    if uniq_ext.size:
        n_k = np.bincount(inv, minlength=uniq_ext.size)
        idx = np.flatnonzero(in_step)[has]
        per_kernel[idx] = (inst_flops / np.maximum(n_k, 1))[inv]
    per_kernel_bytes = np.zeros(dev_ext.size)
    if uniq_ext.size:
        per_kernel_bytes[np.flatnonzero(in_step)[has]] = (
            inst_bytes / np.maximum(np.bincount(inv, minlength=uniq_ext.size), 1)
        )[inv]
    kernel_dtype = np.full(dev_ext.size, "fp32", dtype=object)
    if uniq_ext.size:
        kernel_dtype[np.flatnonzero(in_step)[has]] = sig_dtype[si][inv]
    kernel_groups = _kernel_groups(
        dev_names,
        dev_name_idx,
        in_step,
        dev_dur,
        per_kernel,
        per_kernel_bytes,
        kernel_dtype,
        inst_modeled_kernel(in_step, has, inv, modeled, dev_ext.size),
        hw_full,
        latency_ns,
        top_k,
    )
    return Roofline(
        hardware=hw,
        groups=tuple(groups[:top_k]),
        coverage_ratio=coverage,
        kernel_time_ns=kernel_time,
        steps=tuple(step_rows),
        note=note,
        by_category=by_cat,
        kernels=kernel_groups,
    ), per_kernel


def _by_category(
    inst_cat: np.ndarray,
    inst_dur: np.ndarray,
    inst_flops: np.ndarray,
    inst_bytes: np.ndarray,
    modeled: np.ndarray,
    inst_dtype: np.ndarray,
    hw: Hardware | None,
) -> tuple[CategoryRoofline, ...]:
    """Per category: roofline time of the modeled instances (each at its own dtype's peak)."""
    roof_s = np.zeros(inst_dur.size)
    if hw is not None and inst_dur.size:
        dts, dinv = np.unique(inst_dtype.astype(str), return_inverse=True)
        peak = np.array([hw.peak_flops(str(d)) for d in dts])[dinv]
        roof_s = np.where(modeled, np.maximum(inst_flops / peak, inst_bytes / hw.hbm_bytes_per_s), 0.0)
    out = []
    for cat in np.unique(inst_cat):
        m = inst_cat == cat
        mm = m & modeled
        dur, mdur = int(inst_dur[m].sum()), int(inst_dur[mm].sum())
        flops = float(inst_flops[mm].sum())
        roof_ns = int(round(float(roof_s[mm].sum()) * 1e9))
        out.append(
            CategoryRoofline(
                category=str(cat),
                dur_ns=dur,
                modeled_dur_ns=mdur,
                flops=flops,
                bytes=float(inst_bytes[mm].sum()),
                achieved_tflops=flops / (mdur / 1e9) / 1e12 if mdur else 0.0,
                roofline_ns=roof_ns,
                efficiency=(roof_ns / mdur) if (mdur and hw is not None) else None,
            )
        )
    return tuple(sorted(out, key=lambda c: -c.dur_ns))


def _group(
    name: str,
    signature: str,
    dtype: str,
    count: int,
    dur: int,
    flops: float,
    nbytes: float,
    modeled: bool,
    hw: Hardware | None,
    peak_bw: float | None,
    latency_ns: int,
) -> RooflineGroup:
    t_s = dur / 1e9
    achieved_tflops = flops / t_s / 1e12 if t_s > 0 else 0.0
    achieved_gbps = nbytes / t_s / 1e9 if t_s > 0 else 0.0
    if not modeled or hw is None or peak_bw is None:
        return RooflineGroup(
            name,
            signature,
            dtype,
            count,
            dur,
            flops,
            nbytes,
            achieved_tflops,
            achieved_gbps,
            None,
            None,
            None,
            0,
            0,
            None,
            "unknown",
        )
    peak = hw.peak_flops(dtype)
    intensity = flops / nbytes if nbytes > 0 else None
    roof_s = max(flops / peak if peak else 0.0, nbytes / peak_bw)
    attainable = min(peak, (intensity or 0.0) * peak_bw) / 1e12 if intensity is not None else peak / 1e12
    ridge = peak / peak_bw
    if dur / max(count, 1) < latency_ns:
        bound = "latency"
    elif intensity is not None and intensity >= ridge:
        bound = "compute"
    else:
        bound = "memory"
    roof_ns = int(round(roof_s * 1e9))
    return RooflineGroup(
        name,
        signature,
        dtype,
        count,
        dur,
        flops,
        nbytes,
        achieved_tflops,
        achieved_gbps,
        intensity,
        attainable,
        ridge,
        roof_ns,
        max(dur - roof_ns, 0),
        min(roof_ns / dur, 1.0) if dur else None,
        bound,
    )


def measured_groups(ranges: list[CounterRange], hw: Hardware | None, top_k: int = 50) -> tuple[RooflineGroup, ...]:
    """Kernels with CUPTI counter FLOPs: per kernel name, measured FLOPs over the range time.
    (The range time includes the profiler's replay, so efficiency is a lower bound.)"""
    acc: dict[str, list[float]] = {}
    dtypes: dict[str, dict[str, float]] = {}
    for r in ranges:
        a = acc.setdefault(r.name, [0, 0, 0.0, 0.0])
        a[0] += 1
        a[1] += r.dur_ns
        a[2] += sum(r.flops.values())
        a[3] += r.dram_bytes or 0.0
        for k, v in r.flops.items():
            dtypes.setdefault(r.name, {}).setdefault(k, 0.0)
            dtypes[r.name][k] += v
    out = []
    for name, (count, dur, flops, nbytes) in acc.items():
        by = dtypes.get(name, {})
        dtype = max(by, key=lambda k: by[k]) if by else "fp32"
        t_s = dur / 1e9
        peak = hw.peak_flops(dtype) if hw else None
        roof_s = max(flops / peak if peak else 0.0, nbytes / hw.hbm_bytes_per_s if (hw and nbytes) else 0.0)
        roof_ns = int(round(roof_s * 1e9))
        intensity = flops / nbytes if nbytes else None
        if hw is None:
            bound = "unknown"
        elif intensity is None:
            bound = "compute" if flops else "unknown"
        else:
            bound = "compute" if intensity >= hw.peak_flops(dtype) / hw.hbm_bytes_per_s else "memory"
        out.append(
            RooflineGroup(
                name=name,
                signature=name,
                dtype=dtype,
                count=int(count),
                dur_ns=int(dur),
                flops=flops,
                bytes=nbytes,
                achieved_tflops=flops / t_s / 1e12 if t_s else 0.0,
                achieved_gbps=nbytes / t_s / 1e9 if t_s else 0.0,
                intensity=intensity,
                attainable_tflops=(peak / 1e12 if peak else None),
                ridge_flop_per_byte=(peak / hw.hbm_bytes_per_s if (hw and peak) else None),
                roofline_ns=roof_ns,
                time_lost_ns=max(int(dur) - roof_ns, 0),
                efficiency=(roof_ns / dur if (dur and hw) else None),
                bound=bound,
                source="counters",
            )
        )
    return tuple(sorted(out, key=lambda g: -g.time_lost_ns)[:top_k])


def inst_modeled_kernel(
    in_step: np.ndarray, has: np.ndarray, inv: np.ndarray, modeled: np.ndarray, n: int
) -> np.ndarray:
    """Per device event: launched by an op with a cost model."""
    out = np.zeros(n, bool)
    if inv.size:
        out[np.flatnonzero(in_step)[has]] = modeled[inv]
    return out


def _kernel_groups(
    names: list[str],
    name_idx: np.ndarray,
    in_step: np.ndarray,
    dur: np.ndarray,
    flops: np.ndarray,
    nbytes: np.ndarray,
    dtype: np.ndarray,
    modeled: np.ndarray,
    hw: Hardware | None,
    latency_ns: int,
    top_k: int,
) -> tuple[RooflineGroup, ...]:
    """Roofline per kernel name over the kernels whose op has a cost model; a kernel gets its op's
    FLOPs and bytes split evenly over the op's kernels, and its op's dtype."""
    sel = in_step & modeled
    if not sel.any():
        return ()
    idx, first, inv = np.unique(name_idx[sel], return_index=True, return_inverse=True)
    dts = dtype[sel][first]
    d = np.bincount(inv, weights=dur[sel])
    f = np.bincount(inv, weights=flops[sel])
    b = np.bincount(inv, weights=nbytes[sel])
    c = np.bincount(inv)
    bw = hw.hbm_bytes_per_s if hw else None
    out = [
        _group(
            names[k], names[k], str(dts[j]), int(c[j]), int(d[j]), float(f[j]), float(b[j]), True, hw, bw, latency_ns
        )
        for j, k in enumerate(idx)
    ]
    return tuple(sorted(out, key=lambda g: -g.time_lost_ns)[:top_k])
