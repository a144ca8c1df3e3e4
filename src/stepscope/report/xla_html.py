"""HTML section for the JAX/XLA view (``extras["xla"]``). Every string from the trace is escaped."""

from __future__ import annotations

from html import escape

from ..analysis.xla.summary import Share, XlaSummary
from .fmt import ms


def _table(title: str, rows: tuple[Share, ...], top: int) -> str:
    body = "".join(
        f"<tr><td class='l'>{escape(s.label)}</td><td>{ms(s.time_ns)}</td><td>{s.share:.1%}</td><td>{s.count}</td></tr>"
        for s in rows[:top]
    )
    return f"<h4>{escape(title)}</h4><table><tr><th class='l'></th><th>ms</th><th>share</th><th>ops</th></tr>{body}</table>"


def section(x: XlaSummary | None, top: int) -> str:
    if x is None:
        return ""
    o = [
        f"<h3>XLA ops</h3><p>{ms(x.op_time_ns)} ms of op time over {x.devices} device(s); name stacks for "
        f"{x.scope_coverage_ratio:.0%}, FLOPs for {x.flops_coverage_ratio:.0%} of it. Async collective stall "
        f"(time in <code>*-done</code>): <b class='xla-stall'>{ms(x.async_stall_ns)} ms</b>."
    ]
    if x.recompute_share_of_backward is not None:
        o.append(f" Recompute is <b class='xla-remat'>{x.recompute_share_of_backward:.1%}</b> of backward time.")
    o.append("</p>")
    for title, rows in (
        ("By category", x.by_category),
        ("By autodiff phase", x.phases),
        ("By named scope", x.by_scope),
        ("By fusion kind", x.by_fusion_kind),
        ("Custom calls", x.custom_calls),
        ("Loops and calls (containers)", x.loops),
    ):
        if rows:
            o.append(_table(title, rows, top))
    head = "".join(f"<th>{h}</th>" for h in ("count", "ms", "GFLOP/exec", "TFLOP/s", "FLOP/B", "bound", "roofline eff"))
    o.append(
        f"<h4>Top XLA ops</h4><table class='xla-ops'><tr><th class='l'>op</th><th class='l'>category</th><th class='l'>scope</th>{head}</tr>"
    )
    for op in x.top_ops[:top]:
        cells = [
            str(op.count),
            ms(op.time_ns),
            f"{op.flops / 1e9:.3f}" if op.flops >= 0 else "-",
            f"{op.achieved_tflops:.3f}" if op.achieved_tflops is not None else "-",
            f"{op.intensity_flops_per_byte:.1f}" if op.intensity_flops_per_byte is not None else "-",
            escape(op.bound or "-"),
            f"{op.efficiency:.1%}" if op.efficiency is not None else "-",
        ]
        o.append(
            f"<tr><td class='l'>{escape(op.op)}</td><td class='l'>{escape(op.category)}</td><td class='l'>{escape(op.scope or '')}</td>"
            + "".join(f"<td>{c}</td>" for c in cells)
            + "</tr>"
        )
    o.append("</table>")
    return "".join(o)
