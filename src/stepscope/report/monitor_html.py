"""Self-contained HTML renderer of a monitor report (``stepscope monitor report RUN_DIR --html
OUT``): one offline file with the charting library inlined (``charts_html.py``) and a CSP that
loads nothing.

The page: the run's header, the anomalies, the worst ranks, notes and warnings; step time and own
time (step minus collective wait, where a straggler shows) per rank over the steps, the anomalies'
step ranges shaded and labelled with their rank; a rank x step heatmap of own time (several ranks);
the per-rank table; the captures, linked by relative path. It computes no figure: the series are
only thinned (every k-th step) to keep the file small, and the page says so when they are.

Every string from the run (paths, messages, causes, capture fields) is untrusted: ``html.escape``
in the page, JSON with ``<>&`` escaped in chart data (``charts_html._data``), and escaped again by
the script before it reaches a tooltip.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import numpy as np

from . import charts_html
from .base import Renderer
from .monitor_cells import RANK_HEADERS, RANK_TITLE, rank_cells

if TYPE_CHECKING:  # the report's types only: the CLI does not load the detectors to start
    from ..monitor.detect.series import RankSeries
    from ..monitor.summary import MonitorReport


#: the most points a line chart draws per rank, and in all (fewer per rank when there are many)
POINTS_PER_RANK = 2000
POINTS_TOTAL = 100_000
#: the most cells of the heatmap (its library's scale is computed over all of them)
HEATMAP_CELLS = 40_000

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#111;max-width:1200px}
h1{font-size:22px} h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:13px} td,th{border:1px solid #e5e7eb;padding:3px 8px;text-align:right}
th{background:#f3f4f6;cursor:pointer} td.l,th.l{text-align:left;max-width:560px;overflow-wrap:anywhere}
.kpi{display:inline-block;margin:0 18px 8px 0} .kpi b{font-size:20px;display:block} .kpi.bad b{color:#b91c1c}
.warn{background:#fef3c7;padding:6px 10px;margin:4px 0;font-size:13px} .note{color:#555;font-size:13px;margin:4px 0}
.chart{width:100%;min-width:600px;margin:8px 0}
"""


def render(r: MonitorReport, options: Mapping[str, Any]) -> str:
    base = options.get("output_dir") or os.getcwd()
    out = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">",
        f"<title>stepscope monitor: {escape(r.run_dir)}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>stepscope: monitor report</h1>",
        _header(r),
        *(f"<div class='warn'>{escape(w)}</div>" for w in r.warnings),
        _anomalies(r),
        _worst(r),
        *(f"<p class='note'>note: {escape(n)}</p>" for n in r.notes),
        _lines(r, "step-time", "dur_ns", "Step time per rank (ms)", ""),
        _lines(r, "own-time", "own_ns", "Own time per rank (ms): step minus collective wait", _own_note(r)),
        _heatmap(r),
        _ranks(r),
        _captures(r, str(base)),
        charts_html.scripts(),
        f"<script>{_DRAW}</script>",
        "</body></html>",
    ]
    return "\n".join(x for x in out if x)


def _kpi(label: str, value: str, bad: bool = False) -> str:
    return f"<span class='kpi{' bad' if bad else ''}'>{escape(label)}<b>{value}</b></span>"


def _header(r: MonitorReport) -> str:
    return (
        f"<p>Run directory: <code class='run-dir'>{escape(r.run_dir)}</code></p><div>"
        + _kpi("steps recorded", f"{r.steps_recorded:,}")
        + _kpi("ranks / world size", f"{len(r.ranks)} / {r.world_size}")
        + _kpi("level", str(r.level))
        + _kpi("dropped records", f"{r.dropped_records:,}", bad=r.dropped_records > 0)
        + _kpi("anomalies", str(len(r.anomalies)), bad=bool(r.anomalies))
        + "</div>"
    )


def _table(ident: str, head: Sequence[str], rows: Iterable[Sequence[str]], left: Iterable[int] = ()) -> str:
    """A table whose cells are already HTML (escaped by the caller); ``left`` columns align left."""
    lcols = set(left)
    cls = [" class='l'" if i in lcols else "" for i in range(len(head))]
    th = "".join(f"<th{c}>{escape(h)}</th>" for c, h in zip(cls, head))
    body = "".join("<tr>" + "".join(f"<td{c}>{v}</td>" for c, v in zip(cls, row)) + "</tr>" for row in rows)
    return f"<table id='{ident}'><tr>{th}</tr>{body}</table>"


