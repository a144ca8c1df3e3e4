"""Roofline per op signature, FLOPs coverage, MFU/HFU per step.

Attribution: a kernel belongs to the CPU op with the same External id (the op that launched it).
An op instance's time is the summed duration of its kernels inside the analyzed steps.

For an op group with FLOPs F, bytes B, measured time T, peak P (by dtype) and bandwidth W:
``intensity = F/B``, ``ridge = P/W``, ``roofline_time = max(F/P, B/W)``,
``efficiency = roofline_time / T`` (0-1), ``time_lost = T - roofline_time``.
bound = ``latency`` when the mean time per op instance is under ``LATENCY_NS`` (too small to fill
the device), else ``compute`` if intensity >= ridge, else ``memory``.

MFU per step = model FLOPs per step (per rank) / (step time x peak); HFU uses the FLOPs executed
by the ops with a formula (a lower bound when coverage < 1).
"""

from __future__ import annotations

import numpy as np

from ...catalog.hardware import Hardware
from ...trace.counters import CounterRange
from ..classify import Categories
from ..context import RankContext
from ..xla.notes import missing_flops_note
from .costs import OpCosts
from .results import CategoryRoofline, Roofline, RooflineGroup, StepFlops

#: mean time per op instance under which a group is latency-bound, ns
LATENCY_NS = 10_000
#: groups kept per table
TOP_GROUPS = 50


def compute(ctx: RankContext) -> Roofline:
    c, hw = ctx.costs, ctx.hardware
    groups = _signature_groups(c, hw)
    notes = []
    if hw is None:
        notes.append("device not in the catalog: pass --hardware NAME for roofline and MFU")
    if c.kernel_time_ns and not c.has_shapes:
        notes.append(missing_flops_note(ctx))
    modeled = c.inst_modeled
    d = ctx.data.dev
    return Roofline(
        hardware=ctx.hardware_info,
        groups=groups[:TOP_GROUPS],
        coverage_ratio=float(c.inst_dur_ns[modeled].sum() / c.kernel_time_ns) if c.kernel_time_ns else 0.0,
        kernel_time_ns=c.kernel_time_ns,
        steps=_step_flops(ctx),
        note="; ".join(notes),
        by_category=_by_category(d.categories, d.end - d.ts, c, hw),
        measured=measured_groups(ctx.counters, hw) if ctx.counters else (),
        kernels=_kernel_groups(d.names, d.name_idx, d.end - d.ts, c, hw),
    )


def _signature_groups(c: OpCosts, hw: Hardware | None) -> tuple[RooflineGroup, ...]:
    """One group per op signature, by time lost (groups without a cost model last)."""
    n_sig = len(c.signatures)
    si = c.inst_sig
    g_count = np.bincount(si, minlength=n_sig + 1)
    g_dur = np.bincount(si, weights=c.inst_dur_ns, minlength=n_sig + 1)
    g_flops = np.bincount(si, weights=c.inst_flops, minlength=n_sig + 1)
    g_bytes = np.bincount(si, weights=c.inst_bytes, minlength=n_sig + 1)
    groups = []
    for j in np.flatnonzero(g_count[:n_sig]):
        sig = c.signatures[j]
        groups.append(
            _group(
                sig.name,
                f"{sig.name}{sig.dims}",
                sig.dtype,
                int(g_count[j]),
                int(g_dur[j]),
                float(g_flops[j]),
                float(g_bytes[j]),
                sig.cost is not None,
                hw,
            )
        )
    groups.sort(key=lambda g: (g.bound == "unknown", -g.time_lost_ns, -g.dur_ns))
    return tuple(groups)


def _step_flops(ctx: RankContext) -> tuple[StepFlops, ...]:
    """Per step: FLOPs executed by the modeled ops, MFU (model FLOPs / (step time x peak)), HFU
    (executed FLOPs / (step time x peak)), and the FLOPs executed beyond the model's."""
    c, hw, model = ctx.costs, ctx.hardware, ctx.config.model_flops_per_step
    peak = hw.peak_flops(ctx.config.mfu_dtype) if hw else None
    done = c.inst_step >= 0
    executed = np.bincount(c.inst_step[done], weights=c.inst_flops[done], minlength=len(ctx.steps))
    out = []
    for i, s in enumerate(ctx.steps):
        ex = float(executed[i])
        t_s = s.step_time_ns / 1e9
        mfu = model / (t_s * peak) if (model and peak and t_s > 0) else None
        hfu = ex / (t_s * peak) if (peak and t_s > 0 and ex > 0) else None
        excess = ex - model if (model and ex > 0) else None
        out.append(StepFlops(s.name, ex, model, mfu, hfu, excess))
    return tuple(out)


