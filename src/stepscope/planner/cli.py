"""``stepscope plan``: search, ``--evaluate`` one strategy, or ``--batch`` many records."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from typing import Any

from ..catalog.hardware import HBM_VISIBLE
from ..errors import ConfigError, InputError
from ..outfile import write_output
from . import frameworks
from .alternatives import alternatives_line, fitting_alternatives
from .cost import RECOMPUTE, TP_OVERLAP, Job, evaluate
from .job import DUALPIPE, DUALPIPEV, dualpipe_micro_batches_ok, tp_overlap_needs_sp
from .rates import base_dtype
from .record import RECORD_KEYS, ignored_keys, job_from_record
from .render import (
    caveat_lines,
    memory_line,
    overlap_line,
    rate_line,
    records,
    sensitivity_line,
    table,
    what_if_lines,
)
from .search import parse_strategy, recompute_policies, search
from .settings import job_settings, settings_line


def _one(job: Job, strategy: str) -> dict[str, Any]:
    if job.model.n_experts and re.search(r"(^|,)\s*recompute\s*=\s*layernorm\s*(,|$)", strategy):
        raise ConfigError(
            "recompute=layernorm names Megatron's --recompute-modules layernorm on a dense model; "
            "for MoE models the planner models layernorm with moe_act",
            fix="use recompute=layernorm_moe_act",
        )
    s = parse_strategy(strategy)
    if int(s["recompute"][0]) not in recompute_policies(job.model):
        raise ConfigError(
            f"recompute={RECOMPUTE[int(s['recompute'][0])]} recomputes multi-latent attention's up-projections, "
            "which this model does not have",
            fix="use recompute=none (or layernorm_moe_act)",
        )
    if (s["tp"] * s["pp"] * s["cp"] * s["dp"])[0] != job.devices:
        raise ConfigError(f"tp*pp*cp*dp must equal --devices ({job.devices})", fix="adjust the strategy")
    dp, ga, mb = int(s["dp"][0]), int(s["ga"][0]), int(s["mb"][0])
    per = dp * (ga or mb)  # sequences per micro-batch step over the replicas
    if job.global_batch % per:
        what = f"dp x ga = {dp} x {ga}" if ga else f"dp x mb = {dp} x {mb}"
        raise ConfigError(
            f"the global batch ({job.global_batch}) is not a multiple of {what}",
            fix="choose mb (or ga) so that whole sequences fill every micro-batch",
        )
    pp, replica = int(s["pp"][0]), job.global_batch // dp
    if pp > 1 and not ga and replica // mb < pp and replica % pp:
        raise ConfigError(
            f"a pipeline of {pp} stages splits each replica's {replica} sequences into at least {pp} micro-batches, "
            f"which {replica} sequences cannot fill evenly",
            fix=f"state ga={replica // mb} to run fewer micro-batches than stages, or change dp/pp",
        )
    n_micro = ga or replica // mb
    if int(s["sched"][0]) in (DUALPIPE, DUALPIPEV) and not dualpipe_micro_batches_ok(n_micro, pp):
        raise ConfigError(
            f"DualPipe splits each replica's batch into an even number of micro-batches, at least 2 x pp = {2 * pp} "
            f"(here {n_micro})",
            fix="lower mb or dp, or raise the global batch",
        )
    return records(s, evaluate(job, s), dense=not job.model.n_experts)[0]


def run(ns: argparse.Namespace) -> int:
    if ns.batch:
        try:
            with open(ns.batch, encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except OSError as exc:
            raise InputError(f"cannot read ({exc.strerror})", path=ns.batch, fix="pass a JSONL file") from None
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    raise ConfigError(
                        f"line {n}: a record must be a JSON object, not {type(rec).__name__}",
                        path=ns.batch,
                        fix='e.g. {"model": "llama3-8b", "hardware": "h100", ...}',
                    )
                full = _with_cli_defaults(rec, ns)
                fw = frameworks.by_name(str(full["framework"])) if full.get("framework") not in (None, "") else None
                job = job_from_record(full)
                out = _one(job, frameworks.strategy(fw, str(rec.get("strategy", ""))))
                out["settings"] = job_settings(job)
                if ignored := ignored_keys(rec):
                    out["ignored_keys"] = ignored
            except ConfigError as exc:
                out = {"error": exc.one_line()}
            except (ValueError, TypeError) as exc:
                out = {"error": f"line {n}: {exc}"}
            print(json.dumps(out))
        return 0
    job = job_from_record(
        {
            k: getattr(ns, k, None)
            for k in (
                "model",
                "hardware",
                "devices",
                "global_batch",
                "global_batch_tokens",
                "seq_len",
                "devices_per_node",
                "precision",
                "reserve_gb",
                "grad_dtype",
                "fp8_recipe",
                "dp_bucket_mb",
                "zero_gather_copy_us",
                "grad_accum_bytes",
                "optimizer_bytes",
                "network",
                "moe_imbalance",
                "host_wait_us",
                "dp_overlap",
                "loss",
                "hardware_file",
                "framework",
                "eager_swiglu",
                "fused_projections",
                "kv_repeated",
                "fp8_weight_cache",
                "fp8_saved_inputs",
                "fp8_all_gather",
                "fp8_gain_thresholds",
                "zero3_prefetch",
                "sp_saves_gathered",
                "sp_regather",
                "attention_kernel",
                "zero3_gather",
                "ep_dispatch",
                "deepep_sms",
                "pipeline_split_cost",
            )
        }
        | {
            k: getattr(ns, k, default)
            for k, default in (
                ("flash_attention", True),
                ("fused_elementwise", True),
                ("param_gather_overlap", False),
                ("zero_sync_after_backward", False),
                ("fused_loss", True),
                ("pipeline_split_embedding", False),
                ("hidden_dropout", False),
            )
        }
    )
    job, calib = _calibrated(job, ns)
    # framework properties: apply to every strategy given (a --framework preset's TP overlap only
    # where neither --tp-overlap nor the strategy states one)
    fw = frameworks.by_name(ns.framework) if getattr(ns, "framework", None) else None
    tp_mode = _tp_mode(getattr(ns, "tp_overlap", None))
    no_sp = not getattr(ns, "sequence_parallel", True)
    if no_sp and tp_overlap_needs_sp(tp_mode):
        raise ConfigError(
            f"--tp-overlap {TP_OVERLAP[tp_mode]} needs sequence parallelism",
            fix="drop --no-sequence-parallel, or use --tp-overlap bwd",
        )
    extra = ([f"tp_overlap={TP_OVERLAP[tp_mode]}"] if tp_mode else []) + (
        ["ep_overlap=1"] if getattr(ns, "ep_overlap", False) else []
    )
    extra += ["sp=0"] if no_sp else []
    for part in extra:
        ns.evaluate = ns.evaluate and f"{ns.evaluate},{part}"
        ns.baseline = ns.baseline and f"{ns.baseline},{part}"
    if fw is not None:
        own_tp = getattr(ns, "tp_overlap", None) is None
        ns.evaluate = ns.evaluate and frameworks.strategy(fw, ns.evaluate, add_tp_overlap=own_tp)
        ns.baseline = ns.baseline and frameworks.strategy(fw, ns.baseline, add_tp_overlap=own_tp)
        preset = TP_OVERLAP.index(fw.settings.get("tp_overlap", "none"))
        if own_tp and not (no_sp and tp_overlap_needs_sp(preset)):
            tp_mode = preset
    if ns.evaluate:
        if ns.baseline and calib.get("trace_host_bound_s"):  # the traced host-bound idle, spread over the baseline
            job = _with_host_wait(job, ns.baseline, calib["trace_host_bound_s"])
            calib["measured_layer_overhead_s"] = float(job.layer_overhead_s)
        rec = _one(job, ns.evaluate)
        measured = ns.measured_step_s or calib.get("trace_step_time_s")
        if ns.baseline or measured:
            if not (ns.baseline and measured):
                raise ConfigError(
                    "what-if needs --baseline and a measured step time",
                    fix="e.g. --baseline tp=8,dp=4 --measured-step-s 3.2 (or --from-analysis report.json)",
                )
            base = _one(job, ns.baseline)
            # the measured run anchors the model: predicted new / predicted baseline x measured
            rec["what_if"] = {
                "baseline": base["strategy"],
                "measured_step_time_s": measured,
                "predicted_baseline_step_time_s": base["step_time_s"],
                "predicted_step_time_s": measured * rec["step_time_s"] / base["step_time_s"],
                # far from 1: the job given is probably not the run measured (model, batch, devices)
                "baseline_model_over_measured": base["step_time_s"] / measured,
                "speedup_vs_baseline": base["step_time_s"] / rec["step_time_s"],  # measured / predicted new
            }
            if calib.get("trace_step_parts_s"):  # where the model's baseline differs from the traced step
                rec["what_if"]["baseline_parts_s"] = {
                    "measured": calib["trace_step_parts_s"],
                    "model": _model_parts(base),
                }
            rec["what_if"]["baseline_far_from_measured"] = not (
                1 / WHAT_IF_MISMATCH <= rec["what_if"]["baseline_model_over_measured"] <= WHAT_IF_MISMATCH
            )
        if calib:
            rec["calibration"] = calib
        from .sensitivity import sensitivity

        rec["sensitivity"] = sensitivity(job, parse_strategy(ns.evaluate))
        rec["settings"] = job_settings(job)
        fit_lines = []
        if not rec["fits"]:  # what to change first: the fastest that fit with the same layout
            rec["fitting_alternatives"] = fitting_alternatives(
                job,
                parse_strategy(ns.evaluate),
                policies=fw.recompute if fw else None,
                zero_stages=fw.zero if fw else (),
            )
            fit_lines.append(alternatives_line(rec["fitting_alternatives"]))
        caveats = _caveats(job, [rec])
        overlap = overlap_line(rec)
        lines = [
            rate_line(rec),
            *([overlap] if overlap else []),
            memory_line(rec),
            *fit_lines,
            sensitivity_line(rec["sensitivity"]),
            settings_line(rec["settings"]),
            *what_if_lines(rec),
            *caveats,
        ]
        rec["caveats"] = [c.removeprefix("note: ") for c in caveats]  # the least validated terms it leans on
        if ns.html:  # the strategy, and beside it the baseline of a what-if
            _write_html(
                ns.html,
                job,
                ns.model,
                [rec, base] if "what_if" in rec else [rec],
                "what-if against the measured baseline (second row)" if "what_if" in rec else "one configuration",
                lines,
            )
        if ns.json:
            print(json.dumps(rec))
        else:
            _print_wide(table([rec]), *lines)
        return 0
    plan = search(
        job,
        ns.top,
        tp_overlap=tp_mode,
        tp_across_nodes=bool(getattr(ns, "tp_across_nodes", False)),
        ep_overlap=bool(getattr(ns, "ep_overlap", False)),
        sequence_parallel=not no_sp,
        where=frameworks.where(fw, getattr(ns, "where", "") or ""),
        distinct=bool(getattr(ns, "distinct", False)),
    )
    recs = records(plan.strategies, plan.results, dense=not job.model.n_experts)
    settings = job_settings(job)
    for r in recs:
        r["settings"] = settings
    notes = [*_no_fit_lines(plan, job), *what_if_lines({"calibration": calib}), *_caveats(job, recs)]
    meeting = f" meeting --where {ns.where}" if getattr(ns, "where", None) else ""
    meeting += f" ({fw.name}'s recompute policies, schedules and ZeRO stages)" if fw is not None else ""
    distinct = "; one row per layout (the fastest of each)" if getattr(ns, "distinct", False) else ""
    if ns.html:
        _write_html(
            ns.html,
            job,
            ns.model,
            recs,
            f"{plan.evaluated:,} configurations{meeting}{distinct}",
            [settings_line(settings), *notes],
        )
    if ns.json:
        print(json.dumps(recs))  # a list (the stable interface): what the calibration used goes to stderr
        for line in what_if_lines({"calibration": calib}):
            print(line, file=sys.stderr)
    else:
        _print_wide(
            table(recs),
            f"{plan.evaluated:,} valid configurations{meeting} evaluated{distinct}{_network_note(job)}",
            _capacity_line(job),
            settings_line(settings),
            *notes,
        )
    return 0


def _with_host_wait(job: Job, baseline: str, host_bound_s: float) -> Job:
    """The job with the traced step's host-bound idle as a host wait per layer and micro-batch
    (Job.layer_overhead_s): the idle the baseline's modeled host time does not already explain (a
    ZeRO gather done tensor by tensor, Job.zero_gather_copy_s) / the baseline's layers per stage x
    micro-batches x recompute factor (its host time at 1 s per layer and micro-batch), so a what-if
    with more or fewer micro-batches or layers per stage waits on the host in proportion."""
    s = parse_strategy(baseline)
    modeled, at_1s = (
        float(evaluate(dataclasses.replace(job, layer_overhead_s=w), s, keys=("host_s",))["host_s"][0])
        for w in (0.0, 1.0)
    )
    per_unit = at_1s - modeled
    return (
        dataclasses.replace(job, layer_overhead_s=max(host_bound_s - modeled, 0.0) / per_unit) if per_unit > 0 else job
    )


def _model_parts(rec: dict[str, Any]) -> dict[str, float]:
    """A predicted step in the trace's terms: compute (with the optimizer step and offload), exposed
    communication (TP, EP, DP, CP, pipeline p2p) and idle (the pipeline bubble, the host wait)."""
    t = rec["time_s"]
    return {
        "compute": t["compute"] + t["optimizer"] + t["offload"],
        "exposed_comm": t["tp"] + t["ep"] + t["dp"] + t["cp"] + t["pp_p2p"],
        "idle": t["bubble"] + t["host"],
    }


def _capacity_line(job: Job) -> str:
    """What 'fits' is measured against: the device's memory as its runtime reports it."""
    hw = job.hw
    how = (
        "as CUDA/ROCm report it"
        if hw.hbm_bytes
        else f"{hw.hbm_gb:g} GiB x {HBM_VISIBLE:g}, no measured figure"
        if hw.hbm_gb
        else "no memory size in the catalog: an 80 GiB part"
    )
    return f"memory per device: {job.capacity_bytes / 1e9:,.1f} GB on {hw.name} ({how}), {job.reserve_gb:g} GB of it reserved"