def _anomalies(r: MonitorReport) -> str:
    if not r.anomalies:
        return "<h2>Anomalies</h2><p>No anomalies.</p>"
    rows = [
        (
            str(i),
            escape(a.kind),
            str(a.rank) + (f" (of {len(a.ranks)} ranks)" if len(a.ranks) > 1 else ""),
            f"{a.first_step}-{a.last_step}",
            str(a.flagged_at_step),
            f"{a.excess_ratio:+.0%}",
            escape(a.cause),
            escape(a.message),
        )
        for i, a in enumerate(r.anomalies, 1)
    ]
    head = ("#", "kind", "rank", "steps", "flagged at", "excess", "cause", "message")
    return f"<h2>Anomalies ({len(r.anomalies)})</h2>" + _table("anomalies", head, rows, left=(1, 6, 7))


def _ratio(x: object) -> str:
    return f"{x:+.1%}" if isinstance(x, (int, float)) else escape(str(x))


def _worst(r: MonitorReport) -> str:
    if not r.worst_ranks:
        return ""
    rows = [
        (escape(str(w.get("rank"))), _ratio(w.get("own_over_peers_ratio")), escape(str(w.get("cause"))))
        for w in r.worst_ranks
    ]
    return "<h2>Worst ranks (own time over the peers' median, last steps)</h2>" + _table(
        "worst", ("rank", "own over peers", "cause"), rows, left=(2,)
    )


