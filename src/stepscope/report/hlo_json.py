"""``stepscope hlo --json``: ``{"modules": [{"name", "instructions": [...]}]}``, one object per
instruction with the fields of ``analysis.xla.instructions.InstructionCost`` in order."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..analysis.xla.instructions import ModuleCosts
from .base import Renderer


def render(modules: Sequence[ModuleCosts], options: Mapping[str, Any]) -> str:
    doc = {
        "modules": [{"name": m.name, "instructions": [dataclasses.asdict(i) for i in m.instructions]} for m in modules]
    }
    return json.dumps(doc)


RENDERER = Renderer(
    name="json", subject="hlo", extensions=(".json",), render=render, description="per-instruction costs as JSON"
)
