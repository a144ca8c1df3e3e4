"""Self-contained HTML renderer: one offline file (inline CSS, SVG, and the charting library and
its data inlined, ``charts_html.py``); no network at view time. Every string that comes from a
trace goes through ``html.escape`` (and, in chart data, JSON with ``<>&`` escaped)."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from ..analysis.results import Analysis, RankAnalysis
from ..analysis.steps.results import StepBreakdown
from ..analysis.summary import RankSummary, RunSummary
from ..analysis.xla.summary import XlaSummary
from . import charts_html, cluster_html, findings_html, roofline_html, xla_html
from .base import Renderer
from .fmt import detail_ranks, ms, pct, us
from .names import readable

_PARTS = (
    ("compute", "#3b82f6"),
    ("exposed comm", "#ef4444"),
    ("exposed memcpy", "#f59e0b"),
    ("idle", "#d1d5db"),
)
_PALETTE = (
    "#3b82f6",
    "#10b981",
    "#8b5cf6",
    "#f97316",
    "#ec4899",
    "#14b8a6",
    "#eab308",
    "#6366f1",
    "#ef4444",
    "#84cc16",
    "#06b6d4",
    "#a855f7",
)

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#111;max-width:1200px}
h1{font-size:22px} h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd} h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0;font-size:13px} td,th{border:1px solid #e5e7eb;padding:3px 8px;text-align:right}
th{background:#f3f4f6} td.l,th.l{text-align:left;max-width:520px;overflow-wrap:anywhere}
.warn{background:#fef3c7;padding:6px 10px;margin:4px 0;font-size:13px} .legend span{display:inline-block;margin-right:14px;font-size:12px}
.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle} .kpi{display:inline-block;margin:0 18px 8px 0}
.kpi b{font-size:20px;display:block}
.finding{border-left:4px solid #2563eb;padding:2px 12px;margin:10px 0;background:#f8fafc} .finding p,.finding li{font-size:13px}
.evidence,.ref{color:#555;font-size:12px} .ranks{font-weight:normal;color:#555;font-size:13px}
.chart{width:100%;min-width:600px;margin:8px 0} th{cursor:pointer}
"""


def render(a: Analysis, options: Mapping[str, Any]) -> str:
    top = 15
    summary = a.summary
    out = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">",
        "<title>stepscope report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>stepscope: step breakdown</h1>",
        f"<p>Inputs: {escape(', '.join(a.inputs))}</p>",
    ]
    for w in a.warnings:
        out.append(f"<div class='warn'>{escape(w)}</div>")
    out.append(findings_html.section(a.findings, len(a.ranks)))
    if len(a.ranks) > 1:
        out.append(_rank_table(summary))
        out.append(charts_html.heatmap(a))
        out.append(cluster_html.section(a.cluster))
    shown, hidden = detail_ranks(a.ranks, 8)
    if hidden:
        out.append(
            f"<p>Details below for the {len(shown)} ranks with the slowest median step; {hidden} more are in the table above and the JSON report.</p>"
        )
    for r in shown:
        out.append(_rank(r, summary.of(r.rank), top))
    out.append(charts_html.scripts())
    out.append("</body></html>")
    return "\n".join(out)


def _legend() -> str:
    return (
        "<div class='legend'>"
        + "".join(f"<span><i class='sw' style='background:{c}'></i>{escape(n)}</span>" for n, c in _PARTS)
        + "</div>"
    )


def _parts(s: StepBreakdown) -> list[int]:
    return [s.compute_ns, s.exposed_comm_ns, s.exposed_memcpy_ns, s.idle_ns]


def _stacked_bars(steps: tuple[StepBreakdown, ...]) -> str:
    if not steps:
        return ""
    width, row, label_w = 900, 22, 150
    longest = max(s.step_time_ns for s in steps) or 1
    h = row * len(steps) + 10
    svg = [
        f"<svg role='img' aria-label='per-step breakdown' width='{width}' height='{h}' xmlns='http://www.w3.org/2000/svg'>"
    ]
    for i, s in enumerate(steps):
        y = 5 + i * row
        svg.append(f"<text x='0' y='{y + 14}' font-size='12'>{escape(s.name)}</text>")
        x = float(label_w)
        for (name, color), v in zip(_PARTS, _parts(s)):
            w = (width - label_w - 90) * v / longest
            if w > 0:
                svg.append(
                    f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='{row - 6}' fill='{color}'><title>{escape(name)}: {ms(v)} ms</title></rect>"
                )
            x += w
        svg.append(f"<text x='{x + 6:.1f}' y='{y + 14}' font-size='12'>{ms(s.step_time_ns)} ms</text>")
    svg.append("</svg>")
    return "".join(svg)


