"""Coarse-to-fine, on each rank: a fine ``torch.profiler`` trace of the steps a capture plan names.

The leader's detector writes ``captures/<id>/plan.json`` (``{"id", "start_step", "steps",
"ranks", "reason"}``, written whole then renamed in). Each rank's writer thread reads new plans;
the training thread starts the profiler at the end of step ``start_step - 1`` if the rank is named,
so every named rank records the same steps with no collective. After ``steps`` steps the profiler
stops; the trace is exported on a background thread to ``captures/<id>/rank-<r>.json`` and
``rank-<r>.done`` says it is complete (or ``rank-<r>.failed`` why not: the plan arrived after its
start step, the trace exceeded ``max_trace_bytes``, the profiler failed). Steps under the profiler,
and those that run while its trace is exported, are tagged ``profiling`` so they stay out of the
statistics.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

from .config import CaptureConfig

log = logging.getLogger("stepscope.monitor")


def read_json(path: Path) -> dict[str, Any]:
    """A capture file (plan, ``.done`` or ``.failed`` marker) as a dict; {} when missing or torn."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def trace_name(marker: Path) -> str:
    """The trace a ``rank-N.done`` marker names (a file, or a JAX profile directory)."""
    return str(read_json(marker).get("trace") or marker.stem + ".json")


def write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1), encoding="utf-8")
    tmp.replace(path)


class CaptureController:
    def __init__(self, run_dir: Path, rank: int, cfg: CaptureConfig) -> None:
        self.root = run_dir / "captures"
        self.rank = rank
        self.cfg = cfg
        self._exporting = 0  # exports under way (written by their threads when they end)
        self._closed = False
        self._lock = threading.Lock()
        self._plan: dict[str, Any] | None = None
        self._seen: set[str] = set()
        self._prof: Any = None
        self._left = 0
        self._exports: list[threading.Thread] = []

    @property
    def busy(self) -> bool:
        """A plan is waiting to start or a profiler runs: ``on_step`` has work."""
        return self._plan is not None or self._prof is not None

    @property
    def active(self) -> bool:
        """A profiler runs, or a trace is being exported: the step pays for it (tagged ``profiling``)."""
        return self._prof is not None or self._exporting > 0

    # writer thread
    def poll(self, rows: list[Any]) -> None:
        if self._closed or self._plan is not None or not self.root.is_dir():
            return
        for plan_file in sorted(self.root.glob("*/plan.json")):
            cid = plan_file.parent.name
            if cid in self._seen:
                continue
            self._seen.add(cid)
            plan = read_json(plan_file)
            if self.rank in plan.get("ranks", ()):
                plan["dir"] = str(plan_file.parent)
                self._plan = plan
                return

    # training thread
    def on_step(self, n: int) -> None:
        """After step ``n`` was recorded."""
        plan = self._plan
        if plan is None:
            return
        try:
            if self._prof is None:
                if n + 1 == plan["start_step"]:
                    self._start()
                elif n + 1 > plan["start_step"]:
                    self._finish(
                        f"the plan arrived after its start step {plan['start_step']} (this rank was at {n + 1})"
                    )
            else:
                self._prof.step()  # torch: closes ProfilerStep#k; after the last, the schedule ends the record
                self._left -= 1
                if self._left == 0:
                    self._stop()
        except Exception as exc:
            prof, self._prof = self._prof, None
            try:
                if prof is not None:
                    prof.stop()
            except Exception:
                pass
            self._finish(f"the profiler failed: {type(exc).__name__}: {exc}")

    def _start(self) -> None:
        assert self._plan is not None
        self._left = int(self._plan["steps"])
        backend = self.cfg.backend
        if backend == "auto":
            backend = "torch" if "torch" in sys.modules else "jax"
        session = TorchSession if backend == "torch" else JaxSession
        self._prof = session(self._left, Path(self._plan["dir"]) / f"rank-{self.rank}")

    def _stop(self) -> None:
        prof, plan = self._prof, self._plan
        prof.stop()
        self._prof = None
        self._plan = None  # ``active`` stays on until the export is written: those steps pay for it too
        with self._lock:
            self._exporting += 1
        t = threading.Thread(target=self._export, args=(prof, plan), name="stepscope-capture-export", daemon=True)
        t.start()
        self._exports.append(t)

    def _export(self, prof: Any, plan: dict[str, Any]) -> None:
        d = Path(plan["dir"])
        try:
            out = prof.export()
            files = [out] if out.is_file() else [f for f in out.rglob("*") if f.is_file()]
            size = sum(f.stat().st_size for f in files)
            if size > self.cfg.max_trace_bytes:
                for f in files:
                    f.unlink()
                write_json_atomic(d / f"rank-{self.rank}.failed", {"reason": f"trace of {size} bytes over the limit"})
                return
            write_json_atomic(d / f"rank-{self.rank}.done", {"trace": out.name, "bytes": size})
        except Exception as exc:
            log.warning("stepscope monitor: exporting the capture in %s failed (%s)", d, exc)
            write_json_atomic(d / f"rank-{self.rank}.failed", {"reason": f"{type(exc).__name__}: {exc}"})
        finally:
            with self._lock:
                self._exporting -= 1

    def _finish(self, reason: str) -> None:
        plan, self._plan = self._plan, None
        if plan is not None:
            write_json_atomic(Path(plan["dir"]) / f"rank-{self.rank}.failed", {"reason": reason})

    def close(self, timeout_s: float = 120.0) -> None:
        """At the monitor's end: a capture still running is stopped; exports are waited for."""
        if self._prof is not None:
            self._stop()
        self._closed = True  # the writer's last flush polled already: no plan is taken from here on
        if self._plan is not None:
            self._finish(f"the run ended before the start step {self._plan['start_step']}")
        for t in self._exports:
            t.join(timeout_s)


class TorchSession:
    """``torch.profiler`` over ``steps`` steps; a schedule makes it mark each step
    (``ProfilerStep#k``), which ``analyze`` splits on. Exported as ``<stem>.json``."""

    def __init__(self, steps: int, stem: Path) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        acts = [ProfilerActivity.CPU]
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            acts.append(ProfilerActivity.CUDA)
        with warnings.catch_warnings():  # "won't be using warmup": the steps before ran unprofiled anyway
            warnings.simplefilter("ignore", UserWarning)
            sched = schedule(wait=0, warmup=0, active=steps, repeat=1)
        self._out = stem.with_suffix(".json")
        self._prof = profile(activities=acts, record_shapes=True, schedule=sched)
        self._prof.start()

    def step(self) -> None:
        self._prof.step()

    def stop(self) -> None:
        self._prof.stop()

    def export(self) -> Path:
        self._prof.export_chrome_trace(str(self._out))
        return self._out


class JaxSession:
    """``jax.profiler`` trace into the directory ``<stem>/`` (an XPlane profile ``analyze`` reads);
    JAX marks no steps, so the captured steps are analyzed as one window."""

    def __init__(self, steps: int, stem: Path) -> None:
        import jax

        self._jax = jax
        self._dir = stem
        jax.profiler.start_trace(str(stem))

    def step(self) -> None:
        pass

    def stop(self) -> None:
        self._jax.profiler.stop_trace()

    def export(self) -> Path:
        return self._dir
