"""``stepscope hlo``: per module, the top instructions by FLOPs as a table (``options["top"]``) and
the entry computation's FLOPs, printed to ``options["console"]``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from ..analysis.xla.instructions import ModuleCosts
from .base import Renderer
from .fmt import esc

_COLUMNS = ("instruction", "opcode / class", "shape", "GFLOP", "MB", "FLOP/B", "pad waste", "global shape", "scope")
_RIGHT = ("GFLOP", "MB", "FLOP/B", "pad waste")


def table(m: ModuleCosts, top: int) -> Table:
    t = Table(title=f"HLO module {m.name}: {len(m.instructions)} instructions, top {top} by FLOPs")
    for col in _COLUMNS:
        t.add_column(col, justify="right" if col in _RIGHT else "left")
    for r in sorted(m.instructions, key=lambda r: -r.flops)[:top]:
        t.add_row(
            esc(r.name),
            esc(r.op_class),
            esc(r.shape[:40]),
            f"{r.flops / 1e9:.4f}",
            f"{r.bytes_accessed / 1e6:.3f}",
            f"{r.flops_per_byte:.1f}" if r.flops_per_byte is not None else "-",
            f"{r.padding_waste_ratio:.0%}",
            esc((r.global_shape or "")[:30]),
            esc((r.op_name or "")[-60:]),
        )
    return t


def render(modules: Sequence[ModuleCosts], options: Mapping[str, Any]) -> None:
    con = options["console"]
    for m in modules:
        con.print(table(m, options["top"]))
        con.print(
            f"entry computation: {m.entry_flops / 1e9:.4f} GFLOP per execution (loop bodies x their "
            "known trip counts; x 1 when unknown)",
            highlight=False,
        )


RENDERER = Renderer(
    name="terminal", subject="hlo", extensions=(), render=render, description="per-instruction cost table"
)
