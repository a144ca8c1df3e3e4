"""The advisor's findings as JSON records (``docs/json-schema.md``, "findings")."""

from __future__ import annotations

from typing import Any

from ..advisor.finding import Finding


def finding_dict(f: Finding) -> dict[str, Any]:
    return {
        "id": f.id,
        "category": f.category,
        "title": f.title,
        "ranks": list(f.ranks),
        "evidence": dict(f.evidence),
        "cause": f.cause,
        "saving_ns": {"low": f.saving.low_ns, "mid": f.saving.mid_ns, "high": f.saving.high_ns},
        "saving_ratio": round(f.saving_ratio, 6),
        "saving_method": f.saving_method,
        "confidence": f.confidence,
        "step_ns": f.step_ns,
        "group": f.group,
        "actions": [{"stack": a.stack, "change": a.change, "reference": a.reference} for a in f.actions],
    }