def _hbar(items: list[tuple[str, int]], unit_total: int) -> str:
    if not items:
        return ""
    width, row, label_w = 900, 20, 260
    mx = max(v for _, v in items) or 1
    svg = [f"<svg role='img' width='{width}' height='{row * len(items) + 6}' xmlns='http://www.w3.org/2000/svg'>"]
    for i, (name, v) in enumerate(items):
        y = 3 + i * row
        w = (width - label_w - 140) * v / mx
        svg.append(
            f"<text x='0' y='{y + 13}' font-size='12'><title>{escape(name)}</title>{escape(readable(name)[:40])}</text>"
        )
        svg.append(
            f"<rect x='{label_w}' y='{y}' width='{w:.1f}' height='{row - 5}' fill='{_PALETTE[i % len(_PALETTE)]}'><title>{escape(name)}</title></rect>"
        )
        svg.append(
            f"<text x='{label_w + w + 6:.1f}' y='{y + 13}' font-size='12'>{ms(v)} ms ({pct(v, unit_total)})</text>"
        )
    svg.append("</svg>")
    return "".join(svg)


def _rank_table(summary: RunSummary) -> str:
    rows = []
    for r in summary.ranks:
        vals = [
            r.mean_step_time_ns,
            r.mean_compute_ns,
            r.mean_exposed_comm_ns,
            r.mean_exposed_memcpy_ns,
            r.mean_idle_ns,
        ]
        rows.append(f"<tr><td>{r.rank}</td><td>{r.steps}</td>" + "".join(f"<td>{ms(v)}</td>" for v in vals) + "</tr>")
    head = "<tr><th>rank</th><th>steps</th><th>step</th><th>compute</th><th>exposed comm</th><th>exposed memcpy</th><th>idle</th></tr>"
    return f"<h2>Ranks (mean per step, ms)</h2><table id='ranks'>{head}{''.join(rows)}</table>"


def _rank(r: RankAnalysis, rs: RankSummary, top: int) -> str:
    o = [_header(r, rs)]
    o.append("<h3>Per-step breakdown</h3>" + _legend() + _stacked_bars(r.steps))
    o.append(_steps_table(r))
    o.append(charts_html.timeline(r))
    for f in r.step_stats.flagged:
        o.append(
            f"<div class='warn'>slow step {escape(f.name)}: {ms(f.step_time_ns)} ms, {f.over_median_ratio:.0%} over median; {escape(f.grew)} grew by {ms(f.grew_by_ns)} ms</div>"
        )
    o.append("<h3>Device time by category (union per category, all steps)</h3>")
    o.append(_hbar(list(rs.device_time_by_category_ns), rs.total_step_time_ns))
    o.append(_collectives(r))
    o.append(_idle(r, rs))
    o.append(_top_ops(r, rs, top))
    o.append(roofline_html.phases_section(r))
    o.append(roofline_html.section(r.roofline, rs, top))
    o.append(charts_html.roofline(r))
    o.append(roofline_html.scopes_section(r, top))
    xla = r.extras.get("xla")
    o.append(xla_html.section(xla if isinstance(xla, XlaSummary) else None, top))
    ln = r.launch
    o.append(
        f"<p>Launches: {ln.kernels} kernels ({ln.matched} matched to their launch), delay p50 {us(ln.delay_p50_ns)} us, p99 {us(ln.delay_p99_ns)} us; "
        f"{ln.short_kernels} kernels shorter than {us(ln.short_threshold_ns)} us ({ms(ln.short_kernel_time_ns)} ms). Steps analyzed: {rs.steps}.</p>"
    )
    o.append("</section>")
    return "".join(o)


def _header(r: RankAnalysis, rs: RankSummary) -> str:
    tot = rs.total_step_time_ns
    return (
        f"<section class='rank' id='rank-{r.rank}'><h2>Rank {r.rank} {escape(r.device or '')}</h2>"
        f"<p>{escape(r.path)}; steps from {escape(r.step_source)}</p>"
        "<div>"
        f"<span class='kpi'>median step<b class='median-step'>{ms(r.step_stats.median_ns)} ms</b></span>"
        f"<span class='kpi'>compute<b>{pct(rs.total_compute_ns, tot)}</b></span>"
        f"<span class='kpi'>exposed comm<b>{pct(rs.total_exposed_comm_ns, tot)}</b></span>"
        f"<span class='kpi'>comm overlapped<b>{pct(rs.total_overlapped_comm_ns, rs.total_comm_ns)}</b></span>"
        f"<span class='kpi'>idle<b>{pct(rs.total_idle_ns, tot)}</b></span></div>"
    )


