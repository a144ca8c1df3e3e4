"""The lines ``plan`` says under its table and on its HTML page: throughput, overlap, memory,
sensitivity, the calibration and what-if, and the caveats of the least validated terms; formatted
from the plan's records (planner/records.py)."""

from __future__ import annotations

from typing import Any

from ..planner.recompute import RECOMPUTE
from ..planner.strategy import STRATEGY_DEFAULTS
from ..planner.vocab import SCHEDULES, TP_OVERLAP
from ..planner.window import HIDDEN_PARTS

# shown whatever their value: the layout and the batch split as run
_ALWAYS_SHOWN = ("tp", "pp", "dp", "mb", "ga")


def _strategy_text(s: dict[str, Any]) -> str:
    """A strategy as --evaluate spells it, without the fields at their defaults (STRATEGY_DEFAULTS,
    as a record names them: etp = tp, hsdp = dp under ZeRO-3, recompute, sched and tp_overlap by
    name)."""
    quiet: dict[str, Any] = {k: v for k, v in STRATEGY_DEFAULTS.items() if k not in _ALWAYS_SHOWN}
    quiet |= {
        "etp": s["tp"],
        "hsdp": s["dp"] if s["zero"] == 3 else 0,
        "recompute": RECOMPUTE[STRATEGY_DEFAULTS["recompute"]],
        "sched": SCHEDULES[STRATEGY_DEFAULTS["sched"]],
        "tp_overlap": TP_OVERLAP[STRATEGY_DEFAULTS["tp_overlap"]],
    }
    return ",".join(f"{k}={v}" for k, v in s.items() if quiet.get(k, object()) != v)


# headroom below this share of the device's memory: fragmentation and allocator caching (not
# modeled) can take it, so the line under --evaluate says so
TIGHT_HEADROOM = 0.05


# data parallelism over at least this many nodes, exposed for at least this share of the step:
# where the validation's DP-bound runs were furthest off (nanotron's 64-node runs)
WIDE_DP_NODES, WIDE_DP_SHARE = 32, 0.2


def caveat_lines(
    recs: list[dict[str, Any]],
    *,
    measured_ceiling: bool,
    device: str,
    fp8_rowwise: bool,
    moe: bool = False,
    nodes: int = 1,
) -> list[str]:
    """Where the rows shown lean on the model's least validated terms (docs/planner.md, Accuracy):
    a device without a measured matmul ceiling, context parallelism, DeepSeek's DualPipe schedules,
    torchao's rowwise fp8, MoE layers (BENCHMARKS.md, held-out runs), and gradient/FSDP traffic that dominates a step over
    ``WIDE_DP_NODES``+ nodes."""
    lines = []
    if moe:
        lines.append(
            "note: MoE step times are the least validated: against NVIDIA's published Megatron-Bridge MoE runs "
            "(benchmarks/holdout) its predictions ranged from 20% slow to 3.8x fast, most optimistic for many small experts at "
            "micro-batch 1 (the router, host synchronisation and per-expert launches are not modeled; --calibrate on three or more of your own runs at "
            "different micro-batch sizes can fit them as a host wait: fitted to those 21 runs, leaving each out, it came out at 6.4 ms per layer "
            "and micro-batch; --set host_wait_us=6400 shows what that would cost here)"
        )
    if not measured_ceiling:
        lines.append(
            f"note: {device} has no measured matmul ceiling in the hardware catalog; its GEMMs assume the 0.7 prior "
            "(calibrate on measured runs: --calibrate or --from-analysis)"
        )
    if any(int(r["strategy"]["cp"]) > 1 for r in recs):
        lines.append(
            "note: rows with cp > 1 lean on ring attention's cost, the least validated term: against torchtitan's "
            "published context-parallel runs the model was optimistic, more so at higher cp"
        )
    if any(str(r["strategy"].get("sched", "")).startswith("dualpipe") for r in recs):
        lines.append(
            "note: DualPipe rows take their bubble from the DualPipe README's table (with F = W = B/2) and hide the "
            "all-to-all as ep_overlap does; checked against one run only (DeepSeek-V3, within 2% of its whole-run average), "
            "which fit in 80 GB per device with its report's FP8 activation storage (--set fp8_activation_cache=true)"
        )
    if fp8_rowwise:
        lines.append(
            "note: rowwise fp8 is optimistic against torchtitan's published rowwise runs, most with async TP "
            "(the narrow GEMMs' fp8 penalty is not modeled)"
        )
    if nodes >= WIDE_DP_NODES and any(
        int(r["strategy"]["dp"]) * int(r["strategy"]["cp"]) > 1
        and r["time_s"]["dp"] >= WIDE_DP_SHARE * r["step_time_s"]
        for r in recs
    ):
        lines.append(
            f"note: rows where DP/FSDP traffic is {WIDE_DP_SHARE:.0%}+ of the step across {WIDE_DP_NODES}+ nodes lean on the "
            "inter-node collective model where it was least accurate: against nanotron's 64-node runs its predictions ranged from 34% too slow "
            "to 1.7x too fast (ring latency and congestion at hundreds of ranks): profile yours from nccl-tests logs (stepscope network) for --network, or --calibrate"
        )
    return lines


