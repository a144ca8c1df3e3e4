"""stepscope: where every millisecond of a training step goes, and what to do about it.

``analyze`` reads profiler traces and returns a frozen ``Analysis``; ``load`` reads them into one
event table (``Trace``); ``plan`` searches or evaluates parallel layouts of a training job and
returns a ``PlanResult``. Errors are ``StepscopeError`` subclasses whose message names the fix.

The names are imported on first use, so ``import stepscope`` (and the command line's start) does
not load pyarrow, numpy and the planner until they are needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import ConfigError, InputError, StepscopeError, TraceFormatError

if TYPE_CHECKING:  # the lazy exports below, for type checkers and IDEs
    from .analysis.api import analyze
    from .analysis.config import AnalyzeConfig
    from .analysis.results import Analysis, RankAnalysis
    from .notices import Notice
    from .planner.api import plan
    from .planner.result import PlanResult
    from .report.frames import frame
    from .trace.assemble import RankInfo, Trace
    from .trace.loader import load

__version__ = "0.1.0"

_LAZY = {
    "analyze": ".analysis.api",
    "frame": ".report.frames",
    "AnalyzeConfig": ".analysis.config",
    "Analysis": ".analysis.results",
    "RankAnalysis": ".analysis.results",
    "Notice": ".notices",
    "plan": ".planner.api",
    "PlanResult": ".planner.result",
    "RankInfo": ".trace.assemble",
    "Trace": ".trace.assemble",
    "load": ".trace.loader",
}

__all__ = [
    "Analysis",
    "AnalyzeConfig",
    "ConfigError",
    "InputError",
    "Notice",
    "PlanResult",
    "RankAnalysis",
    "RankInfo",
    "StepscopeError",
    "Trace",
    "TraceFormatError",
    "__version__",
    "analyze",
    "frame",
    "load",
    "plan",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'stepscope' has no attribute {name!r}")
