"""A plan as data: one configuration evaluated (``--evaluate``) or the fastest found by the search,
with the lines said under them (planner/result.py ``PlanResult``). The command line (planner/cli.py)
and the Python API (planner/api.py) both build their plans here."""

from __future__ import annotations

from typing import Any

from ..catalog.hardware import HBM_VISIBLE
from ..errors import ConfigError
from ..report.plan_lines import caveat_lines, memory_line, overlap_line, rate_line, sensitivity_line, what_if_lines
from . import frameworks, whatif
from .alternatives import alternatives_line, fitting_alternatives
from .cost import evaluate
from .job import Job
from .rates import base_dtype
from .recompute import RECOMPUTE
from .records import records
from .result import PlanResult
from .search import Plan, recompute_policies, search
from .sensitivity import sensitivity
from .settings import job_settings, settings_line
from .strategy import Strategy
from .switches import switches
from .vocab import DUALPIPE, DUALPIPEV, dualpipe_micro_batches_ok


def strategy_of(job: Job, fw: frameworks.Framework | None, text: str) -> Strategy:
    """A strategy's text under the job's framework configuration (its overlap mechanisms where the
    text states none) and the framework preset's policies, schedules and ZeRO stages."""
    return frameworks.check_strategy(fw, Strategy.parse(text).under(job.framework))


def check_on_job(job: Job, s: Strategy) -> None:
    """What a strategy must meet to run on this job (its batch, devices, model)."""
    if job.model.n_experts and s.layernorm:
        raise ConfigError(
            "recompute=layernorm names Megatron's --recompute-modules layernorm on a dense model; "
            "for MoE models the planner models layernorm with moe_act",
            fix="use recompute=layernorm_moe_act",
        )
    if s.recompute not in recompute_policies(job.model):
        raise ConfigError(
            f"recompute={RECOMPUTE[s.recompute]} recomputes multi-latent attention's up-projections, "
            "which this model does not have",
            fix="use recompute=none (or layernorm_moe_act)",
        )
    if s.tp * s.pp * s.cp * s.dp != job.devices:
        raise ConfigError(f"tp*pp*cp*dp must equal --devices ({job.devices})", fix="adjust the strategy")
    per = s.dp * (s.ga or s.mb)  # sequences per micro-batch step over the replicas
    if job.global_batch % per:
        what = f"dp x ga = {s.dp} x {s.ga}" if s.ga else f"dp x mb = {s.dp} x {s.mb}"
        raise ConfigError(
            f"the global batch ({job.global_batch}) is not a multiple of {what}",
            fix="choose mb (or ga) so that whole sequences fill every micro-batch",
        )
    pp, replica = s.pp, job.global_batch // s.dp
    if pp > 1 and not s.ga and replica // s.mb < pp and replica % pp:
        raise ConfigError(
            f"a pipeline of {pp} stages splits each replica's {replica} sequences into at least {pp} micro-batches, "
            f"which {replica} sequences cannot fill evenly",
            fix=f"state ga={replica // s.mb} to run fewer micro-batches than stages, or change dp/pp",
        )
    n_micro = s.ga or replica // s.mb
    if s.sched in (DUALPIPE, DUALPIPEV) and not dualpipe_micro_batches_ok(n_micro, pp):
        raise ConfigError(
            f"DualPipe splits each replica's batch into an even number of micro-batches, at least 2 x pp = {2 * pp} "
            f"(here {n_micro})",
            fix="lower mb or dp, or raise the global batch",
        )


def one_record(job: Job, s: Strategy) -> dict[str, Any]:
    check_on_job(job, s)
    return records(s.arrays(), evaluate(job, s.arrays()), dense=not job.model.n_experts)[0]


def framework_of(name: str | None) -> frameworks.Framework | None:
    return frameworks.by_name(name) if name not in (None, "") else None


