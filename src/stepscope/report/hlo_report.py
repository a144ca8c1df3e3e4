"""``stepscope hlo``: per-instruction costs of an HLO module, as a terminal table or JSON.

Rows are the instructions of every non-fused computation (entry, loop bodies, called
computations): what the profiler shows as ops. Fused computations are folded into their fusion.
"""

from __future__ import annotations

from typing import Any

from ..analysis.xla.hlo_cost import CostModel
from ..trace.hlo import HloModule


def records(module: HloModule) -> list[dict[str, Any]]:
    cm = CostModel(module)
    fused = {
        (i.attrs.get("calls") or "").lstrip("%")
        for c in module.computations.values()
        for i in c.instructions
        if i.opcode == "fusion"
    }
    reducers = {
        (i.attrs.get("to_apply") or "").lstrip("%") for c in module.computations.values() for i in c.instructions
    }
    out = []
    for comp in module.computations.values():
        if comp.name in fused or comp.name in reducers:
            continue
        for ins in comp.instructions:
            if ins.opcode in ("parameter", "constant", "tuple", "get-tuple-element"):
                continue
            c = cm.cost(ins)
            shape = ins.shapes[0] if len(ins.shapes) == 1 else None
            out.append(
                {
                    "name": ins.name,
                    "computation": comp.name,
                    "opcode": ins.opcode,
                    "op_class": c.op_class,
                    "kind": ins.attrs.get("kind"),
                    "shape": ", ".join(str(s) for s in ins.shapes),
                    "layout": (
                        {
                            "minor_to_major": list(shape.minor_to_major) if shape.minor_to_major else None,
                            "tiles": [list(t) for t in shape.tiles],
                            "memory_space": shape.memory_space,
                        }
                        if shape
                        else None
                    ),
                    "operands": list(ins.operands),
                    "calls": ins.attrs.get("calls"),
                    "replica_groups": ins.attrs.get("replica_groups"),
                    "dot_dims": {
                        k: ins.attrs[k]
                        for k in ("lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims")
                        if k in ins.attrs
                    }
                    or None,
                    "sharding": ins.attrs.get("sharding"),
                    "global_shape": c.global_shape,
                    "flops": c.flops,
                    "bytes_accessed": c.bytes_accessed,
                    "flops_per_byte": (c.flops / c.bytes_accessed) if c.bytes_accessed else None,
                    "padding_waste_ratio": c.padding_waste,
                    "op_name": ins.op_name,
                    "source": ins.source,
                }
            )
    return out


def entry_flops(module: HloModule) -> float:
    entry = module.entry
    return CostModel(module).computation_flops(entry.name) if entry else 0.0


def table(module: HloModule, recs: list[dict[str, Any]], top: int) -> Any:
    from rich.table import Table

    t = Table(title=f"HLO module {module.name}: {len(recs)} instructions, top {top} by FLOPs")
    for col in (
        "instruction",
        "opcode / class",
        "shape",
        "GFLOP",
        "MB",
        "FLOP/B",
        "pad waste",
        "global shape",
        "scope",
    ):
        t.add_column(col, justify="right" if col in ("GFLOP", "MB", "FLOP/B", "pad waste") else "left")
    for r in sorted(recs, key=lambda r: -r["flops"])[:top]:
        t.add_row(
            r["name"],
            r["op_class"],
            r["shape"][:40],
            f"{r['flops'] / 1e9:.4f}",
            f"{r['bytes_accessed'] / 1e6:.3f}",
            f"{r['flops_per_byte']:.1f}" if r["flops_per_byte"] is not None else "-",
            f"{r['padding_waste_ratio']:.0%}",
            (r["global_shape"] or "")[:30],
            (r["op_name"] or "")[-60:],
        )
    return t