def sensitivity_line(sens: dict[str, float]) -> str:
    """The line under an --evaluate table that says which term the prediction leans on."""
    return (
        f"10% worse: GEMMs {sens['gemm']:+.1%} step, attention {sens['attention']:+.1%}, "
        f"communication {sens['communication']:+.1%} (inter-node links alone {sens['inter_node']:+.1%})"
    )


def rate_line(rec: dict[str, Any]) -> str:
    """The line under an --evaluate table with what the table leaves out: throughput per device and
    HFU (with recompute's extra forward) beside MFU."""
    return (
        f"step {rec['step_time_s']:.4g} s: {rec['tokens_per_s_per_device']:,.0f} tokens/s per device, "
        f"{rec['tflops_per_device']:,.0f} model TFLOP/s per device, MFU {rec['mfu']:.1%}, HFU {rec['hfu']:.1%}"
    )


def overlap_line(rec: dict[str, Any]) -> str | None:
    """The line under an --evaluate table with what the transfers hid under compute beside what
    they left exposed; None when nothing hides."""
    hidden = {p: s for p, s in rec["hidden_s"].items() if s > 0}
    if not hidden:
        return None
    exposed = sum(rec["time_s"][p] for p in HIDDEN_PARTS)
    names = {"tp": "TP", "ep": "EP", "cp": "CP", "pp_p2p": "PP p2p", "dp": "DP", "offload": "offload"}
    parts = ", ".join(f"{names[p]} {s:.3g}" for p, s in hidden.items())
    return f"overlap: {sum(hidden.values()):.3g} s of transfers hidden under compute ({parts}), {exposed:.3g} s exposed"


def memory_line(rec: dict[str, Any]) -> str:
    """The line under an --evaluate table: the configuration's memory against the device's, with
    its headroom, or by how much it misses."""
    total, free = rec["memory_gb"]["total"], rec["headroom_gb"]
    capacity_gb = total + free
    if not rec["fits"]:
        return f"memory: does not fit, {total:,.1f} GB per device of {capacity_gb:,.1f} GB ({-free:,.1f} GB over)"
    line = f"memory: fits, {total:,.1f} GB per device of {capacity_gb:,.1f} GB ({free:,.1f} GB headroom)"
    if free < TIGHT_HEADROOM * capacity_gb:
        line += (
            f"; less than {TIGHT_HEADROOM:.0%} of the device is left, and allocator fragmentation (not modeled) "
            "can take that: expect out-of-memory risk"
        )
    return line


