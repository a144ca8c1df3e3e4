"""``Monitor``: cheap per-step monitoring inside the training job (usage: docs/monitor.md). The training thread only reads a clock, adds to a few integers and appends one tuple to a bounded
queue per step; a writer thread stores the records (``sinks.py``), a detector process beside one
rank looks for anomalies (``live.py``) and plans fine captures (``capture.py``). Anything that fails
inside the monitor is logged once and turns it into "not monitored": it never raises into the loop
and never blocks it. Ranks share nothing but files in ``run_dir``: no collective is ever called.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .. import __version__
from .config import Level, MonitorConfig
from .environment import catalog_peak, detect_rank
from .gcwatch import GcWatch
from .probes import StepAcc, TimedLoader, watch_model, watch_optimizer
from .prometheus_events import AnomalyTail
from .writer import BoundedQueue, Writer

log = logging.getLogger("stepscope.monitor")
_now = time.perf_counter_ns


class Monitor:
    """Per-step monitor of one rank. ``settings`` are ``MonitorConfig`` fields (``sink="jsonl"``,
    ``tokens_per_step=...``, ``prometheus_port=9400``...) or ``config=`` a whole one. ``model`` and
    ``optimizer`` are watched at level >= 1 (without an optimizer, every optimizer's step is);
    ``rank``/``world_size`` override the detected ones; ``start_step`` numbers the first step."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        level: Level = 0,
        *,
        model: Any = None,
        optimizer: Any = None,
        config: MonitorConfig | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        start_step: int = 0,
        **settings: Any,
    ) -> None:
        if config is None:
            config = MonitorConfig(level=level, **settings)
        self.config = config
        self._peak: tuple[float | None, str | None] = (config.peak_flops, "given" if config.peak_flops else None)
        if config.peak_flops is None and config.hardware:  # a misspelt name is an error now, not in the loop
            self._peak = catalog_peak(config.hardware, config.mfu_dtype, by="name")
        self.run_dir = Path(run_dir)
        self._model = model
        self._optimizer = optimizer
        self._rank_arg = (rank, world_size)
        self.rank = 0
        self.world_size = 1
        self.step_number = start_step
        self._on = False
        self._failed = False
        self._acc = StepAcc()
        self._gc = GcWatch()
        self._steps = BoundedQueue(config.queue_size)
        self._colls = BoundedQueue(config.queue_size)
        self._handles: list[Any] = []
        self._patch: Any = None
        self._writer: Writer | None = None
        self._device: Any = None
        self._jax: Any = None
        self._count = 0
        self._cuda_mem: Any = None
        self._fwd_watched = False
        self._opt_watched = False
        self._capture: Any = None
        self._live: Any = None  # the detector process (leader rank)
        self._exporter: Any = None
        self._meta_sent = False
        self._t0 = 0
        self._perf0 = 0
        self._unix0 = 0

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> Monitor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> Monitor:
        """Open the rank's file, start the writer (and, on the leader, the detector); install the
        hooks of the level. A failure leaves the job unmonitored, with one warning."""
        if self._on or self._failed:
            return self
        try:
            self._start()
        except Exception as exc:
            self._disable(exc, "could not start")
        return self

    def _start(self) -> None:
        from .sinks import open_sink

        r, w = detect_rank()
        self.rank = self._rank_arg[0] if self._rank_arg[0] is not None else r
        self.world_size = self._rank_arg[1] if self._rank_arg[1] is not None else w
        self.run_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.config
        kind = cfg.sink
        if kind == "auto":
            local = os.environ.get("LOCAL_WORLD_SIZE", "")
            kind = "sqlite" if not local.isdigit() or int(local) >= self.world_size else "jsonl"
        sink = open_sink(kind, self.run_dir, self.rank)
        self._writer = Writer(
            sink=sink,
            steps=self._steps,
            collectives=self._colls,
            interval_s=cfg.flush_interval_s,
            devices=self._resolve_devices,
            meta=self._meta,
        )
        self._install_probes()
        self._start_side_jobs()
        self._gc.start()
        self._writer.start()
        self._perf0 = self._t0 = _now()
        self._unix0 = time.time_ns()
        self._on = True

    def _install_probes(self) -> None:
        cfg = self.config
        if cfg.level >= 1:
            if self._model is not None:
                self._handles += watch_model(self._acc, self._model)
                self._fwd_watched = True
            if self._optimizer is not None or "torch" in sys.modules:
                self._handles += watch_optimizer(self._acc, self._optimizer)
                self._opt_watched = True
        if cfg.level >= 2 and "torch" in sys.modules:
            from .collectives import CollectivePatch, hook_ddp

            self._patch = CollectivePatch(self._acc)
            if self._model is not None:
                hook_ddp(self._acc, self._model)
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            from .device import CudaStepTimer

            self._device = CudaStepTimer(self.rank)
            self._cuda_mem = torch.cuda

    def _start_side_jobs(self) -> None:
        cfg = self.config
        assert self._writer is not None
        if cfg.capture.enabled:
            from .capture import CaptureController

            self._capture = CaptureController(self.run_dir, self.rank, cfg.capture)
            self._writer.hooks.append(self._capture.poll)
        if cfg.prometheus_port is not None:
            self._start_exporter()
        if cfg.detect and self.rank == cfg.leader_rank:
            from .live import start_process

            self._live = start_process(self.run_dir, cfg)

    def _start_exporter(self) -> None:
        """Each rank serves ``prometheus_port + LOCAL_RANK`` (0: any free port). A port in use or a
        missing prometheus-client costs the metrics only, with a warning, never the monitoring."""
        from .prometheus import PromExporter

        cfg = self.config
        assert self._writer is not None and cfg.prometheus_port is not None
        local = int(os.environ.get("LOCAL_RANK", "0") or 0) if cfg.prometheus_port else 0
        try:
            self._exporter = PromExporter(
                port=cfg.prometheus_port + local, host=cfg.prometheus_host, rank=self.rank, job=cfg.job
            )
        except Exception as exc:
            log.warning("stepscope monitor: no Prometheus exporter (%s)", exc)
            return
        self._writer.hooks.append(self._exporter.observe_steps)
        self._writer.hooks.append(AnomalyTail(self.run_dir, self._exporter))

    def close(self) -> None:
        """Flush and stop everything the monitor started. Never raises. The order: hooks off, the
        writer's last flush (it may still read a capture plan), captures ended (a running profiler
        stopped, plans that will not start marked failed, exports waited for), then on the leader
        the detector process told to end: it makes a last pass (no new capture), analyzes finished
        captures and writes ``detector.done``, on its own time (``detector_wait_s`` waits for it)."""
        self._on = False
        w = self._writer
        for name, fn in (
            ("hooks", self._remove_probes),
            ("writer", self._close_writer),
            ("capture", self._capture and self._capture.close),
            ("detector", self._stop_live),
            ("sink", w and w.sink.close),
            ("exporter", self._exporter and self._exporter.close),
        ):
            try:
                if fn:
                    fn()
            except Exception as exc:
                log.warning("stepscope monitor: closing the %s failed (%s)", name, exc)

    def _stop_live(self) -> None:
        if self._live is None:
            return
        from .live import STOP_FILE

        (self.run_dir / STOP_FILE).touch()
        if self.config.detector_wait_s > 0:
            self._live.wait(timeout=self.config.detector_wait_s)

    def _close_writer(self) -> None:
        if self._jax is not None:
            self._jax.drain()
        if self._writer is not None:
            self._writer.stop()

    def _remove_probes(self) -> None:
        self._gc.stop()
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if self._patch is not None:
            self._patch.remove()
            self._patch = None

    def _disable(self, exc: BaseException, what: str) -> None:
        if not self._failed:
            log.warning(
                "stepscope monitor: %s (%s: %s); this rank is not monitored from here on", what, type(exc).__name__, exc
            )
        self._failed = True
        self._on = False
        try:
            self._remove_probes()
            if self._capture is not None:
                self._capture.close(timeout_s=0.0)  # a running profiler must not outlive the monitoring
        except Exception:
            pass

    # -- the hot path ----------------------------------------------------------------------------
    def step(
        self, *, tokens: int | None = None, tags: Iterable[str] = (), wait_for: Any = None, step: int | None = None
    ) -> None:
        """The end of an iteration. ``tokens`` processed in it (default ``tokens_per_step``);
        ``tags`` for this step (``"eval"``, ``"checkpoint"``...); ``wait_for`` an output of a JAX
        step (its device time is taken without blocking); ``step`` the job's own number for the
        step that just ended (the next one is numbered from it)."""
        if not self._on:
            return
        try:
            self._record(_now(), tokens, tags, wait_for, step)
        except Exception as exc:
            self._disable(exc, "recording a step failed")

    def _record(self, t: int, tokens: int | None, tags: Iterable[str], wait_for: Any, step: int | None) -> None:
        acc = self._acc
        if step is not None:
            self.step_number = step
        n = self.step_number
        level = self.config.level
        data = fwd = bwd = opt = comm = calls = None
        if level >= 1:
            data = acc.data
            fwd = acc.fwd if self._fwd_watched else None
            opt = acc.opt if self._opt_watched else None
            if fwd is not None and acc.opt_pre:
                bwd = max(0, acc.opt_pre - self._t0 - data - fwd)
        if level >= 2:
            wait = acc.ddp_wait_ns() if acc.ddp_calls else 0
            comm = acc.comm + wait
            calls = acc.comm_calls + acc.ddp_calls
            if acc.ddp_calls:
                acc.coll["ddp_all_reduce"] = [acc.ddp_calls, wait, 0]
            if acc.coll:
                for op, (c, ns, b) in list(acc.coll.items()):  # one C-level copy: another thread may add
                    self._colls.put((self.rank, n, op, c, ns, b))
        gc_ns, gc_n = self._gc.take()
        cap = self._capture
        profiling = cap is not None and cap.active
        tag_text = ""
        if acc.tags or tags or profiling or self._count < self.config.warmup_steps:
            all_tags = list(acc.tags)
            all_tags.extend((tags,) if isinstance(tags, str) else tags)
            if self._count < self.config.warmup_steps:
                all_tags.append("warmup")
            if profiling:
                all_tags.append("profiling")
            tag_text = ",".join(all_tags)
        self._count += 1
        mem = None
        if self._cuda_mem is not None:
            mem = int(self._cuda_mem.max_memory_allocated())
            self._cuda_mem.reset_peak_memory_stats()
        start_unix = self._unix0 + (self._t0 - self._perf0)
        tok = tokens if tokens is not None else self.config.tokens_per_step
        self._steps.put(
            (
                self.rank,
                n,
                start_unix,
                t - self._t0,
                data,
                fwd,
                bwd,
                opt,
                comm,
                calls,
                gc_ns,
                gc_n,
                tok,
                mem,
                tag_text,
            )
        )
        if wait_for is not None:
            self._jax_boundary(n, wait_for)
        elif self._device is not None:
            self._device.boundary(n)
        if cap is not None and cap.busy:
            cap.on_step(n)
        acc.reset()
        self.step_number = n + 1
        self._t0 = t

    def _jax_boundary(self, n: int, output: Any) -> None:
        if self._jax is None:
            from .device import JaxStepTimer

            self._jax = JaxStepTimer(self.rank)
        self._jax.boundary(n, output)

    # -- helpers for the job ---------------------------------------------------------------------
    def loader(self, iterable: Iterable[Any]) -> TimedLoader:
        """``for batch in mon.loader(loader)``: the time in ``next()`` is the step's data phase. The
        wrapper keeps ``len()`` and the loader's attributes (``.dataset``, ``.sampler``...)."""
        return TimedLoader(self._acc, iterable)

    def tag(self, *tags: str) -> None:
        """Tag the current step (``mon.tag("checkpoint")``): it stays out of the statistics."""
        if self._on:
            self._acc.tags.extend(tags)

    @property
    def dropped(self) -> int:
        """Records dropped because the writer fell behind or failed."""
        lost = self._writer.lost if self._writer is not None else 0
        return self._steps.dropped + self._colls.dropped + lost

    # -- called by the writer thread -------------------------------------------------------------
    def _resolve_devices(self) -> list[tuple[int, int, int]]:
        out = self._device.resolve() if self._device is not None else []
        return out + self._jax.resolve() if self._jax is not None else out

    def _meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"dropped_records": self.dropped}
        if not self._meta_sent:
            self._meta_sent = True
            cfg = self.config
            torch = sys.modules.get("torch")
            peak, source = self._device_peak()
            meta.update(
                rank=self.rank,
                world_size=self.world_size,
                level=cfg.level,
                host=socket.gethostname(),
                pid=os.getpid(),
                start_unix_ns=self._unix0,
                stepscope_version=__version__,
                torch_version=getattr(torch, "__version__", None),
                tokens_per_step=cfg.tokens_per_step,
                flops_per_token=cfg.flops_per_token,
                peak_flops=peak,
                peak_flops_source=source,
                forward_watched=self._fwd_watched,
                optimizer_watched=self._opt_watched,
                collectives_watched=self._patch is not None,
            )
        if self._exporter is not None:
            self._exporter.set_drops(self.dropped)
        return meta

    def _device_peak(self) -> tuple[float | None, str | None]:
        """The peak for MFU: given, from ``hardware``, else from the CUDA device's name."""
        if self._peak[0] is None and self._cuda_mem is not None and self.config.flops_per_token:
            try:
                self._peak = catalog_peak(self._cuda_mem.get_device_name(), self.config.mfu_dtype, by="device")
            except Exception:
                self._peak = (None, None)
        return self._peak
