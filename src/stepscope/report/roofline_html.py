"""HTML section for the roofline: a log-log SVG chart (ops as points sized by time) and the
table of ops by time lost. Strings from the trace are escaped."""

from __future__ import annotations

import math
from html import escape

from ..analysis.results import RankAnalysis
from ..analysis.roofline.results import Roofline, RooflineGroup
from ..analysis.summary import RankSummary
from .fmt import check_text, ms

_BOUND_COLOR = {"compute": "#3b82f6", "memory": "#f59e0b", "latency": "#ef4444"}


def section(roof: Roofline | None, rs: RankSummary, top: int) -> str:
    if roof is None or not roof.kernel_time_ns:
        return ""
    out = ["<h3>Roofline</h3>"]
    hw = roof.hardware
    if hw:
        out.append(
            f"<p class='roof-hw'>{escape(hw.name)}: {hw.peak_tflops:,.0f} TFLOP/s peak (MFU dtype), {hw.hbm_gbps:,.0f} GB/s HBM; "
            f"FLOP model covers <b class='coverage'>{roof.coverage_ratio:.0%}</b> of kernel time.</p>"
        )
    if roof.note:
        out.append(f"<div class='warn'>{escape(roof.note)}</div>")
    parts = []
    if rs.median_mfu_ratio is not None:
        parts.append(f"MFU (median step) <b class='mfu'>{rs.median_mfu_ratio:.1%}</b>")
    if rs.median_hfu_ratio is not None:
        parts.append(f"HFU from counted ops {rs.median_hfu_ratio:.1%}")
    if parts:
        out.append("<p>" + "; ".join(parts) + "</p>")
    if roof.by_category:
        out.append(
            "<table class='roof-cat'><tr><th class='l'>category</th><th>kernel ms</th><th>with FLOP model</th><th>TFLOP/s</th><th>roofline efficiency</th></tr>"
        )
        for c in roof.by_category:
            eff = f"{c.efficiency:.0%}" if c.efficiency is not None else "-"
            out.append(
                f"<tr><td class='l'>{escape(c.category)}</td><td>{ms(c.dur_ns)}</td><td>{(c.modeled_dur_ns / c.dur_ns if c.dur_ns else 0):.0%}</td>"
                f"<td>{c.achieved_tflops:,.1f}</td><td>{eff}</td></tr>"
            )
        out.append("</table>")
    points = [(g, g.intensity) for g in roof.groups if g.bound != "unknown" and g.intensity and g.achieved_tflops > 0]
    if hw and points:
        out.append(_chart(roof, points))
    rows = [g for g in roof.groups if g.bound != "unknown"][:top]
    if rows:
        out.append(
            "<table class='roofline'><tr><th class='l'>op</th><th class='l'>shapes</th><th>dtype</th><th>count</th><th>time ms</th>"
            "<th>TFLOP/s</th><th>GB/s</th><th>FLOP/byte</th><th>efficiency</th><th>bound</th><th>time lost ms</th></tr>"
        )
        for g in rows:
            out.append(
                f"<tr><td class='l'>{escape(g.name)}</td><td class='l'>{escape(g.signature[len(g.name) :][:160])}</td><td>{escape(g.dtype)}</td>"
                f"<td>{g.count}</td><td>{ms(g.dur_ns)}</td><td>{g.achieved_tflops:,.1f}</td><td>{g.achieved_gbps:,.0f}</td>"
                f"<td>{g.intensity:,.1f}</td><td>{(g.efficiency or 0):.0%}</td><td>{escape(g.bound)}</td><td>{ms(g.time_lost_ns)}</td></tr>"
                if g.intensity is not None
                else ""
            )
        out.append("</table>")
    return "".join(out)


