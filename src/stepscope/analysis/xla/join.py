"""Join HLO instructions to profiled XLA ops by name: each event whose ``op`` names an instruction
of a module (same ``module`` name when the event has one, else any module) gets the
instruction's name stack (``op_name``) as ``scope`` where the profile had none, its class
(``hlo_cost.CostModel.op_class``) as ``op_class`` where missing, and its FLOPs and bytes per
execution where the profile had no cost. Lookups run once per distinct (module, op) pair."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...trace.dictcol import DictColumn, lookup_table
from ...trace.hlo import HloModule
from .hlo_cost import CostModel


def join_hlo(events: pa.Table, modules: Sequence[HloModule]) -> tuple[pa.Table, float]:
    """(events with XLA columns filled, share of op-bearing rows matched to an instruction)."""
    if not modules or events.num_rows == 0 or events["op"].null_count == events.num_rows:
        return events, 0.0
    by_module: dict[str, dict[str, tuple[str | None, str, float, float]]] = {}
    anywhere: dict[str, tuple[str | None, str, float, float]] = {}
    for m in modules:
        cm = CostModel(m)
        table = {}
        for ins in m.instructions().values():
            c = cm.cost(ins)
            table[ins.name] = (ins.op_name, c.op_class, c.flops, c.bytes_accessed)
        by_module[m.name] = table
        for k, v in table.items():
            anywhere.setdefault(k, v)
    key = DictColumn.of(pc.binary_join_element_wise(pc.fill_null(events["module"], ""), events["op"], "\x00"))
    found = []  # per distinct (module, op)
    for k in key.values[:-1]:
        mod, _, op = k.partition("\x00")
        found.append(by_module.get(mod, {}).get(op) or anywhere.get(op))
    safe, valid = key.codes, key.valid  # the null code is len(found)
    hit = lookup_table(found, lambda f: f is not None, null=False, dtype=bool)[safe]

    def fill_str(col: str, pos: int) -> pa.Array:
        lut = pa.array([f[pos] if f else None for f in found] + [None], pa.string())
        new = lut.take(pa.array(safe))
        old = events[col].combine_chunks()
        return pc.if_else(pc.is_valid(old), old, new)

    def fill_num(col: str, pos: int) -> pa.Array:
        lut = np.array([f[pos] if f else -1 for f in found] + [-1], dtype=np.float64)
        new = np.round(lut[safe]).astype(np.int64)
        old = events[col].to_numpy()
        return pa.array(np.where(old >= 0, old, new))

    out = events
    for col, pos in (("scope", 0), ("op_class", 1)):
        out = out.set_column(out.schema.get_field_index(col), col, fill_str(col, pos))
    for col, pos in (("flops", 2), ("bytes_accessed", 3)):
        out = out.set_column(out.schema.get_field_index(col), col, fill_num(col, pos))
    n_ops = int(valid.sum())
    return out, (float(hit[valid].sum()) / n_ops if n_ops else 0.0)
