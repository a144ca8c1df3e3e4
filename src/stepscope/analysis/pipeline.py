"""Trace -> Analysis: the per-rank step breakdown plus rank-level statistics.

New rank-level analyses register in ``RANK_ANALYSES`` (name -> function of the prepared rank);
their results land in ``RankAnalysis.extras[name]``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..catalog import hardware
from ..catalog.hardware import Hardware
from ..errors import ConfigError
from ..trace.counters import read_counter_ranges
from ..trace.dictcol import dict_mask
from ..trace.loader import RankInfo, Trace, assemble, jobs_for, rank_of, read_one, resolve_ranks
from .classify import Rules, load_rules
from .cluster import comm_events
from .cluster import view as cluster
from .rankdata import RankData, build
from .results import Analysis, RankAnalysis
from .roofline import mfu_diagnosis, phases, roofline, scopes
from .roofline.roofline import HardwareInfo, Roofline
from .steps.breakdown import StepAccountant
from .steps.results import StepBreakdown
from .steps.stats import collective_totals, launch_stats, step_stats, stream_idle, top_cpu_ops, top_kernels
from .steps.windows import StepSpans, assign_device_work, find_steps, marker_candidates
from .xla import summary as xla


@dataclass(frozen=True)
class AnalyzeConfig:
    """Options of ``analyze``; validated at construction."""

    step_marker: str | None = None
    rules_file: str | None = None
    top_k: int = 20
    fluctuation_threshold_ratio: float = 0.10
    short_kernel_ns: int = 10_000
    hardware: str | None = None  # catalog name; default: detected from the trace
    hardware_file: str | None = None  # extra/overriding devices (YAML like data/hardware.yaml)
    model_flops_per_step: float | None = None  # model FLOPs per step per rank, for MFU
    mfu_dtype: str = "bf16"
    hlo_files: tuple[str, ...] = ()  # HLO text joined to XLA ops by name (name stacks, FLOPs, bytes)
    straggler_threshold: float = 3.0  # robust z-score over which a rank is called a straggler
    split_devices: bool = True  # a JAX/XLA host file with several devices gives one rank per device
    gpus_per_node: int | None = None  # ranks per node in the cluster view; None: the device's, else 8

    def __post_init__(self) -> None:
        if self.model_flops_per_step is not None and not 0 < self.model_flops_per_step < float("inf"):
            raise ConfigError(
                f"model FLOPs per step must be a finite number > 0, not {self.model_flops_per_step}",
                fix="e.g. --model-flops 3.2e15",
            )
        if self.top_k < 1:
            raise ConfigError("top_k must be >= 1", fix="pass --top 1 or more")
        if not 0 < self.fluctuation_threshold_ratio < 10:
            raise ConfigError("fluctuation threshold must be in (0, 10)", fix="e.g. 0.1 for 10%")
        if self.short_kernel_ns < 0:
            raise ConfigError("short kernel threshold must be >= 0")
        if not self.straggler_threshold > 0:
            raise ConfigError("straggler threshold must be > 0", fix="e.g. --straggler-z 3")
        if self.gpus_per_node is not None and self.gpus_per_node < 1:
            raise ConfigError("gpus per node must be >= 1", fix="e.g. --gpus-per-node 8")


@dataclass(frozen=True)
class PreparedRank:
    info: RankInfo
    data: RankData
    spans: StepSpans
    dev_step: np.ndarray


RANK_ANALYSES: dict[str, Callable[[PreparedRank, AnalyzeConfig], object]] = {}


def analyze(trace: Trace, config: AnalyzeConfig | None = None) -> Analysis:
    cfg = config or AnalyzeConfig()
    rules = load_rules(cfg.rules_file)
    warnings = list(trace.warnings)
    if cfg.hlo_files:
        trace = _with_hlo(trace, cfg, warnings)
    ranks = []
    for info in trace.ranks:
        events = (
            trace.events.filter(pc.equal(trace.events["rank"], info.rank)) if len(trace.ranks) > 1 else trace.events
        )
        ranks.append(
            analyze_rank(
                info, build(info.rank, events, rules), cfg, rules, warnings, events, trace.comm_args.get(info.rank)
            )
        )
    return Analysis(
        ranks=tuple(ranks),
        warnings=collapse_rank_warnings(warnings),
        inputs=tuple(r.path for r in trace.ranks),
        cluster=_cluster(tuple(ranks), cfg),
    )


def _with_hlo(trace: Trace, cfg: AnalyzeConfig, warnings: list[str]) -> Trace:
    from ..trace.hlo import read_hlo
    from .xla.join import join_hlo

    modules = [m for f in cfg.hlo_files for m in read_hlo(f)]
    events, matched = join_hlo(trace.events, modules)
    if events["op"].null_count == events.num_rows:
        warnings.append("--hlo given but the trace has no XLA ops to join (not a JAX/XLA profile)")
    elif matched < 0.5:
        warnings.append(
            f"only {matched:.0%} of the profiled XLA ops name an instruction of the HLO given; is it the same program?"
        )
    return dataclasses.replace(trace, events=events)


_RANK_MSG = re.compile(r"^rank (\d+): (.*)$", re.DOTALL)


def collapse_rank_warnings(warnings: list[str]) -> tuple[str, ...]:
    """One line per distinct per-rank message ("ranks 0, 1, 2 (3 ranks): ..."), in first-seen order;
    thousands of ranks do not give thousands of identical lines."""
    order: list[tuple[bool, str]] = []  # (is a per-rank message, text)
    by_msg: dict[str, list[str]] = {}
    for w in warnings:
        m = _RANK_MSG.match(w)
        if m is None:
            order.append((False, w))
            continue
        if m.group(2) not in by_msg:
            by_msg[m.group(2)] = []
            order.append((True, m.group(2)))
        by_msg[m.group(2)].append(m.group(1))
    result = []
    for per_rank, text in order:
        ranks = by_msg[text] if per_rank else []
        if not per_rank:
            result.append(text)
        elif len(ranks) == 1:
            result.append(f"rank {ranks[0]}: {text}")
        else:
            shown = ", ".join(ranks[:8]) + (", ..." if len(ranks) > 8 else "")
            result.append(f"ranks {shown} ({len(ranks)} ranks): {text}")
    return tuple(result)


_Job = tuple[
    str, bool, str | None, AnalyzeConfig, tuple[int, int, int] | None
]  # the last: an nsys (pid, device, ordinal)


def _read_and_analyze(job: _Job) -> list[tuple[RankAnalysis, tuple[int | None, str], list[str]]]:
    """One file -> its rank's analysis; a JAX/XLA host with several devices gives one per device
    (``RankAnalysis.rank`` = the device; the caller numbers them globally); one (process, device)
    of an Nsight export of several (``job[4]``) gives that rank."""
    path, include_python, cache_dir, cfg, part = job
    if "://" in path:  # fsspec URL (s3://, gs://, memory://...): copy to a local temp file first
        return _remote(job)
    if part is not None:
        result = analyze(assemble([read_one((path, include_python, cache_dir, part))]), cfg)
        r0, (_, device, i) = result.ranks[0], part
        label = f"{r0.device or ''} (device {device} of {Path(path).name})".strip()
        return [(dataclasses.replace(r0, device=label), (i, "nsys process"), list(result.warnings))]
    fr = read_one((path, include_python, cache_dir))
    found = rank_of(fr)
    if fr.header.get("format") == "xplane" and cfg.split_devices:
        from ..trace.xplane import split_devices

        parts = split_devices(fr.table)
        if len(parts) > 1:
            out = []
            for d, table in parts:
                result = analyze(assemble([dataclasses.replace(fr, table=table)]), cfg)
                r0 = result.ranks[0]
                out.append((dataclasses.replace(r0, rank=d), found, _renumbered(result.warnings, r0.rank, d)))
            return out
    result = analyze(assemble([fr]), cfg)
    return [(result.ranks[0], found, list(result.warnings))]


def _renumbered(warnings: Iterable[str], old: int, new: int) -> list[str]:
    """Per-rank warnings ("rank N: ...") under the rank's final number."""
    prefix = f"rank {old}:"
    return [w.replace(prefix, f"rank {new}:", 1) if w.startswith(prefix) else w for w in warnings]


