"""JSON renderer. The layout is a stable, versioned contract documented in docs/json-schema.md."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..analysis.results import Analysis, RankAnalysis
from ..analysis.steps.results import StepBreakdown
from . import cluster_json
from .base import Renderer
from .findings_json import finding_dict

JSON_SCHEMA_VERSION = "2.1"


_FIELDS: dict[type, tuple[str, ...]] = {}


def plain(value: Any) -> Any:
    """``dataclasses.asdict`` for results: dataclasses become dicts, tuples lists, recursively;
    leaf values are shared, not deep-copied (results are frozen), which keeps large reports fast."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELDS.get(type(value))
        if names is None:
            names = _FIELDS[type(value)] = tuple(f.name for f in dataclasses.fields(value))
        return {n: plain(getattr(value, n)) for n in names}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _step(s: StepBreakdown) -> dict[str, Any]:
    d = plain(s)
    d["collectives"] = {c["type"]: {k: v for k, v in c.items() if k != "type"} for c in d["collectives"]}
    return d


def _rank(r: RankAnalysis) -> dict[str, Any]:
    roof = r.roofline
    steps = [_step(s) for s in r.steps]
    for d in steps:
        d.update(mfu=None, hfu=None, recompute_ns=None, executed_flops=None, model_flops=None)
    if roof is not None:
        for d, f in zip(steps, roof.steps):
            d.update(
                mfu=f.mfu,
                hfu=f.hfu,
                executed_flops=f.executed_flops,
                model_flops=f.model_flops,
                excess_flops=f.excess_flops,
            )
    for d, ph in zip(steps, r.phases):
        d.update(recompute_ns=ph.recompute_ns, phase_ns=ph.phase_ns, recompute_ops=ph.recompute_ops)
    return {
        "rank": r.rank,
        "device": r.device,
        "path": r.path,
        "step_source": r.step_source,
        "steps": steps,
        "hardware": plain(roof.hardware) if roof and roof.hardware else None,
        "roofline": [plain(g) for g in roof.groups] if roof else [],
        "flops_coverage_ratio": roof.coverage_ratio if roof else 0.0,
        "roofline_kernels": [plain(g) for g in roof.kernels] if roof else [],
        "roofline_measured": [plain(g) for g in roof.measured] if roof else [],
        "roofline_by_category": [plain(c) for c in roof.by_category] if roof else [],
        "mfu_diagnosis": plain(r.mfu_diagnosis) if r.mfu_diagnosis else None,
        "scopes": [plain(x) for x in r.scopes],
        "roofline_note": roof.note if roof else "",
        "step_stats": plain(r.step_stats),
        "top_kernels": [plain(o) for o in r.top_kernels],
        "top_cpu_ops": [plain(o) for o in r.top_cpu_ops],
        "stream_idle": [plain(o) for o in r.stream_idle],
        "launch": plain(r.launch),
        "collectives": {c.type: {k: v for k, v in plain(c).items() if k != "type"} for c in r.collectives},
        "extras": {k: plain(v) for k, v in r.extras.items()},
    }


def to_dict(a: Analysis) -> dict[str, Any]:
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "tool": "stepscope",
        "inputs": list(a.inputs),
        "warnings": list(a.warnings),
        "findings": [finding_dict(f) for f in a.findings],
        "ranks": [_rank(r) for r in a.ranks],
        "cluster": cluster_json.to_dict(a.cluster),
    }


def numpy_default(value: object) -> object:
    """``json.dumps`` fallback: numpy scalars become Python scalars, arrays become lists; anything else
    is refused as ``json`` would (an extra analysis may hold numpy values in its result)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def render(a: Analysis, options: Mapping[str, Any]) -> str:
    return dumps_by_line(to_dict(a))


def dumps_by_line(doc: Mapping[str, Any]) -> str:
    """``doc`` as JSON with each top-level key, and each item of a top-level list (one rank), on a
    line of its own: readable with ``jq`` or a pager, and written by the C encoder (``json`` uses
    it only without ``indent``; the indenting encoder is pure Python)."""
    enc = json.JSONEncoder(ensure_ascii=False, default=numpy_default)
    lines = []
    for key, value in doc.items():
        if isinstance(value, list) and value:
            body = "[\n  " + ",\n  ".join(enc.encode(v) for v in value) + "\n ]"
        else:
            body = enc.encode(value)
        lines.append(f" {enc.encode(key)}: {body}")
    return "{\n" + ",\n".join(lines) + "\n}"


RENDERER = Renderer(
    name="json",
    subject="analysis",
    extensions=(".json",),
    render=render,
    description="JSON report, schema in docs/json-schema.md",
)
