"""``stepscope hlo`` renders through the registry: subject "hlo", a terminal table and JSON."""

from __future__ import annotations

import json

from stepscope.analysis.xla.instructions import InstructionCost, ModuleCosts
from stepscope.report import registry


def _row(name: str, flops: float) -> InstructionCost:
    return InstructionCost(
        name=name,
        computation="main",
        opcode="dot",
        op_class="dot",
        kind=None,
        shape="f32[8,256]",
        layout=None,
        operands=("a", "b"),
        calls=None,
        replica_groups=None,
        dot_dims=None,
        sharding=None,
        global_shape=None,
        flops=flops,
        bytes_accessed=1000.0,
        flops_per_byte=flops / 1000.0,
        padding_waste_ratio=0.0,
        op_name=None,
        source=None,
    )


def test_hlo_json_lists_instructions_in_order_with_their_fields() -> None:
    m = ModuleCosts(name="m", instructions=(_row("d1", 2e6), _row("d2", 4e6)), entry_flops=6e6)
    doc = json.loads(registry.by_name("hlo", "json").render((m,), {}))
    (mod,) = doc["modules"]
    assert mod["name"] == "m" and [i["name"] for i in mod["instructions"]] == ["d1", "d2"]
    assert mod["instructions"][0]["operands"] == ["a", "b"] and mod["instructions"][1]["flops_per_byte"] == 4000.0


def test_hlo_renderers_are_registered_under_their_subject() -> None:
    assert [r.name for r in registry.for_subject("hlo")] == ["terminal", "json"]
