"""JSON renderer of a diff (``stepscope diff --json``): layout in docs/json-schema.md, "diff"."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..diff.compare import Change, RunDiff
from .base import Renderer

DIFF_SCHEMA_VERSION = "1.0"


def _change(c: Change) -> dict[str, Any]:
    return {
        "name": c.name,
        "category": c.category,
        "a_ns": c.a_ns,
        "b_ns": c.b_ns,
        "delta_ns": c.delta_ns,
        "kind": c.kind,
    }


def to_dict(d: RunDiff) -> dict[str, Any]:
    return {
        "schema_version": DIFF_SCHEMA_VERSION,
        "tool": "stepscope",
        "a": d.a,
        "b": d.b,
        "verdict": d.verdict,
        "reason": d.reason,
        "step_time": {
            "a_ns": d.a_median_ns,
            "b_ns": d.b_median_ns,
            "delta_ratio": d.delta_ratio,
            "a_mean_ns": d.a_mean_ns,
            "b_mean_ns": d.b_mean_ns,
            "a_steps": d.a_steps,
            "b_steps": d.b_steps,
            "p_value": d.p_value,
        },
        "breakdown": {k: {"a_ns": a, "b_ns": b, "delta_ns": b - a} for k, (a, b) in d.components.items()},
        "categories": [_change(c) for c in d.categories],
        "kernels": [_change(c) for c in d.kernels],
        "ops": [_change(c) for c in d.ops],
        "ranks": {str(k): {"a_ns": a, "b_ns": b} for k, (a, b) in d.ranks.items()},
        "findings": {"gone": list(d.findings_gone), "new": list(d.findings_new)},
    }


def render(d: RunDiff, options: Mapping[str, Any]) -> str:
    return json.dumps(to_dict(d), indent=1, ensure_ascii=False)


RENDERER = Renderer(
    name="json", subject="diff", extensions=(".json",), render=render, description="diff as JSON, docs/json-schema.md"
)
