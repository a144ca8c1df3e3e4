"""Live monitoring inside a training job: cheap per-step signals on every rank, anomaly detection
(fluctuation, regression, stragglers), and a short fine profile only when something is wrong.

    from stepscope.monitor import Monitor
    with Monitor(run_dir, level=0) as mon:
        for batch in loader:
            ...
            mon.step()

then ``stepscope monitor report RUN_DIR``. torch and jax are imported only when the job uses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import CaptureConfig, DetectConfig, MonitorConfig
from .core import Monitor

if TYPE_CHECKING:
    from .summary import MonitorReport, report

__all__ = ["CaptureConfig", "DetectConfig", "Monitor", "MonitorConfig", "MonitorReport", "report"]


def __getattr__(name: str) -> Any:
    if name in ("report", "MonitorReport"):
        from . import summary

        return getattr(summary, name)
    raise AttributeError(name)
