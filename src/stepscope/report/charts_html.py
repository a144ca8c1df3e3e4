"""The HTML report's interactive charts (Apache ECharts, inlined: the file stays offline) and its
sortable tables.

Each chart is a ``<div>`` and its data in a ``<script type="application/json">`` block; one script
at the end draws them all. Trace strings travel as JSON with ``<``, ``>`` and ``&`` escaped (no
``</script>`` can end a block early) and are HTML-escaped by the script before they reach a
tooltip; chart labels are drawn as canvas text.

- ``timeline``: the representative step of a rank (``analysis/steps/timeline.py``): one row per
  device stream and one for the device's idle time, work coloured by group (compute,
  communication, memory), zoomable, with each kernel's full name on hover;
- ``heatmap``: step time per rank and step (several ranks);
- ``roofline``: the roofline's op groups by arithmetic intensity and achieved TFLOP/s, on log
  axes, under the device's roof (peak and memory bandwidth), labelled with readable names.
"""

from __future__ import annotations

import json
from functools import lru_cache
from html import escape
from importlib import resources
from typing import Any

from ..analysis.results import Analysis, RankAnalysis
from ..analysis.steps.timeline import Timeline
from .names import readable

ECHARTS = "echarts-6.1.0.min.js"
#: the roofline's labelled points (the rest are drawn, unlabelled)
LABELLED = 8


@lru_cache(maxsize=1)
def _echarts() -> str:
    return resources.files("stepscope.data").joinpath("vendor").joinpath(ECHARTS).read_text(encoding="utf-8")


def _data(kind: str, ident: str, payload: dict[str, Any]) -> str:
    text = json.dumps(payload, separators=(",", ":"), allow_nan=False)
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return f"<script type='application/json' data-chart='{kind}' data-target='{ident}'>{text}</script>"


def timeline(r: RankAnalysis) -> str:
    t = r.extras.get("timeline")
    if not isinstance(t, Timeline) or not t.start_ns:
        return ""
    ident = f"timeline-{r.rank}"
    streams = sorted(set(t.streams))
    labels = [f"stream {s}" for s in streams] + ["device idle"]
    payload = {
        "step": t.step,
        "window_ms": t.window_ns / 1e6,
        "streams": labels,
        "rows": [
            [streams.index(s), a / 1e6, (a + d) / 1e6, g, n]
            for s, a, d, g, n in zip(t.streams, t.start_ns, t.dur_ns, t.group, t.name)
        ],
        "idle": [[a / 1e6, (a + d) / 1e6] for a, d in zip(t.idle_start_ns, t.idle_dur_ns)],
        "names": list(t.names),
        "short": [readable(n) for n in t.names],
    }
    note = f" ({t.dropped} shortest kernels not drawn)" if t.dropped else ""
    return (
        f"<h3>Timeline of step {escape(t.step)}, the median step{note}</h3>"
        f"<div class='chart timeline' id='{ident}' style='height:{90 + 34 * len(labels)}px'></div>"
        + _data("timeline", ident, payload)
    )


def heatmap(a: Analysis) -> str:
    if len(a.ranks) < 2:
        return ""
    steps = sorted({s.name for r in a.ranks for s in r.steps}, key=_step_order)
    col = {s: i for i, s in enumerate(steps)}
    ranks = [r.rank for r in a.ranks]
    cells = [[col[s.name], i, s.step_time_ns / 1e6] for i, r in enumerate(a.ranks) for s in r.steps]
    payload = {"steps": steps, "ranks": [f"rank {x}" for x in ranks], "cells": cells}
    return (
        "<h2>Step time by rank and step (ms)</h2>"
        f"<div class='chart heatmap' id='heatmap' style='height:{120 + 22 * len(ranks)}px'></div>"
        + _data("heatmap", "heatmap", payload)
    )


