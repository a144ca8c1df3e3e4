"""Terminal renderer (rich)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..analysis.results import Analysis, RankAnalysis
from ..analysis.summary import RankSummary, RunSummary
from ..analysis.xla.summary import XlaSummary
from ..textsafe import printable
from . import cluster_terminal, findings_terminal, xla_terminal
from .base import Renderer
from .fit import Col, print_table
from .fmt import RANK_MEAN_COLUMNS, check_text, detail_ranks, esc, ms, pct, rank_mean_cells, us
from .names import readable

if TYPE_CHECKING:  # rich is loaded when a report is printed, not to write files
    from rich.console import Console


def render(a: Analysis, options: Mapping[str, Any]) -> None:
    """Print the report on ``options["console"]`` (a rich ``Console``; standard output if absent)."""
    from rich.console import Console

    con: Console = options.get("console") or Console()
    top = 10
    summary = a.summary
    if not con.is_terminal and "COLUMNS" not in os.environ:  # piped: wide, unless told the width
        con.width = max(con.width, 160)
    for w in a.warnings:
        con.print(f"[yellow]warning:[/] {esc(w)}", markup=True, highlight=False)
    findings_terminal.render(a.findings, con, len(a.ranks))
    if len(a.ranks) > 1:
        _rank_table(summary, con)
        cluster_terminal.render(a.cluster, con)
    shown, hidden = detail_ranks(a.ranks, 4)
    for r in shown:
        _rank(r, summary.of(r.rank), con, top)
    if hidden:
        con.print(f"({hidden} more ranks in the table above; all ranks in the JSON/HTML reports)", highlight=False)


def _rank_table(summary: RunSummary, con: Console) -> None:
    cols = [Col(c, left=i == 0) for i, c in enumerate(RANK_MEAN_COLUMNS)]
    print_table(con, "Ranks (mean per step, ms)", cols, [tuple(rank_mean_cells(r)) for r in summary.ranks])


def _rank(r: RankAnalysis, rs: RankSummary, con: Console, top: int) -> None:
    con.print(
        f"\n[bold]Rank {r.rank}[/] {esc(r.device or '')}  ({esc(r.path)}; steps from {esc(r.step_source)})",
        highlight=False,
    )
    _steps(r, con)
    _collectives(r, con)
    _top_kernels(r, con, top)
    _phases(r, con)
    _roofline(r, rs, con, top)
    _scopes(r, con, top)
    xla = r.extras.get("xla")
    xla_terminal.render(xla if isinstance(xla, XlaSummary) else None, con, top)
    ln = r.launch
    if ln.kernels:
        con.print(
            f"launches: {ln.kernels} kernels, delay p50 {us(ln.delay_p50_ns)} us / p99 {us(ln.delay_p99_ns)} us; "
            f"{ln.short_kernels} kernels < {us(ln.short_threshold_ns)} us ({ms(ln.short_kernel_time_ns)} ms)",
            highlight=False,
        )


_STEP_COLUMNS = (
    Col("step", name=True),
    Col("step"),
    Col("compute"),
    Col("comm", drop=4),
    Col("overlapped", drop=5),
    Col("exposed comm"),
    Col("exposed memcpy", drop=3),
    Col("idle"),
    Col("input wait", drop=2),
    Col("host-bound", drop=1),
    Col("cpu step", drop=6),
    Col("data loader", drop=7),
)


def _steps(r: RankAnalysis, con: Console) -> None:
    """The step table, the step-time statistics and the slow steps."""
    rows = [
        (
            printable(s.name) + (" (warm-up)" if s.warmup else ""),
            ms(s.step_time_ns),
            f"{ms(s.compute_ns)} ({pct(s.compute_ns, s.step_time_ns)})",
            ms(s.comm_ns),
            ms(s.overlapped_comm_ns),
            f"{ms(s.exposed_comm_ns)} ({pct(s.exposed_comm_ns, s.step_time_ns)})",
            ms(s.exposed_memcpy_ns),
            f"{ms(s.idle_ns)} ({pct(s.idle_ns, s.step_time_ns)})",
            ms(s.idle_causes.input_wait_ns),
            ms(s.idle_causes.host_bound_ns),
            ms(s.cpu_step_ns),
            ms(s.cpu.dataloader_ns),
        )
        for s in r.steps
    ]
    print_table(con, "Step breakdown (ms; compute + exposed comm + exposed memcpy + idle = step)", _STEP_COLUMNS, rows)
    st = r.step_stats
    if st.count:
        warm = f" ({st.warmup_steps} warm-up steps left out)" if st.warmup_steps else ""
        con.print(
            f"step time: median {ms(st.median_ns)} ms, mean {ms(st.mean_ns)} ms, min {ms(st.min_ns)}, max {ms(st.max_ns)}, CV {st.cv_ratio:.1%}{warm}",
            highlight=False,
        )
    if st.outside_steps_ns:
        con.print(
            f"device work outside every step window: {ms(st.outside_steps_ns)} ms ({st.outside_steps_ratio:.1%} of device busy time)",
            highlight=False,
        )
    for f in st.flagged:
        con.print(
            f"[red]slow step[/] {esc(f.name)}: {ms(f.step_time_ns)} ms, {f.over_median_ratio:.0%} over median; {esc(f.grew)} grew by {ms(f.grew_by_ns)} ms",
            highlight=False,
        )


def _collectives(r: RankAnalysis, con: Console) -> None:
    if not r.collectives:
        return
    cols = (Col("collective", left=True), Col("kernels"), Col("time"), Col("overlapped"), Col("exposed"))
    rows = [
        (
            printable(c.type),
            str(c.count),
            ms(c.comm_ns),
            f"{ms(c.overlapped_ns)} ({pct(c.overlapped_ns, c.comm_ns)})",
            ms(c.exposed_ns),
        )
        for c in r.collectives
    ]
    print_table(con, "Communication by collective (all steps, ms)", cols, rows)


def _top_kernels(r: RankAnalysis, con: Console, top: int) -> None:
    if not r.top_kernels:
        return
    cols = (
        Col("kernel", name=True),
        Col("category", left=True, drop=2),
        Col("count"),
        Col("total ms"),
        Col("mean us", drop=1),
        Col("p50 us", drop=3),
        Col("p99 us", drop=4),
        Col("share"),
    )
    rows = [
        (
            printable(readable(k.name)),
            printable(k.category),
            str(k.count),
            ms(k.total_ns),
            us(k.mean_ns),
            us(k.p50_ns),
            us(k.p99_ns),
            f"{k.share_of_step_ratio:.1%}",
        )
        for k in r.top_kernels[:top]
    ]
    print_table(con, f"Top kernels (of {len(r.steps)} steps)", cols, rows)


def _roofline(r: RankAnalysis, rs: RankSummary, con: Console, top: int) -> None:
    roof = r.roofline
    if roof is None or not roof.kernel_time_ns:
        return
    hw = roof.hardware
    head = (
        f"roofline: {esc(hw.name)} ({hw.peak_tflops:,.0f} TFLOP/s peak for MFU, {hw.hbm_gbps:,.0f} GB/s)"
        if hw
        else "roofline: unknown device"
    )
    con.print(f"{head}; FLOP model covers {roof.coverage_ratio:.0%} of kernel time", highlight=False)
    if roof.note:
        from rich.text import Text

        con.print(Text(printable(roof.note), style="yellow"))
    mfu, hfu = rs.median_mfu_ratio, rs.median_hfu_ratio
    if mfu is not None or hfu is not None:
        con.print(
            f"MFU (median over steps): {mfu:.1%}" if mfu is not None else "MFU: pass --model-flops or --hf-config",
            f"  HFU (counted ops): {hfu:.1%}" if hfu is not None else "",
            highlight=False,
        )
    groups = [g for g in roof.groups if g.bound != "unknown"][:top]
    if not groups:
        return
    cols = (
        Col("op", name=True),
        Col("shapes", name=True, drop=6),
        Col("dtype", left=True),
        Col("count", drop=4),
        Col("time ms"),
        Col("TFLOP/s"),
        Col("GB/s", drop=2),
        Col("FLOP/B", drop=3),
        Col("efficiency"),
        Col("bound", left=True, drop=5),
        Col("lost ms"),
    )
    rows = [
        (
            printable(g.name),
            printable(g.signature[len(g.name) :]),
            g.dtype,
            str(g.count),
            ms(g.dur_ns),
            f"{g.achieved_tflops:,.1f}",
            f"{g.achieved_gbps:,.0f}",
            f"{g.intensity:,.1f}" if g.intensity is not None else "-",
            f"{g.efficiency:.0%}" if g.efficiency is not None else "-",
            g.bound,
            ms(g.time_lost_ns),
        )
        for g in groups
    ]
    print_table(con, "Ops by time lost vs. the roofline", cols, rows)


def _phases(r: RankAnalysis, con: Console) -> None:
    if not r.phases:
        return
    cols = (
        Col("step", name=True),
        Col("forward"),
        Col("backward"),
        Col("recompute"),
        Col("recompute % of step", drop=2),
        Col("optimizer"),
        Col("recomputed ops", drop=1),
    )
    rows = [
        (
            printable(p.name),
            ms(p.phase_ns["forward"]),
            ms(p.phase_ns["backward"]),
            ms(p.phase_ns["recompute"]),
            pct(p.phase_ns["recompute"], s.step_time_ns),
            ms(p.phase_ns["optimizer"]),
            str(p.recompute_ops),
        )
        for p, s in zip(r.phases, r.steps)
    ]
    print_table(con, "Device time by phase (ms; union per phase in the step window)", cols, rows)
    d = r.mfu_diagnosis
    if d is not None:
        con.print(f"MFU {d.mfu:.1%} ({d.band}): {d.verdict}", highlight=False)
        for c in d.checks:
            mark = "[green]ok[/]" if c.ok else "[red]check[/]"
            con.print(f"  {mark} {esc(check_text(c))}", highlight=False)


def _scopes(r: RankAnalysis, con: Console, top: int) -> None:
    if not r.scopes:
        return
    cols = (
        Col("scope", name=True),
        Col("kind", left=True, drop=2),
        Col("instances", drop=1),
        Col("kernel ms"),
        Col("TFLOP/s"),
        Col("MFU"),
    )
    rows = [
        (
            printable(x.name),
            printable(x.kind),
            str(x.instances),
            ms(x.kernel_ns),
            f"{x.achieved_tflops:,.1f}",
            f"{x.mfu_ratio:.1%}" if x.mfu_ratio is not None else "-",
        )
        for x in r.scopes[:top]
    ]
    print_table(con, "By module / annotation (forward kernels launched inside; inclusive)", cols, rows)


RENDERER = Renderer(name="terminal", subject="analysis", extensions=(), render=render, description="the console report")
