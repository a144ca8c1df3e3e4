"""Device time of each step without a synchronize on the training thread.

CUDA: one timing event recorded on the current stream at each step boundary; the writer thread
asks each pending event ``query()`` (non-blocking) and, once two consecutive boundaries have
completed, records ``elapsed_time`` between them: the device's period for that step. Events are
reused from a bounded pool; when ``max_pending`` are waiting, further steps go unmeasured (counted).

JAX: the job passes an output of the step (``mon.step(wait_for=loss)``); the writer thread calls
``block_until_ready`` on it (blocking only itself) and the device period is the time between two
consecutive completions. At most ``max_pending`` outputs are held.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any


class CudaStepTimer:
    def __init__(self, rank: int, max_pending: int = 256) -> None:
        import torch

        self._torch = torch
        self._rank = rank
        self._pending: deque[tuple[int, Any, bool]] = deque()
        self._pool: list[Any] = []
        self._gap = False
        self._last: Any = None  # the last completed boundary event
        self.max_pending = max_pending
        self.dropped = 0

    def boundary(self, step: int) -> None:
        """Training thread: mark the end of ``step`` (the start of ``step + 1``) on the device."""
        if len(self._pending) >= self.max_pending:  # the writer is behind: this step goes unmeasured
            self.dropped += 1
            self._gap = True
            return
        ev = self._pool.pop() if self._pool else self._torch.cuda.Event(enable_timing=True)
        ev.record()
        self._pending.append((step, ev, self._gap))  # after a gap the period is unknown
        self._gap = False

    def resolve(self) -> list[tuple[int, int, int]]:
        """Writer thread: (rank, step, device_ns) for every step whose end event completed."""
        out = []
        while self._pending and self._pending[0][1].query():
            step, ev, gap = self._pending.popleft()
            if self._last is not None:
                if not gap:
                    out.append((self._rank, step, int(self._last.elapsed_time(ev) * 1e6)))
                self._pool.append(self._last)
            self._last = ev
        return out


class JaxStepTimer:
    """A daemon thread waits on each step's output as soon as it is handed over, so the completion
    time is taken when the device finishes, not when the writer next flushes."""

    def __init__(self, rank: int, max_pending: int = 8) -> None:
        import queue
        import threading

        self._rank = rank
        self._queue: queue.Queue[tuple[int, Any]] = queue.Queue(maxsize=max_pending)
        self._done: deque[tuple[int, int, int]] = deque(maxlen=10_000)
        self._last_done_ns: int | None = None
        self.dropped = 0
        self._gap = False
        threading.Thread(target=self._run, name="stepscope-monitor-jax", daemon=True).start()

    def boundary(self, step: int, output: Any) -> None:
        try:
            self._queue.put_nowait((step, output))
        except Exception:  # full: this step goes unmeasured, and the next period with it
            self.dropped += 1
            self._gap = True

    def _run(self) -> None:
        import jax

        while True:
            step, x = self._queue.get()
            try:
                jax.block_until_ready(x)
            except Exception:
                self._last_done_ns = None
                self._queue.task_done()
                continue
            done = time.perf_counter_ns()
            if self._gap:
                self._gap = False
                self._last_done_ns = None
            if self._last_done_ns is not None:
                self._done.append((self._rank, step, done - self._last_done_ns))
            self._last_done_ns = done
            self._queue.task_done()

    def drain(self, timeout_s: float = 10.0) -> None:
        """At the monitor's end: wait (at most ``timeout_s``) for the outputs handed over."""
        deadline = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.005)

    def resolve(self) -> list[tuple[int, int, int]]:
        d = self._done
        return [d.popleft() for _ in range(len(d))]