def roofline(r: RankAnalysis) -> str:
    roof = r.roofline
    if roof is None or roof.hardware is None:
        return ""
    pts = [
        g for g in roof.groups if g.intensity is not None and g.intensity > 0 and g.achieved_tflops > 0 and g.dur_ns > 0
    ]
    if not pts:
        return ""
    hw = roof.hardware
    ident = f"roofline-{r.rank}"
    total = sum(g.dur_ns for g in pts)
    payload = {
        "peak_tflops": hw.peak_tflops,
        "hbm_gbps": hw.hbm_gbps,
        "device": hw.name,
        "points": [
            [
                g.intensity,
                g.achieved_tflops,
                g.dur_ns / 1e6,
                g.dur_ns / total,
                readable(g.name),
                g.signature,
                i < LABELLED,
            ]
            for i, g in enumerate(sorted(pts, key=lambda g: -g.time_lost_ns))
        ],
    }
    return (
        "<h3>Roofline: op groups by arithmetic intensity (FLOP/byte) and achieved TFLOP/s; size = time</h3>"
        f"<div class='chart roofline' id='{ident}' style='height:420px'></div>" + _data("roofline", ident, payload)
    )


def _step_order(name: str) -> tuple[int, str]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else 0, name)


def scripts() -> str:
    """The charting library and the script that draws the charts and sorts the tables."""
    return f"<script>{_echarts()}</script><script>{_DRAW}</script>"


