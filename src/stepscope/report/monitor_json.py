"""JSON renderer of a monitor report (``stepscope monitor report RUN_DIR --json``): the layout is
``MonitorReport.as_dict`` (docs/monitor.md, "Out of the job")."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .base import Renderer

if TYPE_CHECKING:  # the report's types only: the CLI does not load the detectors to start
    from ..monitor.summary import MonitorReport


def render(r: MonitorReport, options: Mapping[str, Any]) -> str:
    return json.dumps(r.as_dict(), indent=1, allow_nan=False, default=str)


RENDERER = Renderer(
    name="json",
    subject="monitor",
    extensions=(".json",),
    render=render,
    description="the report as JSON: steps_recorded, anomalies, worst ranks, per-rank figures, captures",
)
