"""Per-instruction costs of an HLO module (``stepscope hlo``), from ``hlo_cost.CostModel``.

Rows are the instructions of every non-fused computation (entry, loop bodies, called computations):
what the profiler shows as ops. Fused computations (``calls=`` of a fusion) and reducers
(``to_apply=``) are folded into their caller and not listed; parameters, constants, tuples and
get-tuple-elements carry no work and are left out. ``flops_per_byte = flops / bytes_accessed``
(None when no bytes). ``entry_flops``: the entry computation's FLOPs per execution, loop bodies
times their known trip counts (x 1 when unknown).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...trace.hlo import HloModule, Instruction
from .hlo_cost import CostModel

_NO_WORK = ("parameter", "constant", "tuple", "get-tuple-element")
_DOT_DIMS = ("lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims")


@dataclass(frozen=True, kw_only=True)
class Layout:
    """The output's layout as printed: minor-to-major order (None when absent), tiles, memory space."""

    minor_to_major: tuple[int, ...] | None
    tiles: tuple[tuple[int, ...], ...]
    memory_space: int | None


@dataclass(frozen=True, kw_only=True)
class InstructionCost:
    """One instruction with its cost; field order is the JSON key order of ``stepscope hlo --json``."""

    name: str
    computation: str
    opcode: str
    op_class: str
    kind: str | None
    shape: str  # the output shapes, ", "-joined
    layout: Layout | None  # single-output instructions only
    operands: tuple[str, ...]
    calls: str | None
    replica_groups: str | None
    dot_dims: Mapping[str, str] | None
    sharding: str | None
    global_shape: str | None
    flops: float
    bytes_accessed: float
    flops_per_byte: float | None
    padding_waste_ratio: float
    op_name: str | None
    source: str | None


@dataclass(frozen=True, kw_only=True)
class ModuleCosts:
    name: str
    instructions: tuple[InstructionCost, ...]
    entry_flops: float


def _folded(module: HloModule) -> set[str]:
    """Computations called by a fusion or applied by a reduction: folded into their caller."""
    every = [i for c in module.computations.values() for i in c.instructions]
    fused = {(i.attrs.get("calls") or "").lstrip("%") for i in every if i.opcode == "fusion"}
    return fused | {(i.attrs.get("to_apply") or "").lstrip("%") for i in every}


def _record(cm: CostModel, comp: str, ins: Instruction) -> InstructionCost:
    c = cm.cost(ins)
    shape = ins.shapes[0] if len(ins.shapes) == 1 else None
    layout = (
        Layout(minor_to_major=shape.minor_to_major or None, tiles=shape.tiles, memory_space=shape.memory_space)
        if shape
        else None
    )
    return InstructionCost(
        name=ins.name,
        computation=comp,
        opcode=ins.opcode,
        op_class=c.op_class,
        kind=ins.attrs.get("kind"),
        shape=", ".join(str(s) for s in ins.shapes),
        layout=layout,
        operands=ins.operands,
        calls=ins.attrs.get("calls"),
        replica_groups=ins.attrs.get("replica_groups"),
        dot_dims={k: ins.attrs[k] for k in _DOT_DIMS if k in ins.attrs} or None,
        sharding=ins.attrs.get("sharding"),
        global_shape=c.global_shape,
        flops=c.flops,
        bytes_accessed=c.bytes_accessed,
        flops_per_byte=(c.flops / c.bytes_accessed) if c.bytes_accessed else None,
        padding_waste_ratio=c.padding_waste,
        op_name=ins.op_name,
        source=ins.source,
    )


def module_costs(module: HloModule) -> ModuleCosts:
    """The module's listed instructions in computation order, and its entry FLOPs."""
    cm = CostModel(module)
    folded = _folded(module)
    rows = tuple(
        _record(cm, comp.name, ins)
        for comp in module.computations.values()
        if comp.name not in folded
        for ins in comp.instructions
        if ins.opcode not in _NO_WORK
    )
    entry = module.entry
    return ModuleCosts(
        name=module.name, instructions=rows, entry_flops=cm.computation_flops(entry.name) if entry else 0.0
    )