_DRAW = r"""
(function () {
  function esc(s) { return String(s).replace(/[&<>"']/g, function (c) {
    return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]; }); }
  var COLORS = {compute: "#3b82f6", comm: "#ef4444", memory: "#f59e0b", idle: "#d1d5db"};
  function timeline(el, d) {
    var ch = echarts.init(el), idleRow = d.streams.length - 1;
    var data = d.rows.map(function (r) { return {value: r, itemStyle: {color: COLORS[r[3]] || "#888"}}; });
    d.idle.forEach(function (g) { data.push({value: [idleRow, g[0], g[1], "idle", -1], itemStyle: {color: COLORS.idle}}); });
    ch.setOption({
      animation: false,
      tooltip: {formatter: function (p) {
        var v = p.value, ms = (v[2] - v[1]).toFixed(3);
        if (v[4] < 0) return "device idle: " + ms + " ms";
        return "<b>" + esc(d.short[v[4]]) + "</b> (" + esc(v[3]) + ")<br>" + ms + " ms at +" + v[1].toFixed(3) +
               " ms<br><span style='font-size:11px'>" + esc(d.names[v[4]]) + "</span>"; },
        extraCssText: "max-width:640px;white-space:normal"},
      grid: {left: 110, right: 30, top: 10, bottom: 60},
      xAxis: {type: "value", min: 0, max: d.window_ms, name: "ms from the step's start", nameLocation: "middle", nameGap: 25,
              axisLabel: {showMaxLabel: false}},
      yAxis: {type: "category", data: d.streams, inverse: true},
      dataZoom: [{type: "inside", filterMode: "weakFilter"}, {type: "slider", filterMode: "weakFilter", height: 16, bottom: 4}],
      series: [{type: "custom", encode: {x: [1, 2], y: 0}, data: data, renderItem: function (params, api) {
        var a = api.coord([api.value(1), api.value(0)]), b = api.coord([api.value(2), api.value(0)]);
        var h = api.size([0, 1])[1] * 0.6;
        var rect = echarts.graphic.clipRectByRect({x: a[0], y: a[1] - h / 2, width: Math.max(b[0] - a[0], 0.5), height: h},
          {x: params.coordSys.x, y: params.coordSys.y, width: params.coordSys.width, height: params.coordSys.height});
        return rect && {type: "rect", shape: rect, style: api.style()}; }}]
    });
    return ch;
  }
  function heatmap(el, d) {
    var ch = echarts.init(el), vals = d.cells.map(function (c) { return c[2]; });
    ch.setOption({
      animation: false,
      tooltip: {formatter: function (p) { return esc(d.ranks[p.value[1]]) + ", " + esc(d.steps[p.value[0]]) + ": " + p.value[2].toFixed(2) + " ms"; }},
      grid: {left: 80, right: 30, top: 10, bottom: 95},
      xAxis: {type: "category", data: d.steps, axisLabel: {rotate: d.steps.length > 8 ? 40 : 0}},
      yAxis: {type: "category", data: d.ranks},
      visualMap: {min: Math.min.apply(null, vals), max: Math.max.apply(null, vals), calculable: true, orient: "horizontal",
                  left: "center", bottom: 0, itemHeight: 120, text: ["slow", "fast"]},
      series: [{type: "heatmap", data: d.cells}]
    });
    return ch;
  }
  function roofline(el, d) {
    var ch = echarts.init(el), xs = d.points.map(function (p) { return p[0]; });
    var lo = Math.min.apply(null, xs) / 4, hi = Math.max.apply(null, xs) * 4, ridge = d.peak_tflops * 1000 / d.hbm_gbps;
    var roof = [[lo, d.hbm_gbps * lo / 1000], [ridge, d.peak_tflops], [Math.max(hi, ridge * 4), d.peak_tflops]];
    ch.setOption({
      animation: false,
      tooltip: {formatter: function (p) {
        if (p.seriesIndex === 0) return "roof: " + esc(d.device);
        var v = p.value; return "<b>" + esc(v[4]) + "</b> " + esc(v[5]) + "<br>" + v[1].toFixed(1) + " TFLOP/s at " +
          v[0].toFixed(1) + " FLOP/B, " + v[2].toFixed(3) + " ms"; }, extraCssText: "max-width:640px;white-space:normal"},
      grid: {left: 70, right: 30, top: 34, bottom: 50},
      xAxis: {type: "log", name: "FLOP/byte", nameLocation: "middle", nameGap: 28},
      yAxis: {type: "log", name: "TFLOP/s"},
      series: [
        {type: "line", data: roof, showSymbol: false, lineStyle: {color: "#111"}},
        {type: "scatter", data: d.points, symbolSize: function (v) { return 6 + 40 * Math.sqrt(v[3]); },
         itemStyle: {color: "#3b82f6", opacity: 0.75}, labelLayout: {hideOverlap: true},
         label: {show: true, position: "right", fontSize: 11, formatter: function (p) { return p.value[6] ? p.value[4] : ""; }}}
      ]
    });
    return ch;
  }
  var DRAW = {timeline: timeline, heatmap: heatmap, roofline: roofline}, charts = [];
  document.querySelectorAll("script[data-chart]").forEach(function (s) {
    var el = document.getElementById(s.getAttribute("data-target"));
    var draw = DRAW[s.getAttribute("data-chart")];
    if (el && draw) { var ch = draw(el, JSON.parse(s.textContent)); el.setAttribute("data-drawn", "1"); charts.push(ch); }
  });
  window.addEventListener("resize", function () { charts.forEach(function (c) { c.resize(); }); });
  function cellValue(td) {
    var t = td.textContent.trim(), n = parseFloat(t.replace(/,/g, ""));
    return isNaN(n) ? t.toLowerCase() : n;
  }
  document.querySelectorAll("table").forEach(function (table) {
    var head = table.rows[0]; if (!head) return;
    Array.prototype.forEach.call(head.cells, function (th, i) {
      th.style.cursor = "pointer"; th.title = "sort";
      th.addEventListener("click", function () {
        var rows = Array.prototype.slice.call(table.rows, 1), asc = th.getAttribute("data-asc") !== "1";
        rows.sort(function (x, y) {
          var a = cellValue(x.cells[i] || x), b = cellValue(y.cells[i] || y);
          return (a < b ? -1 : a > b ? 1 : 0) * (asc ? 1 : -1); });
        th.setAttribute("data-asc", asc ? "1" : "0");
        rows.forEach(function (r) { r.parentNode.appendChild(r); });
      });
    });
  });
})();
"""
