"""The rank's writer thread: drains the bounded queues the training thread fills, reads CUDA events
back, and writes everything to the sink, every ``flush_interval_s``. Also where the slower side
jobs run (the capture plan poll, the Prometheus exporter), so the training thread only appends.

A failure here is logged once and turns the writer into a drain that drops (and counts) records:
memory stays bounded and the job never sees the exception.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from .sinks import Sink

log = logging.getLogger("stepscope.monitor")


class BoundedQueue:
    """A FIFO of at most ``capacity`` items; ``put`` on a full queue drops the item and counts it.
    ``put`` and ``take_all`` are safe across one producer and one consumer thread (deque's append
    and popleft are atomic in CPython)."""

    __slots__ = ("_q", "capacity", "dropped")

    def __init__(self, capacity: int) -> None:
        self._q: deque[Any] = deque()
        self.capacity = capacity
        self.dropped = 0

    def put(self, item: Any) -> None:
        if len(self._q) < self.capacity:
            self._q.append(item)
        else:
            self.dropped += 1

    def take_all(self) -> list[Any]:
        q = self._q
        return [q.popleft() for _ in range(len(q))]

    def __len__(self) -> int:
        return len(self._q)


class Writer(threading.Thread):
    """Flushes ``steps``/``collectives`` queues to ``sink`` every ``interval_s``. ``hooks`` run after
    each flush with the step rows just written (exporter, capture poll); each is disabled on its
    first exception."""

    def __init__(
        self,
        *,
        sink: Sink,
        steps: BoundedQueue,
        collectives: BoundedQueue,
        interval_s: float,
        devices: Callable[[], list[tuple[int, int, int]]] | None = None,
        meta: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(name="stepscope-monitor-writer", daemon=True)
        self.sink = sink
        self.steps = steps
        self.collectives = collectives
        self.interval_s = interval_s
        self._devices = devices
        self._meta = meta
        self.hooks: list[Callable[[list[Any]], None]] = []
        self._stop_event = threading.Event()
        self.failed = False
        self.written = 0
        self.lost = 0  # step records taken from the queue and not written (the sink failed)

    def run(self) -> None:
        while not self._stop_event.wait(self.interval_s):
            self.flush()
        self.flush()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout_s)

    def flush(self) -> None:
        rows = self.steps.take_all()
        colls = self.collectives.take_all()
        if self.failed:
            self.lost += len(rows)
            return
        try:
            devs = self._devices() if self._devices else []
            meta = self._meta() if self._meta else None
            if rows or colls or devs or meta:
                self.sink.write(steps=rows, collectives=colls, devices=devs, meta=meta)
            self.written += len(rows)
        except Exception as exc:  # a full disk, a removed run directory: stop writing, never raise
            self.failed = True
            self.lost += len(rows)
            log.warning(
                "stepscope monitor: writing %s failed (%s); the rest of the run is not recorded", self.sink.path, exc
            )
            return
        for hook in list(self.hooks):
            try:
                hook(rows)
            except Exception as exc:
                self.hooks.remove(hook)
                log.warning("stepscope monitor: %s failed (%s); turned off", getattr(hook, "__qualname__", hook), exc)