def what_if_lines(rec: dict[str, Any]) -> list[str]:
    """The lines under an --evaluate table: what the calibration took from a trace or a CSV, and
    the what-if anchored on the measured baseline (with a warning when the model's baseline is far
    from the measurement, i.e. the job given is probably not the run measured)."""
    cal = rec.get("calibration") or {}
    lines = _calibration_lines(cal) if "runs" in cal else []
    lines += _trace_lines(cal) if "trace" in cal else []
    return lines + (_anchored_lines(rec) if rec.get("what_if") else [])


def _fit_line(cal: dict[str, Any]) -> str:
    """The fitted factors and the runs' error before and after (leave-one-out)."""
    host = (
        f", host wait {cal['layer_overhead_s'] * 1e6:.0f} us per layer and micro-batch"
        if cal.get("layer_overhead_s")
        else ""
    )
    pull = (
        f" (held toward the priors at strength {cal['prior_pull']:g}, "
        + ("chosen leave-one-out)" if cal["runs"] >= 3 else "the strongest: too few runs to choose)")
        if cal.get("prior_pull")
        else ""
    )
    return (
        f"calibrated on {cal['runs']} measured runs: GEMM x{cal['gemm_scale']:.3g}, attention x{cal['attn_scale']:.3g}, "
        f"communication x{cal['comm_scale']:.3g}, inter-node x{cal['inter_scale']:.3g}"
        + host
        + pull
        + f"; error {cal['mape_before']:.1%} before, {cal['mape_after_leave_one_out']:.1%} after (leave-one-out)"
    )


def _calibration_lines(cal: dict[str, Any]) -> list[str]:
    """What a --calibrate fit says: its factors, how firmly the runs pin them, the runs the others
    predict worst, the columns ignored and the factors at the edge of their grid."""
    lines = [_fit_line(cal)]
    if held := cal.get("held_from_trace"):
        lines.append(f"held at what the trace measured (x1 above): {', '.join(held)}")
    if why := cal.get("trace_not_held"):
        lines.append(f"what the trace measured replaces the fit's factors for it: {why}")
    spread = {k: v for k, v in (cal.get("leave_one_out_range") or {}).items() if v[1] > v[0]}
    if spread:  # factors the runs do not pin down move between the leave-one-out fits
        names = {
            "gemm_scale": "GEMM",
            "attn_scale": "attention",
            "comm_scale": "communication",
            "inter_scale": "inter-node",
        }
        lines.append(
            "leave-one-out fits ranged: "
            + ", ".join(
                f"host wait {lo * 1e6:.0f}-{hi * 1e6:.0f} us"
                if k == "layer_overhead_s"
                else f"{names.get(k, k)} x{lo:.3g}-{hi:.3g}"
                for k, (lo, hi) in spread.items()
            )
        )
    off = sorted(
        ((r["predicted_loo_s"] / r["measured_s"] - 1, r) for r in cal.get("per_run") or []), key=lambda x: -abs(x[0])
    )
    if worst := [(e, r) for e, r in off[:3] if abs(e) > 0.1]:  # rows more than 10% from their leave-one-out prediction
        lines.append(
            "furthest left out: "
            + "; ".join(
                f"line {r['line']} {r['measured_s']:.4g} s measured, {r['predicted_loo_s']:.4g} s predicted ({e:+.0%})"
                for e, r in worst
            )
            + " (a row the others cannot predict may not describe its run)"
        )
    if cal.get("ignored_columns"):
        lines.append(f"note: columns the planner does not read were ignored: {', '.join(cal['ignored_columns'])}")
    if cal.get("at_grid_edge"):
        lines.append(
            f"warning: {', '.join(cal['at_grid_edge'])} reached the end of the range the fit searches; check that the "
            "CSV's rows describe the jobs (model, devices, batch, strategy) and their step times in seconds"
        )
    return lines