def _stride(n: int, budget: int) -> int:
    """The k of "every k-th" that keeps ``n`` items within ``budget``."""
    return max(1, -(-n // max(1, budget)))


def _every(k: int, what: str) -> str:
    return f"<p class='note downsampled'>One step in {k} drawn{what}, to keep the file small; the tables use every step.</p>"


def _ms(values: np.ndarray) -> list[float | None]:
    return [round(v / 1e6, 3) if math.isfinite(v) else None for v in values.tolist()]


def _drawn(r: MonitorReport) -> list[RankSeries]:
    return [s for s in r.series if s.step.size]


def _marks(r: MonitorReport) -> list[list[Any]]:
    """Each anomaly's shaded step range: [from, to, label, tooltip, kind]."""
    out = []
    for a in r.anomalies:
        label = f"{a.kind}, rank {a.rank}" + (f" ({len(a.ranks)} ranks)" if len(a.ranks) > 1 else "")
        tip = f"{label}, steps {a.first_step}-{a.last_step}, {a.excess_ratio:+.0%}, cause {a.cause}: {a.message}"
        out.append([a.first_step - 0.5, a.last_step + 0.5, label, tip, a.kind])
    return out


def _lines(r: MonitorReport, ident: str, field: str, title: str, note: str) -> str:
    """A line per rank of one of ``RankSeries``' figures (``dur_ns``, ``own_ns``) in ms over the
    steps, every k-th step when there are more than the budget, the anomalies shaded."""
    series = _drawn(r)
    if not series:
        return ""
    budget = max(200, min(POINTS_PER_RANK, POINTS_TOTAL // len(series)))
    k = max(_stride(s.step.size, budget) for s in series)
    payload = {
        "series": [
            {
                "name": f"rank {s.rank}",
                "data": [list(p) for p in zip(s.step[::k].tolist(), _ms(getattr(s, field)[::k]))],
            }
            for s in series
        ],
        "marks": _marks(r),
    }
    return (
        f"<h2>{escape(title)}</h2>"
        + (f"<p class='note'>{escape(note)}</p>" if note else "")
        + f"<div class='chart lines' id='{ident}' style='height:380px'></div>"
        + charts_html._data("monitor-lines", ident, payload)
        + ("<p class='note'>Shaded: the anomalies' steps (hover for the message).</p>" if r.anomalies else "")
        + (_every(k, f" (at most {budget:,} points per rank)") if k > 1 else "")
    )


def _own_note(r: MonitorReport) -> str:
    if r.level < 2:
        return "Collective waits are measured at level 2 only: here own time is the step time."
    return "A straggler's own time stands above its peers'; the ranks that wait for it drop below."


def _cells(series: list[RankSeries], cols: np.ndarray) -> list[list[float]]:
    """[column, row, own ms] of each rank's own time at the steps ``cols`` it has."""
    cells: list[list[float]] = []
    for row, s in enumerate(series):
        order = np.argsort(s.step, kind="stable")
        steps, own = s.step[order], s.own_ns[order]
        at = np.minimum(np.searchsorted(steps, cols), steps.size - 1)
        hit = np.flatnonzero(steps[at] == cols)
        for col, v in zip(hit.tolist(), _ms(own[at[hit]])):
            if v is not None:
                cells.append([col, row, v])
    return cells


def _heatmap(r: MonitorReport) -> str:
    """Own time per rank and step, in ms: the ratio to the peers' median per step is not in the
    report, so the colours are absolute (charts_html's heatmap)."""
    series = _drawn(r)
    if len(series) < 2:
        return ""
    steps = np.unique(np.concatenate([s.step for s in series]))
    k = _stride(steps.size, min(POINTS_PER_RANK, HEATMAP_CELLS // len(series)))
    cols = steps[::k]
    cells = _cells(series, cols)
    if not cells:
        return ""
    payload = {
        "steps": [f"step {c}" for c in cols.tolist()],
        "ranks": [f"rank {s.rank}" for s in series],
        "cells": cells,
    }
    height = 130 + min(22 * len(series), 900)
    return (
        "<h2>Own time by rank and step (ms)</h2>"
        "<p class='note'>A straggler is a row darker than the others from its first step on.</p>"
        f"<div class='chart heatmap' id='own-heatmap' style='height:{height}px'></div>"
        + charts_html._data("heatmap", "own-heatmap", payload)
        + (_every(k, "") if k > 1 else "")
    )


def _ranks(r: MonitorReport) -> str:
    if not r.ranks:
        return ""
    return f"<h2>{RANK_TITLE}</h2>" + _table("ranks", RANK_HEADERS, [rank_cells(s) for s in r.ranks])


def _link(path: object, base: str) -> str:
    """A link to ``path`` relative to ``base`` (the directory the page is read from), or "-"."""
    if not path:
        return "-"
    p = str(path)
    try:
        href = quote(Path(os.path.relpath(p, base)).as_posix())
    except ValueError:  # another drive
        href = Path(p).resolve().as_uri()
    return f"<a href='{escape(href)}' title='{escape(p)}'>{escape(Path(p).name)}</a>"


def _list(x: object) -> str:
    return ", ".join(map(str, x)) if isinstance(x, (list, tuple)) else str(x)


def _captures(r: MonitorReport, base: str) -> str:
    if not r.captures:
        return ""
    rows = []
    for c in r.captures:
        start, n = c.get("start_step"), c.get("steps")
        steps = f"{start}-{start + n - 1}" if isinstance(start, int) and isinstance(n, int) else f"{start}+{n}"
        traces = c.get("traces")
        rows.append(
            (
                escape(str(c.get("id"))),
                escape(steps),
                escape(_list(c.get("ranks"))),
                escape(str(c.get("reason", ""))),
                str(len(traces)) if isinstance(traces, list) else "-",
                _link(c.get("findings"), base),
                _link(c.get("analysis"), base),
            )
        )
    head = ("id", "steps", "ranks", "reason", "traces", "findings", "analysis")
    return (
        "<h2>Captures</h2>"
        + _table("captures", head, rows, left=(0, 2, 3))
        + "<p class='note'>Links are relative to the directory the report was made from.</p>"
    )


_DRAW = r"""
(function () {
  function esc(s) { return String(s).replace(/[&<>"']/g, function (c) {
    return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]; }); }
  var TINT = {straggler: "rgba(239,68,68,0.16)", regression: "rgba(249,115,22,0.16)", fluctuation: "rgba(234,179,8,0.2)"};
  function lines(el, d) {
    var ch = echarts.init(el);
    var series = d.series.map(function (s) {
      return {name: s.name, type: "line", data: s.data, showSymbol: false, lineStyle: {width: 1}, emphasis: {focus: "series"}};
    });
    series.push({name: "anomalies", type: "line", data: [], color: "#ef4444", markArea: {
      label: {position: "insideTop", fontSize: 11, color: "#7f1d1d"},
      data: d.marks.map(function (m) {
        return [{name: m[2], xAxis: m[0], itemStyle: {color: TINT[m[4]] || "rgba(0,0,0,0.1)"}}, {xAxis: m[1]}]; })}});
    ch.setOption({
      animation: false,
      legend: {type: "scroll", top: 0},
      tooltip: {trigger: "item", extraCssText: "max-width:560px;white-space:normal", formatter: function (p) {
        if (p.componentType === "markArea") return esc(d.marks[p.dataIndex][3]);
        return esc(p.seriesName) + ", step " + p.value[0] + ": " + (p.value[1] === null ? "-" : p.value[1].toFixed(3)) + " ms"; }},
      grid: {left: 70, right: 30, top: 40, bottom: 70},
      xAxis: {type: "value", name: "step", nameLocation: "middle", nameGap: 25, min: "dataMin", max: "dataMax"},
      yAxis: {type: "value", name: "ms", scale: true},
      dataZoom: [{type: "inside"}, {type: "slider", height: 16, bottom: 4}],
      series: series
    });
    return ch;
  }
  var charts = [];
  document.querySelectorAll("script[data-chart='monitor-lines']").forEach(function (s) {
    var el = document.getElementById(s.getAttribute("data-target"));
    if (el) { charts.push(lines(el, JSON.parse(s.textContent))); el.setAttribute("data-drawn", "1"); }
  });
  window.addEventListener("resize", function () { charts.forEach(function (c) { c.resize(); }); });
})();
"""


RENDERER = Renderer(
    name="html",
    subject="monitor",
    extensions=(".html",),
    render=render,
    description="self-contained HTML report: anomalies, step and own time per rank, captures",
)