def _remote(job: _Job) -> list[tuple[RankAnalysis, tuple[int | None, str], list[str]]]:
    import shutil
    import tempfile

    import fsspec

    path = job[0]
    name = path.rstrip("/").rsplit("/", 1)[-1]
    with tempfile.TemporaryDirectory() as tmp:
        local = os.path.join(tmp, name)
        with fsspec.open(path, "rb") as src, open(local, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 22)
        outs = _read_and_analyze((local, *job[1:]))
    return [
        (dataclasses.replace(ra, path=path), found, [w.replace(local, path) for w in warnings])
        for ra, found, warnings in outs
    ]


def _run_on_dask(
    address: str, jobs: list[_Job], progress: Callable[[str], None] | None
) -> list[list[tuple[RankAnalysis, tuple[int | None, str], list[str]]]]:
    """One task per rank file on an existing Dask cluster (scheduler address or scheduler file);
    only the per-rank results travel back."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise ConfigError("--dask needs the dask extra", fix='pip install "stepscope[dask]"') from None
    kw = {"scheduler_file": address} if os.path.isfile(address) else {"address": address}
    try:
        client = Client(timeout="20s", **kw)  # type: ignore[arg-type]
    except (OSError, TimeoutError) as exc:
        raise ConfigError(
            f"cannot reach the Dask scheduler ({exc.__class__.__name__})",
            path=address,
            fix="check the address (tcp://host:8786) or scheduler file",
        ) from None
    try:
        futures = client.map(_read_and_analyze, jobs, pure=False)
        index = {f.key: k for k, f in enumerate(futures)}
        outs: list[list[tuple[RankAnalysis, tuple[int | None, str], list[str]]] | None] = [None] * len(jobs)
        for fut in as_completed(futures):
            k = index[fut.key]
            outs[k] = fut.result()
            if progress:
                progress(jobs[k][0])
        return [o for o in outs if o is not None]
    finally:
        client.close()


def analyze_files(
    paths: list[str],
    config: AnalyzeConfig | None = None,
    *,
    include_python: bool = False,
    workers: int | None = None,
    cache_dir: str | None = None,
    progress: Callable[[str], None] | None = None,
    dask: str | None = None,
) -> Analysis:
    """Read and analyze each file in a worker process (or a task on the Dask cluster ``dask``);
    only the (small) results come back, so memory in the parent does not grow with the number of
    ranks and ranks scale over cores. ``progress(path)`` is called as each file finishes."""
    cfg = config or AnalyzeConfig()
    # an Nsight export of several processes or devices: a job per (process, device), so they spread over the workers
    jobs: list[_Job] = [(p, ip, cd, cfg, part) for p, ip, cd, part in jobs_for(paths, include_python, cache_dir)]
    paths = [j[0] for j in jobs]
    n = workers if workers is not None else min(len(jobs), os.cpu_count() or 1)
    outs: list[list[tuple[RankAnalysis, tuple[int | None, str], list[str]]]] = []
    if dask:
        outs = _run_on_dask(dask, jobs, progress)
    elif n > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=n) as pool:
            futures = [pool.submit(_read_and_analyze, j) for j in jobs]
            for path, fut in zip(paths, futures):
                outs.append(fut.result())
                if progress:
                    progress(path)
    else:
        for path, job in zip(paths, jobs):
            outs.append(_read_and_analyze(job))
            if progress:
                progress(path)
    resolved, warnings = resolve_ranks(paths, [parts[0][1] for parts in outs])
    # files that hold several devices (JAX hosts) give one rank per device, numbered in file order
    multi = any(len(parts) > 1 for parts in outs)
    order = sorted(range(len(outs)), key=lambda i: resolved[i][0])
    new_rank: dict[tuple[int, int], int] = {}
    next_rank = 0
    for i in order:
        for j in range(len(outs[i])):
            new_rank[(i, j)] = next_rank if multi else resolved[i][0]
            next_rank += 1
    ranks = []
    for i, parts in enumerate(outs):
        for j, (ra, _, w) in enumerate(parts):
            rank = new_rank[(i, j)]
            warnings.extend(_renumbered(w, ra.rank, rank))
            device = (
                f"{ra.device or ''} (device {ra.rank} of {Path(ra.path).name})".strip() if len(parts) > 1 else ra.device
            )
            ranks.append(dataclasses.replace(ra, rank=rank, device=device))
    ranks.sort(key=lambda r: r.rank)
    # the parts of one export repeat its file-level warnings: once each
    return Analysis(
        ranks=tuple(ranks),
        warnings=collapse_rank_warnings(list(dict.fromkeys(warnings))),
        inputs=tuple(r.path for r in ranks),
        cluster=_cluster(tuple(ranks), cfg),
    )


def _cluster(ranks: tuple[RankAnalysis, ...], cfg: AnalyzeConfig) -> object | None:
    """The cross-rank view (2+ ranks), with link peaks of the ranks' device when it is known."""
    intra = inter = None
    measured: dict[str, float] = {}
    per_node = cfg.gpus_per_node
    name = next((r.roofline.hardware.name for r in ranks if r.roofline and r.roofline.hardware), None)
    if name:
        try:
            hw = hardware.by_name(name, cfg.hardware_file)
            intra, inter, measured = hw.intra_node_gbps, hw.inter_node_gbps, dict(hw.intra_node_busbw_gbps)
            per_node = per_node or hw.node_devices
        except ConfigError:
            pass
    return cluster.build(
        ranks,
        threshold=cfg.straggler_threshold,
        gpus_per_node=per_node or 8,
        peak_intra_gbps=intra,
        peak_inter_gbps=inter,
        measured_intra_busbw=measured,
    )


