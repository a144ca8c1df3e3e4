"""CPython garbage-collection pauses, from ``gc.callbacks``: ``start`` and ``stop`` of each
collection, on whatever thread triggered it. The pause is stop minus start; pauses are summed into
the current step by the monitor."""

from __future__ import annotations

import gc
import time
from typing import Any


class GcWatch:
    """Sums pauses since the last ``take()``. Installed by ``start()``, removed by ``stop()``."""

    def __init__(self) -> None:
        self._t0 = 0
        self.pause_ns = 0
        self.count = 0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter_ns()
        elif self._t0:
            self.pause_ns += time.perf_counter_ns() - self._t0
            self.count += 1
            self._t0 = 0

    def start(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def take(self) -> tuple[int, int]:
        """(pause ns, collections) since the last call, and start again from zero."""
        out = (self.pause_ns, self.count)
        self.pause_ns = 0
        self.count = 0
        return out
