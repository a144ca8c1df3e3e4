"""What ``plan`` takes from measurements: a calibration on measured runs (``--calibrate``), the
efficiencies and step of a traced run (``--from-analysis``), and the what-if of a strategy against
a measured baseline (``--baseline`` with ``--measured-step-s`` or the trace's step)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .cost import evaluate
from .job import Job
from .strategy import Strategy

if TYPE_CHECKING:
    from .from_trace import TraceEfficiency

# the model's baseline more than this factor off the measured step: the job given (model, batch,
# devices) is probably not the run that was measured, and the what-if says so
WHAT_IF_MISMATCH = 2.0


def from_csv(
    job: Job,
    path: str,
    make_job: Callable[[dict[str, Any]], Job],
    known: frozenset[str],
    progress: Callable[[int, int], None] | None = None,
    traced: dict[str, Any] | None = None,
) -> tuple[Job, dict[str, Any]]:
    """The job calibrated on the runs of a CSV (calib_csv.py), and what the calibration reports.
    ``traced``: the calibration fields a trace of the job's run measured (from_analysis), which
    the fit holds when the runs are all of the job's model on its device (calib_csv.from_csv)."""
    from .calib_csv import from_csv as read_runs
    from .calibrate import at_grid_edge

    cal = read_runs(path, make_job, known, progress, traced, job)
    info: dict[str, Any] = {
        "runs": cal.rows,
        **dataclasses.asdict(cal.fit),
        "mape_before": cal.mape_before,
        "mape_after_leave_one_out": cal.mape_after_loo,
        "per_run": list(cal.per_run),
        "leave_one_out_range": {k: list(v) for k, v in cal.loo_range.items()},
    }
    if cal.held:
        info["held_from_trace"] = list(cal.held)
    if cal.not_held:
        info["trace_not_held"] = cal.not_held
    if cal.ignored_columns:
        info["ignored_columns"] = list(cal.ignored_columns)
    if edge := at_grid_edge(cal.fit):
        info["at_grid_edge"] = edge
    fitted = cal.fit
    if traced and not cal.held:  # the trace's own values stand for what it measured
        from .calib_csv import PINS

        fitted = dataclasses.replace(fitted, **{PINS[k]: 1.0 for k in traced if k in PINS})
    return fitted.apply(job), info


def from_analysis(
    job: Job, path: str, rank: int | None, own_dp_overlap: bool, traced: Strategy | None = None
) -> tuple[Job, dict[str, Any]]:
    """The job with the efficiencies, communication scales and DP overlap a traced run measured
    (from_trace.py; a dp_overlap set explicitly wins over the trace's: a what-if of another
    overlap), and what the trace reports; on the traced device, its runtime's memory. Given the
    traced run's strategy (``traced``), also the op-class scales its profile measures
    (op_profile.py)."""
    from .from_trace import read

    te = read(path, rank)
    # the experts' grouped GEMMs: rated by their own class when the profile's calibration sets it,
    # else in with the other GEMMs
    by_class = traced is not None and "grouped_gemm" in (te.op_time_s or {})
    changes: dict[str, Any] = {
        k: v
        for k, v in (
            ("gemm_eff", te.gemm_eff if by_class else (te.gemm_eff_with_experts or te.gemm_eff)),
            ("attn_eff", te.attn_eff),
            ("dp_overlap", None if own_dp_overlap else te.dp_overlap),
            ("comm_scale", te.comm_scale),
            ("inter_scale", te.inter_scale),
        )
        if v is not None
    }
    job = job.calibrated(**{("measured_dp_overlap" if k == "dp_overlap" else k): v for k, v in changes.items()})
    info: dict[str, Any] = {
        "trace": path,
        "trace_rank": te.rank,
        "trace_step_time_s": te.step_s,
        "trace_hardware": te.hardware,
        **{f"measured_{k}": v for k, v in changes.items()},
    }
    optional = {
        "trace_step_parts_s": te.parts_s,
        "trace_host_bound_s": te.host_bound_s,
        "trace_why_no_flops": te.why_no_flops,
    }
    info |= {k: v for k, v in optional.items() if v}
    if te.hardware and te.hardware.lower() != job.hw.name.lower():
        # efficiencies are ratios to the traced device's peak, and the what-if anchors on its step
        info["trace_hardware_differs"] = True
    elif te.memory_bytes:  # the same device: fit against the memory its runtime reported
        job = dataclasses.replace(job, hw=dataclasses.replace(job.hw, hbm_bytes=int(te.memory_bytes)))
        info["trace_memory_gb"] = te.memory_bytes / 1e9
    return _by_op_class(job, te, traced, info)


