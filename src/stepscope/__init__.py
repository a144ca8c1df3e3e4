"""stepscope: where every millisecond of a training step goes, and what to do about it."""

from __future__ import annotations

from .errors import InputError, StepscopeError, TraceFormatError
from .trace.loader import RankInfo, Trace, load

__version__ = "0.1.0"

__all__ = ["InputError", "RankInfo", "StepscopeError", "Trace", "TraceFormatError", "__version__", "load"]