def _evaluate_record(
    job: Job, calib: dict[str, Any], strategy: Strategy, baseline: Strategy | None, measured_step_s: float | None
) -> tuple[Job, dict[str, Any], dict[str, Any] | None]:
    """The --evaluate record with its what-if against the baseline (and the job, with a traced
    host wait spread over the baseline), and the baseline's record."""
    if baseline is not None and calib.get("trace_host_bound_s"):  # the traced host-bound idle
        job = whatif.with_host_wait(job, baseline, calib["trace_host_bound_s"])
        calib["measured_layer_overhead_s"] = float(job.layer_overhead_s)
    rec = one_record(job, strategy)
    measured = measured_step_s or calib.get("trace_step_time_s")
    base = None
    if baseline is not None or measured:
        if baseline is None or not measured:
            raise whatif.needs_both()
        base = one_record(job, baseline)
        rec["what_if"] = whatif.what_if(rec, base, measured, calib)
    if calib:
        rec["calibration"] = calib
    return job, rec, base


def evaluate_result(
    job: Job,
    fw: frameworks.Framework | None,
    strategy_text: str,
    *,
    model_name: str,
    calib: dict[str, Any] | None = None,
    baseline_text: str | None = None,
    measured_step_s: float | None = None,
) -> PlanResult:
    """One configuration (``--evaluate``): its record with sensitivity, settings, what fits instead
    when it does not, and a what-if against a measured baseline when one is given."""
    calib = dict(calib or {})
    strategy = strategy_of(job, fw, strategy_text)
    baseline = strategy_of(job, fw, baseline_text) if baseline_text else None
    job, rec, base = _evaluate_record(job, calib, strategy, baseline, measured_step_s)
    rec["sensitivity"] = sensitivity(job, strategy.arrays())
    rec["settings"] = job_settings(job)
    fit_lines = []
    if not rec["fits"]:  # what to change first: the fastest that fit with the same layout
        rec["fitting_alternatives"] = fitting_alternatives(
            job,
            strategy.arrays(),
            policies=fw.recompute if fw else None,
            zero_stages=fw.zero_stages(strategy.pp) if fw else (),
        )
        fit_lines.append(alternatives_line(rec["fitting_alternatives"]))
    caveats = _caveats(job, [rec])
    overlap = overlap_line(rec)
    lines = (
        rate_line(rec),
        *([overlap] if overlap else []),
        memory_line(rec),
        *fit_lines,
        sensitivity_line(rec["sensitivity"]),
        settings_line(rec["settings"]),
        *what_if_lines(rec),
        *caveats,
    )
    rec["caveats"] = [c.removeprefix("note: ") for c in caveats]  # the least validated terms it leans on
    what = "what-if against the measured baseline (second row)" if base is not None else "one configuration"
    result = PlanResult(
        records=(rec,),
        single=True,
        lines=lines,
        title=_title(job, model_name, what),
        notes=lines,
        capacity_gb=job.capacity_bytes / 1e9,
        compared=(base,) if base is not None else (),  # the HTML draws the baseline beside it
    )
    return result