def _roofline(
    info: RankInfo,
    rd: RankData,
    events: pa.Table,
    dev_step: np.ndarray,
    steps: tuple[StepBreakdown, ...],
    cfg: AnalyzeConfig,
    warnings: list[str],
) -> tuple[Roofline, np.ndarray]:
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
            warnings.append(
                f"rank {info.rank}: {what}; roofline and MFU need --hardware NAME (or --hardware-file for your own device)"
            )
    reported = next((m for p in info.device_properties if (m := hardware.reported_memory_bytes(p))), None)
    hw_info = (
        HardwareInfo(
            hw.name,
            hw.peak_flops(cfg.mfu_dtype) / 1e12,
            hw.hbm_gbps,
            hw.source,
            source,
            float(reported) if reported else hw.capacity_bytes,
        )
        if hw
        else None
    )
    d = rd.dev
    roof, kernel_flops = roofline.compute(
        events,
        dev_step,
        d.kind,
        d.external_id,
        d.end - d.ts,
        d.category,
        d.names,
        d.name_idx,
        steps,
        hw_info,
        hw,
        model_flops_per_step=cfg.model_flops_per_step,
        mfu_dtype=cfg.mfu_dtype,
    )
    if dict_mask(events["kind"], lambda k: k == "counter_range").any() and not info.path.endswith(".parquet"):
        roof = dataclasses.replace(roof, measured=roofline.measured_groups(read_counter_ranges(info.path), hw))
    return roof, kernel_flops


