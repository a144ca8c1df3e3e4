"""Terminal section for the JAX/XLA view (``extras["xla"]``, see ``analysis/xla/summary.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis.xla.summary import Share, XlaSummary
from ..textsafe import printable
from .fit import Col, print_table
from .fmt import ms

if TYPE_CHECKING:  # rich is loaded when a report is printed, not to write files
    from rich.console import Console


def _shares(con: Console, title: str, rows: tuple[Share, ...], top: int) -> None:
    cols = (Col("", name=True), Col("ms"), Col("share"), Col("ops"))
    print_table(
        con, title, cols, [(printable(s.label), ms(s.time_ns), f"{s.share:.1%}", str(s.count)) for s in rows[:top]]
    )


def render(x: XlaSummary | None, con: Console, top: int) -> None:
    if x is None:
        return
    con.print(
        f"XLA ops: {ms(x.op_time_ns)} ms over {x.devices} device(s); name stacks for {x.scope_coverage_ratio:.0%} "
        f"and FLOPs for {x.flops_coverage_ratio:.0%} of that time",
        highlight=False,
    )
    _shares(con, "XLA time by category", x.by_category, top)
    stall = f"{ms(x.async_stall_ns)} ms ({x.async_stall_ns / x.op_time_ns:.1%} of op time)" if x.op_time_ns else "0"
    con.print(f"async collective stall (time in *-done): {stall}", highlight=False)
    _shares(con, "By autodiff phase", x.phases, top)
    if x.recompute_share_of_backward is not None:
        con.print(f"recompute (remat) is {x.recompute_share_of_backward:.1%} of backward time", highlight=False)
    _shares(con, "By named scope", x.by_scope, top)
    _shares(con, "By fusion kind", x.by_fusion_kind, top)
    if x.loops:
        _shares(con, "Loops and calls (containers; their ops are counted above)", x.loops, top)
    if x.custom_calls:
        _shares(con, "Custom calls (Pallas / Mosaic / FFI kernels)", x.custom_calls, top)
    cols = (
        Col("op", name=True),
        Col("category", left=True, drop=3),
        Col("fusion", left=True, drop=4),
        Col("count", drop=2),
        Col("ms"),
        Col("GFLOP/exec", drop=5),
        Col("TFLOP/s"),
        Col("FLOP/B", drop=6),
        Col("bound", left=True, drop=1),
        Col("roofline eff"),
    )
    rows = [
        (
            printable(o.op),
            printable(o.category),
            printable(o.fusion_kind or ""),
            str(o.count),
            ms(o.time_ns),
            f"{o.flops / 1e9:.3f}" if o.flops >= 0 else "-",
            f"{o.achieved_tflops:.3f}" if o.achieved_tflops is not None else "-",
            f"{o.intensity_flops_per_byte:.1f}" if o.intensity_flops_per_byte is not None else "-",
            o.bound or "-",
            f"{o.efficiency:.1%}" if o.efficiency is not None else "-",
        )
        for o in x.top_ops[:top]
    ]
    print_table(con, "Top XLA ops", cols, rows)