def _chart(roof: Roofline, points: list[tuple[RooflineGroup, float]]) -> str:
    """Log-log chart: the roofline of ``roof.hardware`` and each (op group, its FLOP/byte) as a point."""
    assert roof.hardware is not None
    groups = [g for g, _x in points]
    w, h, pad = 640, 360, 50
    peak = roof.hardware.peak_tflops
    bw_tb = roof.hardware.hbm_gbps / 1e3  # TB/s: TFLOP/s per FLOP/byte
    xs = [x for _g, x in points]
    x0 = 10 ** math.floor(math.log10(max(min(xs), 1e-3)))
    x1 = 10 ** math.ceil(math.log10(max(max(xs), peak / bw_tb) * 2))
    ys = [g.achieved_tflops for g in groups]
    y0 = 10 ** math.floor(math.log10(max(min(ys), 1e-4)))
    y1 = 10 ** math.ceil(math.log10(peak * 1.5))

    def px(x: float) -> float:
        return pad + (w - 2 * pad) * (math.log10(x) - math.log10(x0)) / (math.log10(x1) - math.log10(x0))

    def py(y: float) -> float:
        return h - pad - (h - 2 * pad) * (math.log10(max(y, y0)) - math.log10(y0)) / (math.log10(y1) - math.log10(y0))

    svg = [
        f"<svg class='roofline-chart' role='img' aria-label='roofline' width='{w}' height='{h}' xmlns='http://www.w3.org/2000/svg'>"
    ]
    svg.append(f"<rect x='{pad}' y='{pad}' width='{w - 2 * pad}' height='{h - 2 * pad}' fill='none' stroke='#ccc'/>")
    ridge = peak / bw_tb
    xa = max(x0, y0 / bw_tb)
    svg.append(
        f"<line x1='{px(xa):.1f}' y1='{py(xa * bw_tb):.1f}' x2='{px(ridge):.1f}' y2='{py(peak):.1f}' stroke='#111' stroke-width='2'/>"
    )
    svg.append(
        f"<line x1='{px(ridge):.1f}' y1='{py(peak):.1f}' x2='{px(x1):.1f}' y2='{py(peak):.1f}' stroke='#111' stroke-width='2'/>"
    )
    longest = max(g.dur_ns for g in groups) or 1
    for g, x in points:
        r = 3 + 12 * math.sqrt(g.dur_ns / longest)
        svg.append(
            f"<circle cx='{px(x):.1f}' cy='{py(g.achieved_tflops):.1f}' r='{r:.1f}' fill='{_BOUND_COLOR.get(g.bound, '#888')}' "
            f"fill-opacity='0.6'><title>{escape(g.signature[:200])}: {g.achieved_tflops:,.1f} TFLOP/s, {ms(g.dur_ns)} ms</title></circle>"
        )
    for k in range(int(math.log10(x0)), int(math.log10(x1)) + 1):
        svg.append(f"<text x='{px(10**k):.1f}' y='{h - pad + 16}' font-size='11' text-anchor='middle'>1e{k}</text>")
    for k in range(int(math.log10(y0)), int(math.log10(y1)) + 1):
        svg.append(f"<text x='{pad - 6}' y='{py(10**k) + 4:.1f}' font-size='11' text-anchor='end'>1e{k}</text>")
    svg.append(
        f"<text x='{w / 2}' y='{h - 8}' font-size='12' text-anchor='middle'>arithmetic intensity (FLOP/byte)</text>"
    )
    svg.append(
        f"<text x='14' y='{h / 2}' font-size='12' transform='rotate(-90 14 {h / 2})' text-anchor='middle'>TFLOP/s</text>"
    )
    svg.append("</svg>")
    legend = "".join(
        f"<span><i class='sw' style='background:{c}'></i>{b}-bound</span>" for b, c in _BOUND_COLOR.items()
    )
    return f"<div class='legend'>{legend}</div>" + "".join(svg)


def phases_section(r: RankAnalysis) -> str:
    if not r.phases:
        return ""
    out = [
        "<h3>Phases and recompute</h3><table class='phases'><tr><th class='l'>step</th><th>forward ms</th><th>backward ms</th>"
        "<th>recompute ms</th><th>optimizer ms</th><th>recomputed ops</th></tr>"
    ]
    for p in r.phases:
        ph = p.phase_ns
        out.append(
            f"<tr><td class='l'>{escape(p.name)}</td><td>{ms(ph['forward'])}</td><td>{ms(ph['backward'])}</td>"
            f"<td>{ms(ph['recompute'])}</td><td>{ms(ph['optimizer'])}</td><td>{p.recompute_ops}</td></tr>"
        )
    out.append("</table>")
    d = r.mfu_diagnosis
    if d is not None:
        out.append(
            f"<h3>MFU diagnosis</h3><p>MFU {d.mfu:.1%} ({escape(d.band)}): {escape(d.verdict)}</p><ul class='diagnosis'>"
        )
        for c in d.checks:
            status = "ok" if c.ok else "check"
            out.append(f"<li><b>{status}</b> {escape(check_text(c))}</li>")
        out.append("</ul>")
    return "".join(out)


def scopes_section(r: RankAnalysis, top: int) -> str:
    if not r.scopes:
        return ""
    out = [
        "<h3>By module / annotation</h3><table class='scopes'><tr><th class='l'>scope</th><th class='l'>kind</th>"
        "<th>instances</th><th>kernel ms</th><th>TFLOP/s</th><th>MFU</th></tr>"
    ]
    for x in r.scopes[:top]:
        mfu = f"{x.mfu_ratio:.1%}" if x.mfu_ratio is not None else "-"
        out.append(
            f"<tr><td class='l'>{escape(x.name)}</td><td class='l'>{escape(x.kind)}</td><td>{x.instances}</td><td>{ms(x.kernel_ns)}</td>"
            f"<td>{x.achieved_tflops:,.1f}</td><td>{mfu}</td></tr>"
        )
    out.append("</table><p>Module ranges are the forward pass (backward runs on the autograd thread).</p>")
    return "".join(out)
