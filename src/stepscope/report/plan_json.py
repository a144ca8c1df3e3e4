"""The plan's JSON (``plan --json``; docs/plan-json-schema.md): an --evaluate record as one object,
a search's rows as a list; every object printed at the top level carries ``schema_version`` first
(a --batch line too: :func:`versioned`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..planner.result import PlanResult
from .base import Renderer

SCHEMA_VERSION = 1


def versioned(rec: dict[str, Any]) -> dict[str, Any]:
    """The record as plan prints it: ``schema_version`` first."""
    return {"schema_version": SCHEMA_VERSION, **rec}


def render(result: PlanResult, options: Mapping[str, Any]) -> str:
    if result.single:
        return json.dumps(versioned(result.records[0]))
    return json.dumps([versioned(r) for r in result.records])


RENDERER = Renderer(name="json", subject="plan", extensions=(".json",), render=render, description="JSON records")
