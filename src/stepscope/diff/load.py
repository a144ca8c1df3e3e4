"""One side of a diff: an ``analyze --json`` report, or traces (a file, directory or glob, one rank
or several) analyzed here."""

from __future__ import annotations

import json
from pathlib import Path

from ..analysis.api import analyze
from ..analysis.config import AnalyzeConfig
from ..errors import InputError
from .profile import RunProfile, from_analysis, from_report

_REPORT_PROBE_BYTES = 256


def is_report(path: str) -> bool:
    """A stepscope report starts with its schema version and ``"tool": "stepscope"`` (a Kineto trace
    never does)."""
    p = Path(path)
    if not p.is_file() or not p.name.endswith(".json"):
        return False
    with p.open("rb") as f:
        head = f.read(_REPORT_PROBE_BYTES)
    compact = head.replace(b" ", b"").replace(b"\n", b"")
    return b'"tool":"stepscope"' in compact and b'"schema_version"' in compact


def load_side(path: str, cfg: AnalyzeConfig, workers: int | None = None) -> RunProfile:
    if is_report(path):
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise InputError(
                f"not a readable report ({exc})", path=path, fix="re-create it with `stepscope analyze --json`"
            ) from None
        return from_report(doc, path)
    return from_analysis(analyze([path], cfg, workers=workers), path)
