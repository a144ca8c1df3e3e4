"""Self-contained HTML for plan results (``plan --html OUT``): the rows as a table and stacked bars of
memory, step time and the transfers hidden under compute."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from ..planner.result import PlanResult
from ..planner.window import HIDDEN_PARTS
from .base import Renderer

_MEM = (
    ("weights", "#3b82f6"),
    ("grads", "#8b5cf6"),
    ("optimizer", "#f59e0b"),
    ("activations", "#10b981"),
    ("buffers", "#9ca3af"),
    ("reserve", "#d1d5db"),
)
# every part of the step (cost.py: step = their sum), so each bar ends at the table's step time
_TIME = (
    ("compute", "#3b82f6"),
    ("tp", "#ef4444"),
    ("ep", "#ec4899"),
    ("dp", "#f97316"),
    ("cp", "#eab308"),
    ("bubble", "#9ca3af"),
    ("pp_p2p", "#6b7280"),
    ("optimizer", "#14b8a6"),
    ("offload", "#a16207"),
    ("host", "#a855f7"),
)
# what each transfer hid under compute (records' hidden_s; not part of the step): what the plan's
# speed leans on the overlap for, in the transfers' colors
_HIDDEN = tuple((p, c) for p, c in _TIME if p in HIDDEN_PARTS)


def _label(r: dict[str, Any]) -> str:
    """Every field the search varies, so no two rows read alike (schedule only with a pipeline,
    HSDP, kept weights and offload only when on)."""
    s = r["strategy"]
    extra = [s["sched"]] if s["pp"] > 1 else []
    extra += ["no-SP"] if s["tp"] > 1 and not s.get("sp", 1) else []
    extra += [f"hsdp{s['hsdp']}"] if s["zero"] == 3 and s["hsdp"] != s["dp"] else []
    extra += ["kept-W"] * bool(s["keep_params"])
    extra += [f"offload{s['offload_layers']}" if s.get("offload_layers") else "offload"] * bool(s["offload"])
    return " ".join(
        [
            f"tp{s['tp']} pp{s['pp']}x{s['vpp']} dp{s['dp']} cp{s['cp']} ep{s['ep']} z{s['zero']} mb{s['mb']}x{s['ga']}",
            s["recompute"],
            *extra,
        ]
    )


def _total(recs: list[dict[str, Any]], key: str, parts: tuple[tuple[str, str], ...]) -> float:
    return max(sum(r[key][p] for p, _ in parts) for r in recs)


def _bars(
    recs: list[dict[str, Any]],
    key: str,
    parts: tuple[tuple[str, str], ...],
    unit: str,
    limit: float | None,
    scale: float | None = None,
) -> str:
    """Stacked bars, one per record; ``scale`` (the value of the full width) draws them on another
    chart's scale."""
    row = 22
    lab = max(300, 7 * max(len(_label(r)) for r in recs) + 12)  # 11 px text: about 6.5 px a character
    w = lab + 600
    mx = scale or max(_total(recs, key, parts), limit or 0) or 1
    svg = [f"<svg width='{w}' height='{row * len(recs) + 10}' xmlns='http://www.w3.org/2000/svg'>"]
    for i, r in enumerate(recs):
        y = 4 + i * row
        svg.append(f"<text x='0' y='{y + 14}' font-size='11'>{escape(_label(r))}</text>")
        x = float(lab)
        for p, color in parts:
            v = r[key][p]
            bw = (w - lab - 80) * v / mx
            if bw > 0:
                svg.append(
                    f"<rect x='{x:.1f}' y='{y}' width='{bw:.1f}' height='{row - 6}' fill='{color}'><title>{p}: {v:.2f} {unit}</title></rect>"
                )
            x += bw
        svg.append(
            f"<text x='{x + 4:.1f}' y='{y + 14}' font-size='11'>{sum(r[key][p] for p, _ in parts):.2f} {unit}</text>"
        )
    if limit:
        lx = lab + (w - lab - 80) * limit / mx
        svg.append(
            f"<line x1='{lx:.1f}' y1='0' x2='{lx:.1f}' y2='{row * len(recs) + 10}' stroke='#111' stroke-dasharray='4'/>"
        )
    svg.append("</svg>")
    legend = "".join(
        f"<span style='margin-right:12px'><i style='display:inline-block;width:10px;height:10px;background:{c}'></i> {p}</span>"
        for p, c in parts
    )
    return f"<div style='font-size:12px'>{legend}</div>" + "".join(svg)


def page(
    recs: list[dict[str, Any]], title: str, capacity_gb: float | None, notes: list[str] | tuple[str, ...] = ()
) -> str:
    """The page; ``notes`` are lines under the title (a what-if's anchoring, the calibration)."""
    rows = "".join(
        f"<tr><td>{escape(_label(r))}</td><td>{r['step_time_s']:.3f}</td><td>{r['mfu']:.1%}</td><td>{r['memory_gb']['total']:.1f}</td>"
        f"<td>{'yes' if r['fits'] else 'no'}</td><td>{escape(r['bottleneck'])}</td><td>{sum(r['hidden_s'].values()):.3f}</td></tr>"
        for r in recs
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>stepscope plan</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:24px}td,th{border:1px solid #ddd;padding:3px 8px;font-size:13px}"
        "table{border-collapse:collapse}</style></head><body>"
        f"<h1>stepscope plan</h1><p>{escape(title)}</p>{''.join(f'<p>{escape(n)}</p>' for n in notes)}"
        "<table><tr><th>strategy</th><th>step s</th><th>MFU</th><th>memory GB</th><th>fits</th><th>bottleneck</th>"
        "<th>hidden s</th></tr>"
        f"{rows}</table><h2>Step time (s)</h2>{_bars(recs, 'time_s', _TIME, 's', None)}"
        "<h2>Transfers hidden under compute (s, on the same scale: inside the compute above)</h2>"
        f"{_bars(recs, 'hidden_s', _HIDDEN, 's', None, scale=_total(recs, 'time_s', _TIME))}"
        f"<h2>Memory per device (GB; dashed: the device's capacity)</h2>{_bars(recs, 'memory_gb', _MEM, 'GB', capacity_gb)}</body></html>"
    )


def render(result: PlanResult, options: Mapping[str, Any]) -> str:
    return page([*result.records, *result.compared], result.title, result.capacity_gb, result.notes)


RENDERER = Renderer(
    name="html", subject="plan", extensions=(".html", ".htm"), render=render, description="HTML page with bars"
)