def _by_op_class(
    job: Job, te: TraceEfficiency, traced: Strategy | None, info: dict[str, Any]
) -> tuple[Job, dict[str, Any]]:
    """The job with the op-class scales of the traced run's profile (op_profile.py): the kernel
    classes the trace timed, and its exposed communication where no bandwidth scale was measured.
    Without the traced strategy the classes are only named."""
    from .op_profile import profile_scales

    exposed = (te.parts_s or {}).get("exposed_comm") if te.comm_scale is None else None
    if traced is None:
        if te.op_time_s:
            info["trace_op_classes_unused"] = sorted(te.op_time_s)
        return job, info
    if not te.op_time_s and not exposed:
        return job, info
    compute = (te.parts_s or {}).get("compute")
    changes, found = profile_scales(job, traced, te.op_time_s or {}, exposed, compute)
    info |= {f"measured_{k}": v for k, v in changes.items()} | found
    return job.calibrated(**changes), info


def with_host_wait(job: Job, baseline: Strategy, host_bound_s: float) -> Job:
    """The job with the traced step's host-bound idle as a host wait per layer and micro-batch
    (Job.layer_overhead_s): the idle the baseline's modeled host time does not already explain (a
    ZeRO gather done tensor by tensor, zero_gather_copy_us) / the baseline's layers per stage x
    micro-batches x recompute factor (its host time at 1 s per layer and micro-batch), so a what-if
    with more or fewer micro-batches or layers per stage waits on the host in proportion."""
    s = baseline.arrays()
    modeled, at_1s = (
        float(evaluate(job.calibrated(layer_overhead_s=w), s, keys=("host_s",))["host_s"][0]) for w in (0.0, 1.0)
    )
    per_unit = at_1s - modeled
    return job.calibrated(layer_overhead_s=max(host_bound_s - modeled, 0.0) / per_unit) if per_unit > 0 else job


def model_parts(rec: dict[str, Any]) -> dict[str, float]:
    """A predicted step in the trace's terms: compute (with the optimizer step and offload), exposed
    communication (TP, EP, DP, CP, pipeline p2p) and idle (the pipeline bubble, the host wait)."""
    t = rec["time_s"]
    return {
        "compute": t["compute"] + t["optimizer"] + t["offload"],
        "exposed_comm": t["tp"] + t["ep"] + t["dp"] + t["cp"] + t["pp_p2p"],
        "idle": t["bubble"] + t["host"],
    }


def what_if(rec: dict[str, Any], base: dict[str, Any], measured: float, calib: dict[str, Any]) -> dict[str, Any]:
    """The what-if of ``rec`` against the baseline's record: the measured run anchors the model,
    predicted new / predicted baseline x measured."""
    out: dict[str, Any] = {
        "baseline": base["strategy"],
        "measured_step_time_s": measured,
        "predicted_baseline_step_time_s": base["step_time_s"],
        "predicted_step_time_s": measured * rec["step_time_s"] / base["step_time_s"],
        # far from 1: the job given is probably not the run measured (model, batch, devices)
        "baseline_model_over_measured": base["step_time_s"] / measured,
        "speedup_vs_baseline": base["step_time_s"] / rec["step_time_s"],  # measured / predicted new
    }
    if calib.get("trace_step_parts_s"):  # where the model's baseline differs from the traced step
        out["baseline_parts_s"] = {"measured": calib["trace_step_parts_s"], "model": model_parts(base)}
    out["baseline_far_from_measured"] = not (
        1 / WHAT_IF_MISMATCH <= out["baseline_model_over_measured"] <= WHAT_IF_MISMATCH
    )
    return out


def needs_both() -> ConfigError:
    """The error of a what-if that lacks its baseline or the measured step."""
    return ConfigError(
        "what-if needs --baseline and a measured step time",
        fix="e.g. --baseline tp=8,dp=4 --measured-step-s 3.2 (or --from-analysis report.json)",
    )
