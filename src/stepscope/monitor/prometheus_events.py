"""The anomalies the detector process reports, counted by a rank's Prometheus exporter: a writer
hook that reads what ``detector.jsonl`` gained since its last look (complete lines only)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .live import EVENTS_FILE


class AnomalyTail:
    def __init__(self, run_dir: Path, exporter: Any) -> None:
        self._path = run_dir / EVENTS_FILE
        self._exporter = exporter
        self._offset = 0

    def __call__(self, rows: list[Any]) -> None:
        if not self._path.exists():
            return
        with open(self._path, "rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1
        self._offset += end
        for line in chunk[:end].splitlines():
            a = json.loads(line)
            self._exporter.observe_anomaly(str(a.get("kind")), str(a.get("cause", "")))
