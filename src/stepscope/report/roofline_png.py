"""Roofline chart as PNG (matplotlib, the ``[plot]`` extra, imported only when asked for)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from ..analysis.results import Analysis
from ..errors import ConfigError
from .base import Renderer

_COLOR = {"compute": "#3b82f6", "memory": "#f59e0b", "latency": "#ef4444"}


def render(a: Analysis, options: Mapping[str, Any]) -> bytes:
    """One chart: the rank with the slowest median step (the rank worth looking at first)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("the PNG roofline needs matplotlib", fix="pip install 'stepscope[plot]'") from None
    ranks = [r for r in a.ranks if r.roofline and r.roofline.hardware]
    if not ranks:
        raise ConfigError("no rank has a known device, so there is no roofline to draw", fix="pass --hardware NAME")
    r = max(ranks, key=lambda x: x.step_stats.median_ns)
    roof = r.roofline
    assert roof is not None and roof.hardware is not None
    groups = [g for g in roof.groups if g.bound != "unknown" and g.intensity and g.achieved_tflops > 0]
    peak, bw = roof.hardware.peak_tflops, roof.hardware.hbm_gbps / 1e3
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    xs = [float(g.intensity or 0.0) for g in groups] or [1.0]
    x0, x1 = min(min(xs) / 2, 0.1), max(max(xs) * 2, peak / bw * 4)
    ridge = peak / bw
    ax.plot([x0, ridge, x1], [x0 * bw, peak, peak], color="black", lw=1.5, label=f"{roof.hardware.name} roofline")
    longest = max((g.dur_ns for g in groups), default=1)
    for bound, color in _COLOR.items():
        sel = [g for g in groups if g.bound == bound]
        if sel:
            ax.scatter(
                [float(g.intensity or 0.0) for g in sel],
                [g.achieved_tflops for g in sel],
                s=[20 + 400 * g.dur_ns / longest for g in sel],
                color=color,
                alpha=0.6,
                label=f"{bound}-bound",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"rank {r.rank}: ops sized by time")
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


RENDERER = Renderer(
    name="png",
    subject="analysis",
    extensions=(".png",),
    render=render,
    binary=True,
    description="roofline chart of the slowest rank, needs the [plot] extra",
)