def _no_fit_lines(plan: Any, job: Job) -> list[str]:
    """When no configuration fits: the rows shown are the smallest, and by how much they miss."""
    if plan.fitting:  # (search refuses an empty space, so there is always a row)
        return []
    r = plan.results
    states = float(r["weights_gb"][0] + r["grads_gb"][0] + r["optimizer_gb"][0])
    line = (
        f"no configuration fits in {job.capacity_bytes / 1e9:,.1f} GB per device: the rows are the smallest, from {float(r['total_gb'][0]):,.1f} GB "
        f"({states:,.1f} GB of it weights, gradients and optimizer states); add devices"
    )
    return [line]


def _write_html(path: str, job: Job, model_name: str, recs: list[dict[str, Any]], what: str, notes: list[str]) -> None:
    from .html import render

    title = (
        f"{model_name} on {job.devices} x {job.hw.name}, global batch {job.global_batch} x {job.seq_len} tokens; "
        f"{what}{_network_note(job)}"
    )
    write_output(path, render(recs, title, job.capacity_bytes / 1e9, notes))


def _caveats(job: Job, recs: list[dict[str, Any]]) -> list[str]:
    """The caveat lines for these rows: a calibrated or trace-measured GEMM efficiency replaces the
    prior, so the missing-ceiling note is left out then."""
    measured = base_dtype(job.precision) in job.hw.matmul_eff or job.gemm_eff is not None or job.gemm_scale != 1.0
    return caveat_lines(
        recs,
        measured_ceiling=measured,
        device=job.hw.name,
        fp8_rowwise=job.precision == "fp8" and job.fp8_recipe == "rowwise",
        moe=job.model.n_experts > 0,
        nodes=job.devices // job.devices_per_node,
    )