def _kernel_shares(dur: np.ndarray, c: OpCosts) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel inside the steps: its share of its op's FLOPs and bytes, by duration
    (``op FLOPs x kernel time / op kernel time``; evenly when the op's kernels took no time), so
    every kernel of an op runs at the op's achieved rate. ``OpCosts`` splits evenly; the op totals
    are ``kernel share x kernel count``."""
    sel = c.in_step & (c.kernel_inst >= 0)
    flops, nbytes = np.zeros(dur.size), np.zeros(dur.size)
    if not sel.any():
        return flops, nbytes
    _, inv = np.unique(c.kernel_inst[sel], return_inverse=True)
    n_k = np.bincount(inv)
    op_dur = np.bincount(inv, weights=dur[sel])
    share = np.where(op_dur[inv] > 0, dur[sel] / np.maximum(op_dur[inv], 1), 1.0 / n_k[inv])
    flops[sel] = c.kernel_flops[sel] * n_k[inv] * share
    nbytes[sel] = c.kernel_bytes[sel] * n_k[inv] * share
    return flops, nbytes


def _by_category(
    category: Categories, dur: np.ndarray, c: OpCosts, hw: Hardware | None
) -> tuple[CategoryRoofline, ...]:
    """Per category of the kernels inside the steps (the category every table uses,
    ``RankData.dev.categories``): kernel time, and the roofline time of the kernels whose op has a
    cost model, each at its op's dtype peak and its duration share of the op's FLOPs and bytes."""
    sel = c.in_step
    if not sel.any():
        return ()
    k_flops, k_bytes = _kernel_shares(dur, c)
    modeled = c.kernel_modeled & sel
    roof_s = np.zeros(dur.size)
    if hw is not None:
        dts, dinv = np.unique(c.kernel_dtype[modeled].astype(str), return_inverse=True)
        peak = np.array([hw.peak_flops(str(t)) for t in dts])[dinv]
        roof_s[modeled] = np.maximum(k_flops[modeled] / peak, k_bytes[modeled] / hw.hbm_bytes_per_s)
    present, cinv = np.unique(category.codes[sel], return_inverse=True)
    cats = np.asarray([category.labels[k] for k in present], dtype=object)
    m = modeled[sel].astype(float)
    tot = np.bincount(cinv, weights=dur[sel], minlength=cats.size)
    mdur = np.bincount(cinv, weights=dur[sel] * m, minlength=cats.size)
    fl = np.bincount(cinv, weights=k_flops[sel] * m, minlength=cats.size)
    by = np.bincount(cinv, weights=k_bytes[sel] * m, minlength=cats.size)
    roof = np.bincount(cinv, weights=roof_s[sel], minlength=cats.size)
    out = []
    for j, cat in enumerate(cats):
        md, roof_ns = int(mdur[j]), int(round(float(roof[j]) * 1e9))
        out.append(
            CategoryRoofline(
                category=str(cat),
                dur_ns=int(tot[j]),
                modeled_dur_ns=md,
                flops=float(fl[j]),
                bytes=float(by[j]),
                achieved_tflops=float(fl[j]) / (md / 1e9) / 1e12 if md else 0.0,
                roofline_ns=roof_ns,
                efficiency=(roof_ns / md) if (md and hw is not None) else None,
            )
        )
    return tuple(sorted(out, key=lambda r: -r.dur_ns))


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
) -> RooflineGroup:
    peak_bw = hw.hbm_bytes_per_s if hw else None
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
    if dur / max(count, 1) < LATENCY_NS:
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


def measured_groups(ranges: tuple[CounterRange, ...], hw: Hardware | None) -> tuple[RooflineGroup, ...]:
    """Kernels with counted FLOPs (CUPTI's range profiler; Ascend's cube-unit counts from
    ``kernel_details.csv``): per name, measured FLOPs over the range time. (A CUPTI range includes
    the profiler's replay, so its efficiency is a lower bound.)"""
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
    return tuple(sorted(out, key=lambda g: -g.time_lost_ns)[:TOP_GROUPS])


def _kernel_groups(
    names: list[str], name_idx: np.ndarray, dur: np.ndarray, c: OpCosts, hw: Hardware | None
) -> tuple[RooflineGroup, ...]:
    """Roofline per kernel name over the kernels whose op has a cost model; a kernel gets its op's
    FLOPs and bytes split evenly over the op's kernels, and its op's dtype."""
    sel = c.in_step & c.kernel_modeled
    if not sel.any():
        return ()
    idx, first, inv = np.unique(name_idx[sel], return_index=True, return_inverse=True)
    dts = c.kernel_dtype[sel][first]
    d = np.bincount(inv, weights=dur[sel])
    f = np.bincount(inv, weights=c.kernel_flops[sel])
    b = np.bincount(inv, weights=c.kernel_bytes[sel])
    n = np.bincount(inv)
    out = [
        _group(names[k], names[k], str(dts[j]), int(n[j]), int(d[j]), float(f[j]), float(b[j]), True, hw)
        for j, k in enumerate(idx)
    ]
    return tuple(sorted(out, key=lambda g: -g.time_lost_ns)[:TOP_GROUPS])
