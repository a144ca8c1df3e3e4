"""Terminal renderer (rich)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.results import Analysis, RankAnalysis
from ..analysis.summary import RankSummary, RunSummary
from ..analysis.xla.summary import XlaSummary
from ..textsafe import printable
from . import cluster_terminal, findings_terminal, xla_terminal
from .base import Renderer
from .fmt import RANK_MEAN_COLUMNS, detail_ranks, esc, ms, pct, rank_mean_cells, us


def render(a: Analysis, options: Mapping[str, Any]) -> None:
    """Print the report on ``options["console"]`` (a rich ``Console``; standard output if absent)."""
    con: Console = options.get("console") or Console()
    top = 10
    summary = a.summary
    if not con.is_terminal:
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
    t = Table(title="Ranks (mean per step, ms)")
    for col in RANK_MEAN_COLUMNS:
        t.add_column(col, justify="right")
    for r in summary.ranks:
        t.add_row(*rank_mean_cells(r))
    con.print(t)


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
    "step",
    "step",
    "compute",
    "comm",
    "overlapped",
    "exposed comm",
    "exposed memcpy",
    "idle",
    "input wait",
    "host-bound",
    "cpu step",
    "data loader",
)


def _steps(r: RankAnalysis, con: Console) -> None:
    """The step table, the step-time statistics and the slow steps."""
    t = Table(title="Step breakdown (ms; compute + exposed comm + exposed memcpy + idle = step)")
    for col in _STEP_COLUMNS:
        t.add_column(col, justify="right")
    for s in r.steps:
        t.add_row(
            esc(s.name) + (" (warm-up)" if s.warmup else ""),
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
    con.print(t)
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
    ct = Table(title="Communication by collective (all steps, ms)")
    for col in ("collective", "kernels", "time", "overlapped", "exposed"):
        ct.add_column(col, justify="right")
    for c in r.collectives:
        ct.add_row(
            esc(c.type),
            str(c.count),
            ms(c.comm_ns),
            f"{ms(c.overlapped_ns)} ({pct(c.overlapped_ns, c.comm_ns)})",
            ms(c.exposed_ns),
        )
    con.print(ct)


def _top_kernels(r: RankAnalysis, con: Console, top: int) -> None:
    if not r.top_kernels:
        return
    kt = Table(title=f"Top kernels (of {len(r.steps)} steps)")
    for col in ("kernel", "category", "count", "total ms", "mean us", "p50 us", "p99 us", "share"):
        kt.add_column(col, justify="right" if col not in ("kernel", "category") else "left", no_wrap=True)
    for k in r.top_kernels[:top]:
        kt.add_row(
            esc(_short(k.name)),
            esc(k.category),
            str(k.count),
            ms(k.total_ns),
            us(k.mean_ns),
            us(k.p50_ns),
            us(k.p99_ns),
            f"{k.share_of_step_ratio:.1%}",
        )
    con.print(kt)


def _short(name: str, width: int = 70) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


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
    t = Table(title="Ops by time lost vs. the roofline")
    for col in (
        "op",
        "shapes",
        "dtype",
        "count",
        "time ms",
        "TFLOP/s",
        "GB/s",
        "FLOP/B",
        "efficiency",
        "bound",
        "lost ms",
    ):
        t.add_column(col, justify="left" if col in ("op", "shapes", "dtype", "bound") else "right", no_wrap=True)
    for g in groups:
        t.add_row(
            esc(g.name),
            esc(_short(g.signature[len(g.name) :], 40)),
            esc(g.dtype),
            str(g.count),
            ms(g.dur_ns),
            f"{g.achieved_tflops:,.1f}",
            f"{g.achieved_gbps:,.0f}",
            f"{g.intensity:,.1f}" if g.intensity is not None else "-",
            f"{g.efficiency:.0%}" if g.efficiency is not None else "-",
            g.bound,
            ms(g.time_lost_ns),
        )
    con.print(t)


def _phases(r: RankAnalysis, con: Console) -> None:
    if not r.phases:
        return
    t = Table(title="Device time by phase (ms; union per phase in the step window)")
    for col in ("step", "forward", "backward", "recompute", "recompute % of step", "optimizer", "recomputed ops"):
        t.add_column(col, justify="right")
    for p, s in zip(r.phases, r.steps):
        ph = p.phase_ns
        t.add_row(
            esc(p.name),
            ms(ph["forward"]),
            ms(ph["backward"]),
            ms(ph["recompute"]),
            pct(ph["recompute"], s.step_time_ns),
            ms(ph["optimizer"]),
            str(p.recompute_ops),
        )
    con.print(t)
    d = r.mfu_diagnosis
    if d is not None:
        con.print(f"MFU {d.mfu:.1%} ({d.band}): {d.verdict}", highlight=False)
        for c in d.checks:
            mark = "[green]ok[/]" if c.ok else "[red]check[/]"
            con.print(
                f"  {mark} {c.figure} = {c.value:.1%} (threshold {c.threshold:.0%}){'' if c.ok else ': ' + c.hint}",
                highlight=False,
            )


def _scopes(r: RankAnalysis, con: Console, top: int) -> None:
    if not r.scopes:
        return
    t = Table(title="By module / annotation (forward kernels launched inside; inclusive)")
    for col in ("scope", "kind", "instances", "kernel ms", "TFLOP/s", "MFU"):
        t.add_column(col, justify="left" if col in ("scope", "kind") else "right", no_wrap=True)
    for x in r.scopes[:top]:
        t.add_row(
            esc(_short(x.name, 50)),
            esc(x.kind),
            str(x.instances),
            ms(x.kernel_ns),
            f"{x.achieved_tflops:,.1f}",
            f"{x.mfu_ratio:.1%}" if x.mfu_ratio is not None else "-",
        )
    con.print(t)


RENDERER = Renderer(name="terminal", subject="analysis", extensions=(), render=render, description="the console report")