def _network_note(job: Job) -> str:
    """What the times assume beyond the catalog: a measured cluster network, MoE routing imbalance."""
    net = f"; network: {job.network.name} (measured, {job.network.source.split(',')[0]})" if job.network else ""
    return net + (
        f"; MoE imbalance {job.moe_imbalance:g} (most loaded expert rank / mean)" if job.moe_imbalance != 1.0 else ""
    )


def _print_wide(t: Any, *lines: str) -> None:
    """Print the table at its natural width even when the terminal is narrower: a cell cut to
    "…" says nothing, a wrapped line still does."""
    from rich.console import Console
    from rich.measure import Measurement

    probe = Console()
    need = Measurement.get(probe, probe.options.update(width=10_000), t).maximum
    con = Console(width=max(probe.width, need))
    con.print(t)
    for line in lines:  # user-given names and paths: no rich markup
        con.print(line, markup=False, highlight=False)


# the model's baseline more than this factor off the measured step: the job given (model, batch,
# devices) is probably not the run that was measured, and the what-if says so
WHAT_IF_MISMATCH = 2.0


def _calibrated(job: Job, ns: argparse.Namespace) -> tuple[Job, dict[str, Any]]:
    """Apply --calibrate (fit on a CSV) and --from-analysis (efficiencies measured in a trace)."""
    info: dict[str, Any] = {}
    if ns.calibrate:
        from .calib_csv import from_csv

        cal = from_csv(ns.calibrate, lambda r: job_from_record(_with_cli_defaults(r, ns)), RECORD_KEYS)
        job = cal.fit.apply(job)
        info.update(
            {
                "runs": cal.rows,
                **dataclasses.asdict(cal.fit),
                "mape_before": cal.mape_before,
                "mape_after_leave_one_out": cal.mape_after_loo,
                "per_run": list(cal.per_run),
                "leave_one_out_range": {k: list(v) for k, v in cal.loo_range.items()},
            }
        )
        if cal.ignored_columns:
            info["ignored_columns"] = list(cal.ignored_columns)
        from .calibrate import at_grid_edge

        if edge := at_grid_edge(cal.fit):
            info["at_grid_edge"] = edge
    if ns.from_analysis:
        from .from_trace import read

        te = read(ns.from_analysis, ns.rank)
        # a share given by --dp-overlap wins over the trace's (a what-if of another overlap)
        traced_overlap = te.dp_overlap if getattr(ns, "dp_overlap", None) is None else None
        changes: dict[str, Any] = {
            k: v
            for k, v in (
                ("gemm_eff", te.gemm_eff),
                ("attn_eff", te.attn_eff),
                ("dp_overlap", traced_overlap),
                ("comm_scale", te.comm_scale),
                ("inter_scale", te.inter_scale),
            )
            if v is not None
        }
        job = dataclasses.replace(job, **changes)
        info.update(
            {
                "trace": ns.from_analysis,
                "trace_rank": te.rank,
                "trace_step_time_s": te.step_s,
                "trace_hardware": te.hardware,
                **{f"measured_{k}": v for k, v in changes.items()},
            }
        )
        if te.parts_s:
            info["trace_step_parts_s"] = te.parts_s
        if te.host_bound_s:
            info["trace_host_bound_s"] = te.host_bound_s
        if te.why_no_flops:
            info["trace_why_no_flops"] = te.why_no_flops
        if te.hardware and te.hardware.lower() != job.hw.name.lower():
            # efficiencies are ratios to the traced device's peak, and the what-if anchors on its step
            info["trace_hardware_differs"] = True
        elif te.memory_bytes:  # the same device: fit against the memory its runtime reported
            job = dataclasses.replace(job, hw=dataclasses.replace(job.hw, hbm_bytes=int(te.memory_bytes)))
            info["trace_memory_gb"] = te.memory_bytes / 1e9
    return job, info


def _with_cli_defaults(rec: dict[str, Any], ns: argparse.Namespace) -> dict[str, Any]:
    """A --batch record or --calibrate row with --hardware-file and --framework where it names none
    of its own (absent or blank)."""
    out = dict(rec)
    for key in ("hardware_file", "framework"):
        if out.get(key) in (None, "") and getattr(ns, key, None):
            out[key] = getattr(ns, key)
    return out


def _tp_mode(value: object) -> int:
    """--tp-overlap's mechanism name as a TP_OVERLAP code (absent: none)."""
    return TP_OVERLAP.index(value) if value in TP_OVERLAP else 0
