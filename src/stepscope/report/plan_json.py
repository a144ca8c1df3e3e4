"""The plan's JSON (``plan --json``; docs/plan-json-schema.md): an --evaluate record as one object,
a search as one object holding its rows with what the terminal says about them (the
configurations evaluated, the memory, the assumptions) and the rows' caveats; every object printed
at the top level carries ``schema_version`` first (a --batch line too: :func:`versioned`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..planner.result import PlanResult
from .base import Renderer

SCHEMA_VERSION = 3  # docs/plan-json-schema.md says what each version changed


def versioned(rec: dict[str, Any]) -> dict[str, Any]:
    """The record as plan prints it: ``schema_version`` first."""
    return {"schema_version": SCHEMA_VERSION, **rec}


def render(result: PlanResult, options: Mapping[str, Any]) -> str:
    if result.single:
        return json.dumps(versioned(result.records[0]))
    caveats = list(dict.fromkeys(c for r in result.records for c in r.get("caveats", ())))
    return json.dumps(
        {
            "schema_version": SCHEMA_VERSION,
            "kind": "search",
            "title": result.title,
            "rows": [versioned(r) for r in result.records],
            "notes": list(result.lines),
            "caveats": caveats,
        }
    )


RENDERER = Renderer(name="json", subject="plan", extensions=(".json",), render=render, description="JSON records")
