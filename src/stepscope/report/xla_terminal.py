"""Terminal section for the JAX/XLA view (``extras["xla"]``, see ``analysis/xla/summary.py``)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analysis.xla.summary import Share, XlaSummary
from .fmt import esc, ms


def _shares(title: str, rows: tuple[Share, ...], top: int) -> Table:
    t = Table(title=title)
    for col in ("", "ms", "share", "ops"):
        t.add_column(col, justify="left" if not col else "right")
    for s in rows[:top]:
        t.add_row(esc(s.label), ms(s.time_ns), f"{s.share:.1%}", str(s.count))
    return t


def render(x: XlaSummary | None, con: Console, top: int) -> None:
    if x is None:
        return
    con.print(
        f"XLA ops: {ms(x.op_time_ns)} ms over {x.devices} device(s); name stacks for {x.scope_coverage_ratio:.0%} "
        f"and FLOPs for {x.flops_coverage_ratio:.0%} of that time",
        highlight=False,
    )
    con.print(_shares("XLA time by category", x.by_category, top))
    stall = f"{ms(x.async_stall_ns)} ms ({x.async_stall_ns / x.op_time_ns:.1%} of op time)" if x.op_time_ns else "0"
    con.print(f"async collective stall (time in *-done): {stall}", highlight=False)
    con.print(_shares("By autodiff phase", x.phases, top))
    if x.recompute_share_of_backward is not None:
        con.print(f"recompute (remat) is {x.recompute_share_of_backward:.1%} of backward time", highlight=False)
    con.print(_shares("By named scope", x.by_scope, top))
    con.print(_shares("By fusion kind", x.by_fusion_kind, top))
    if x.loops:
        con.print(_shares("Loops and calls (containers; their ops are counted above)", x.loops, top))
    if x.custom_calls:
        con.print(_shares("Custom calls (Pallas / Mosaic / FFI kernels)", x.custom_calls, top))
    t = Table(title="Top XLA ops")
    for col in ("op", "category", "fusion", "count", "ms", "GFLOP/exec", "TFLOP/s", "FLOP/B", "bound", "roofline eff"):
        t.add_column(
            col, justify="left" if col in ("op", "category", "fusion", "bound") else "right", no_wrap=col == "op"
        )
    for o in x.top_ops[:top]:
        t.add_row(
            esc(o.op[:50]),
            esc(o.category),
            esc(o.fusion_kind or ""),
            str(o.count),
            ms(o.time_ns),
            f"{o.flops / 1e9:.3f}" if o.flops >= 0 else "-",
            f"{o.achieved_tflops:.3f}" if o.achieved_tflops is not None else "-",
            f"{o.intensity_flops_per_byte:.1f}" if o.intensity_flops_per_byte is not None else "-",
            esc(o.bound or "-"),
            f"{o.efficiency:.1%}" if o.efficiency is not None else "-",
        )
    con.print(t)