def analyze_rank(
    info: RankInfo,
    rd: RankData,
    cfg: AnalyzeConfig,
    rules: Rules,
    warnings: list[str],
    events: pa.Table,
    comm_args: pa.Table | None = None,
) -> RankAnalysis:
    spans = find_steps(rd, cfg.step_marker)
    if cfg.step_marker and spans.source != f"marker:{cfg.step_marker}":
        warnings.append(f"rank {info.rank}: step marker {cfg.step_marker!r} not found; using {spans.source}")
    if spans.source == "whole-trace":
        seen = marker_candidates(rd)
        hint = f"; recurring annotations here: {', '.join(f'{n!r} ({c}x)' for n, c in seen)}" if seen else ""
        warnings.append(
            f"rank {info.rank}: no ProfilerStep#N annotations{' or marker' if cfg.step_marker else ''}; "
            f"the whole trace is analyzed as one window (use --step-marker NAME for your step annotation{hint})"
        )
    if rd.dev.size == 0 and spans.names:
        warnings.append(f"rank {info.rank}: no device work in the trace; accounting on the CPU (top-level host ops)")
    dev_step = assign_device_work(rd, spans)
    acct = StepAccountant(rd, spans, dev_step, rules)
    steps = tuple(acct.step(i) for i in range(len(spans.names)))
    total = sum(s.step_time_ns for s in steps)
    prepared = PreparedRank(info=info, data=rd, spans=spans, dev_step=dev_step)
    roof, kernel_flops = _roofline(info, rd, events, dev_step, steps, cfg, warnings)
    peak = roof.hardware.peak_tflops * 1e12 if roof.hardware else None
    step_phases = phases.compute(rd, steps, dev_step, acct.opt_mask)
    extras = {name: fn(prepared, cfg) for name, fn in RANK_ANALYSES.items()}
    if rd.dev.xla is not None:
        hbm = roof.hardware.hbm_gbps * 1e9 if roof.hardware else None
        extras["xla"] = xla.summarize(prepared, cfg, peak, hbm, events)
    return RankAnalysis(
        rank=info.rank,
        device=info.device_name,
        path=info.path,
        step_source=spans.source,
        steps=steps,
        step_stats=step_stats(steps, cfg.fluctuation_threshold_ratio),
        top_kernels=top_kernels(rd, dev_step, total, cfg.top_k),
        top_cpu_ops=top_cpu_ops(rd, spans.cpu_start, spans.cpu_end, sum(s.cpu_step_ns for s in steps), cfg.top_k),
        stream_idle=stream_idle(rd, dev_step),
        launch=launch_stats(rd, dev_step, cfg.short_kernel_ns),
        collectives=collective_totals(steps),
        roofline=roof,
        phases=step_phases,
        mfu_diagnosis=mfu_diagnosis.diagnose(steps, step_phases, roof),
        scopes=scopes.compute(events, rd, dev_step, kernel_flops, peak),
        extras=extras,
        comm_events=comm_events.extract(
            rd,
            events,
            dev_step,
            (spans.cpu_start, spans.cpu_end),
            rules,
            (
                np.array([s.window_start_ns for s in steps], np.int64),
                np.array([s.window_end_ns for s in steps], np.int64),
            ),
            acct.dl_mask,
            (acct.gaps(0), acct.gaps(1), acct.gaps(3)),
            comm_args,
        ),
    )