def _trace_lines(cal: dict[str, Any]) -> list[str]:
    """What --from-analysis took from the trace, and what it could not."""
    got = ", ".join(f"{k[len('measured_') :]} {v:.3g}" for k, v in cal.items() if k.startswith("measured_"))
    lines = [
        f"from the trace {cal['trace']} (rank {cal['trace_rank']}, {cal['trace_hardware']}): step "
        f"{cal['trace_step_time_s']:.4g} s; " + (got or "no efficiency could be measured, the priors stay")
    ]
    lines += _op_class_lines(cal)
    if "trace_why_no_flops" in cal:
        lines.append(f"no compute efficiency from this trace: {cal['trace_why_no_flops']}")
    if cal.get("trace_host_bound_s") and "measured_layer_overhead_s" not in cal:
        lines.append(
            f"note: the traced step waited {cal['trace_host_bound_s']:.4g} s on the host "
            f"({cal['trace_host_bound_s'] / cal['trace_step_time_s']:.0%} of it); a what-if (--evaluate with --baseline) "
            "carries that over as a wait per layer and micro-batch, a search does not"
        )
    if cal.get("trace_hardware_differs"):
        lines.append(
            f"warning: the trace ran on {cal['trace_hardware']}, not on the --hardware given; its efficiencies and "
            "measured step describe that device"
        )
    return lines


_OP_NAMES = {
    "linear_attention": "linear attention",
    "grouped_gemm": "grouped GEMMs",
    "all_to_all": "all-to-all",
    "exposed_comm": "exposed communication",
}


def _op_class_lines(cal: dict[str, Any]) -> list[str]:
    """The op classes of the traced step against the model's baseline before their scales were
    set (op_profile.py), the classes kept, or the classes found but not used (no --baseline)."""
    lines = []
    if classes := cal.get("op_classes"):
        lines.append(
            "op classes of the traced step vs the model's baseline before: "
            + ", ".join(
                f"{_OP_NAMES.get(k, k)} {v['traced_s']:.4g} vs {v['model_s']:.4g} s" for k, v in classes.items()
            )
        )
    by_reason: dict[str, list[str]] = {}
    for k, why in (cal.get("op_classes_kept") or {}).items():
        by_reason.setdefault(str(why), []).append(_OP_NAMES.get(k, k))
    for why, names in by_reason.items():  # one line per reason: a baseline unlike the trace keeps every class
        lines.append(f"{', '.join(names)}: kept at {'its scale' if len(names) == 1 else 'their scales'}: {why}")
    if odd := cal.get("op_scales_implausible"):
        lines.append(f"warning: {', '.join(odd)} over 1000x from the prior: is --baseline the traced run's strategy?")
    if unused := cal.get("trace_op_classes_unused"):
        lines.append(
            f"note: the trace times {', '.join(_OP_NAMES.get(k, k) for k in unused)}; give the traced run's strategy "
            "(--baseline) to calibrate them"
        )
    return lines


def _anchored_lines(rec: dict[str, Any]) -> list[str]:
    """The what-if against the measured baseline, the baseline traced vs modeled, and a warning
    when the model's baseline is far from the measurement."""
    w = rec["what_if"]
    lines = [
        f"what-if: baseline {_strategy_text(w['baseline'])} measured {w['measured_step_time_s']:.4g} s/step (model "
        f"{w['predicted_baseline_step_time_s']:.4g} s); {_strategy_text(rec['strategy'])} predicted "
        f"{w['predicted_step_time_s']:.4g} s/step, {w['speedup_vs_baseline']:.2f}x the "
        "baseline's speed"
    ]
    parts = w.get("baseline_parts_s")
    if parts:
        names = {"compute": "compute", "exposed_comm": "exposed communication", "idle": "idle"}
        lines.append(
            "baseline, traced vs model: "
            + ", ".join(
                f"{label} {parts['measured'][k]:.4g} vs {parts['model'][k]:.4g} s" for k, label in names.items()
            )
        )
    if w["baseline_far_from_measured"]:
        lines.append(
            f"warning: the model puts the baseline at {w['baseline_model_over_measured']:.2g}x the measured step; check that "
            "--model, --devices, --global-batch and --seq-len describe the measured run"
        )
    return lines