def search_result(
    job: Job,
    fw: frameworks.Framework | None,
    *,
    model_name: str,
    top: int = 20,
    where: str = "",
    distinct: bool = False,
    calib: dict[str, Any] | None = None,
) -> PlanResult:
    """The ``top`` fastest configurations that fit (search.search), as the rows and lines a plan shows."""
    calib = calib or {}
    plan = search(
        job,
        top,
        where=frameworks.where(fw, where),
        distinct=distinct,
        pipeline_zero=fw.pipeline_zero if fw else (),
        asked=where,
    )
    recs = records(plan.strategies, plan.results, dense=not job.model.n_experts)
    settings = job_settings(job)
    for r in recs:
        r["settings"] = settings
        if fw is not None:
            r["framework"] = fw.name
            r["switches"] = _switches(job, fw, r["strategy"])
    run_line = (
        [f"run the first row with {fw.name} (--evaluate it with --framework {fw.name}): {recs[0]['switches']}"]
        if fw is not None and recs
        else []
    )
    notes = (
        *_no_fit_lines(plan, job),
        *_margin_lines(job, recs),
        *what_if_lines({"calibration": calib}),
        *_caveats(job, recs),
        *run_line,
    )
    meeting = f" meeting --where {where}" if where else ""
    shown = "; one row per layout (the fastest of each)" if distinct else ""
    fw_line = (
        [
            f"framework: {fw.name}, only its recompute policies, pipeline schedules and ZeRO stages (--framework NAME for another)"
        ]
        if fw is not None
        else []
    )
    result = PlanResult(
        records=tuple(recs),
        single=False,
        lines=(
            f"{plan.evaluated:,} valid configurations{meeting} evaluated{shown}{_network_note(job)}",
            *fw_line,
            _capacity_line(job),
            settings_line(settings),
            *notes,
        ),
        title=_title(job, model_name, f"{plan.evaluated:,} configurations{meeting}{shown}"),
        notes=(*fw_line, settings_line(settings), *notes),
        capacity_gb=job.capacity_bytes / 1e9,
    )
    return result


def _margin_lines(job: Job, recs: list[dict[str, Any]]) -> list[str]:
    """Rows that fit but leave less than the memory margin free, which the search ranks last."""
    cap_gb = job.capacity_bytes / 1e9
    tight = [r for r in recs if r["fits"] and r["headroom_gb"] < job.memory_margin * cap_gb]
    if not tight or not job.memory_margin:
        return []
    return [
        f"{len(tight)} of these rows leave less than {job.memory_margin:.0%} of the device free "
        f"({job.memory_margin * cap_gb:.1f} GB: allocator fragmentation, the memory model's error) and are ranked "
        "after those that do; --set memory_margin=0 ranks by step alone"
    ]


def _switches(job: Job, fw: frameworks.Framework, strategy: dict[str, Any]) -> str:
    """The row's strategy as ``fw``'s own switches (planner/switches.py)."""
    m = job.model
    return switches(
        fw.name,
        strategy,
        layers=m.n_layers,
        global_batch=job.global_batch,
        seq_len=job.seq_len,
        experts=m.n_experts,
        cores=job.hw.runtime_devices,
        split_embedding=job.framework.pipeline.split_embedding,
        mtp=m.mtp_layers,
    )


def _title(job: Job, model_name: str, what: str) -> str:
    """The HTML page's title line: the job, what the rows are."""
    return (
        f"{model_name} on {job.devices} x {job.hw.name}, global batch {job.global_batch} x {job.seq_len} tokens; "
        f"{what}{_network_note(job)}"
    )


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


def _no_fit_lines(plan: Plan, job: Job) -> list[str]:
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


def _caveats(job: Job, recs: list[dict[str, Any]]) -> list[str]:
    """The caveat lines for these rows: a calibrated or trace-measured GEMM efficiency replaces the
    prior, so the missing-ceiling note is left out then."""
    cal = job.calibration
    measured = base_dtype(job.precision) in job.hw.matmul_eff or cal.gemm_eff is not None or cal.gemm_scale != 1.0
    return caveat_lines(
        recs,
        measured_ceiling=measured,
        device=job.hw.name,
        fp8_rowwise=job.precision == "fp8" and job.framework.fp8.recipe == "rowwise",
        moe=job.model.n_experts > 0,
        nodes=job.devices // job.devices_per_node,
    )


def _network_note(job: Job) -> str:
    """What the times assume beyond the catalog: a measured cluster network, MoE routing imbalance."""
    net = f"; network: {job.network.name} (measured, {job.network.source.split(',')[0]})" if job.network else ""
    imbalance = job.framework.moe.imbalance
    return net + (f"; MoE imbalance {imbalance:g} (most loaded expert rank / mean)" if imbalance != 1.0 else "")