_STEP_COLUMNS = (
    "step",
    "step ms",
    "compute",
    "comm",
    "overlapped",
    "exposed comm",
    "exposed memcpy",
    "idle",
    "input wait",
    "host-bound idle",
    "cpu step",
    "data loader",
    "sync calls",
)


def _steps_table(r: RankAnalysis) -> str:
    rows = []
    for s in r.steps:
        cells = [
            ms(s.step_time_ns),
            ms(s.compute_ns),
            ms(s.comm_ns),
            ms(s.overlapped_comm_ns),
            ms(s.exposed_comm_ns),
            ms(s.exposed_memcpy_ns),
            ms(s.idle_ns),
            ms(s.idle_causes.input_wait_ns),
            ms(s.idle_causes.host_bound_ns),
            ms(s.cpu_step_ns),
            ms(s.cpu.dataloader_ns),
            str(s.cpu.sync_calls),
        ]
        name = escape(s.name) + (" (warm-up)" if s.warmup else "")
        rows.append(f"<tr><td class='l'>{name}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in _STEP_COLUMNS)
    return f"<table class='steps'><tr>{head}</tr>{''.join(rows)}</table>"


def _collectives(r: RankAnalysis) -> str:
    if not r.collectives:
        return ""
    o = [
        "<h3>Communication overlap by collective</h3><table><tr><th class='l'>collective</th><th>kernels</th><th>time ms</th><th>overlapped ms</th><th>overlap</th><th>exposed ms</th></tr>"
    ]
    for ct in r.collectives:
        o.append(
            f"<tr><td class='l'>{escape(ct.type)}</td><td>{ct.count}</td><td>{ms(ct.comm_ns)}</td><td>{ms(ct.overlapped_ns)}</td>"
            f"<td>{pct(ct.overlapped_ns, ct.comm_ns)}</td><td>{ms(ct.exposed_ns)}</td></tr>"
        )
    o.append("</table>")
    return "".join(o)


def _idle(r: RankAnalysis, rs: RankSummary) -> str:
    causes = [
        ("waiting for input (data loader)", rs.total_input_wait_idle_ns),
        ("host-bound (launched late)", rs.total_host_bound_idle_ns),
        ("waiting on sync/event", rs.total_sync_wait_idle_ns),
        ("other", rs.total_other_idle_ns),
    ]
    o = ["<h3>Idle causes</h3>" + _hbar(causes, rs.total_step_time_ns)]
    if r.stream_idle:
        o.append(
            "<table><tr><th>device</th><th>stream</th><th>busy ms</th><th>idle ms</th><th>host-bound</th><th>cross-stream wait</th><th>other</th><th>gaps</th></tr>"
        )
        for si in r.stream_idle:
            ic = si.causes
            o.append(
                f"<tr><td>{si.device}</td><td>{si.stream}</td><td>{ms(si.busy_ns)}</td><td>{ms(si.idle_ns)}</td><td>{ms(ic.host_bound_ns)}</td>"
                f"<td>{ms(ic.wait_ns)}</td><td>{ms(ic.other_ns)}</td><td>{ic.gaps}</td></tr>"
            )
        o.append("</table>")
    return "".join(o)


def _top_ops(r: RankAnalysis, rs: RankSummary, top: int) -> str:
    """Top kernels (share of the step time) and top CPU ops (share of the CPU step time)."""
    o = []
    for title, ops, whole in (
        ("Top kernels", r.top_kernels, rs.total_step_time_ns),
        ("Top CPU ops (inclusive time)", r.top_cpu_ops, rs.total_cpu_step_ns),
    ):
        if not ops:
            continue
        o.append(f"<h3>{title}</h3>" + _hbar([(x.name, x.total_ns) for x in ops[:top]], whole))
        o.append(
            "<table><tr><th class='l'>name</th><th class='l'>category</th><th>count</th><th>total ms</th><th>mean us</th><th>p50 us</th><th>p99 us</th><th>share of step</th></tr>"
        )
        for x in ops[:top]:
            o.append(
                f"<tr><td class='l' title='{escape(x.name)}'>{escape(readable(x.name))}</td><td class='l'>{escape(x.category)}</td><td>{x.count}</td><td>{ms(x.total_ns)}</td>"
                f"<td>{us(x.mean_ns)}</td><td>{us(x.p50_ns)}</td><td>{us(x.p99_ns)}</td><td>{x.share_of_step_ratio:.1%}</td></tr>"
            )
        o.append("</table>")
    return "".join(o)


RENDERER = Renderer(
    name="html",
    subject="analysis",
    extensions=(".html", ".htm"),
    render=render,
    description="self-contained HTML report",
)
