"""``stepscope hlo``: per module, the top instructions by FLOPs as a table (``options["top"]``) and
the entry computation's FLOPs, printed to ``options["console"]``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..analysis.xla.instructions import ModuleCosts
from ..textsafe import printable
from .base import Renderer
from .fit import Col, print_table

if TYPE_CHECKING:  # rich is loaded when a report is printed, not to write files
    from rich.console import Console

_COLS = (
    Col("instruction", name=True),
    Col("opcode / class", left=True),
    Col("shape", name=True, drop=3),
    Col("GFLOP"),
    Col("MB"),
    Col("FLOP/B", drop=2),
    Col("pad waste", drop=1),
    Col("global shape", name=True, drop=4),
    Col("scope", name=True, drop=5),
)


def table(con: Console, m: ModuleCosts, top: int) -> None:
    rows = [
        (
            printable(r.name),
            printable(r.op_class),
            printable(r.shape),
            f"{r.flops / 1e9:.4f}",
            f"{r.bytes_accessed / 1e6:.3f}",
            f"{r.flops_per_byte:.1f}" if r.flops_per_byte is not None else "-",
            f"{r.padding_waste_ratio:.0%}",
            printable(r.global_shape or ""),
            printable(r.op_name or ""),
        )
        for r in sorted(m.instructions, key=lambda r: -r.flops)[:top]
    ]
    print_table(con, f"HLO module {m.name}: {len(m.instructions)} instructions, top {top} by FLOPs", _COLS, rows)


def render(modules: Sequence[ModuleCosts], options: Mapping[str, Any]) -> None:
    con = options["console"]
    for m in modules:
        table(con, m, options["top"])
        con.print(
            f"entry computation: {m.entry_flops / 1e9:.4f} GFLOP per execution (loop bodies x their "
            "known trip counts; x 1 when unknown)",
            highlight=False,
        )


RENDERER = Renderer(
    name="terminal", subject="hlo", extensions=(), render=render, description="per-instruction cost table"
)
