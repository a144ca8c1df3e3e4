"""The in-job detector: a thread on the leader rank that, every ``detect_interval_s``, reads the
recent records of every rank from the run directory (out of band: no collective), runs the
detectors, reports each new anomaly once, plans a fine capture of the implicated ranks plus one
healthy peer for an anomaly still going on (stragglers first, then regressions, then fluctuations), and analyzes finished captures with ``stepscope analyze`` in a background process.

It never touches the training thread; a failure is logged once and stops only this thread.
"""

from __future__ import annotations

import logging
import math
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .capture import write_json_atomic
from .config import MonitorConfig

log = logging.getLogger("stepscope.monitor")
#: which anomaly gets a capture first when several are new at once
_PRIORITY = {"straggler": 0, "regression": 1, "fluctuation": 2}


class LiveDetector(threading.Thread):
    def __init__(self, run_dir: Path, cfg: MonitorConfig, *, on_anomaly: Callable[[dict[str, Any]], None]) -> None:
        super().__init__(name="stepscope-monitor-detector", daemon=True)
        self.run_dir = run_dir
        self.cfg = cfg
        self.on_anomaly = on_anomaly
        self._stop_event = threading.Event()
        self._reported: dict[tuple[str, int], tuple[int, int]] = {}  # (kind, rank) -> last episode
        self._warned: set[str] = set()
        self._captures = 0
        self._last_capture_s = -math.inf
        self._pending: dict[Path, float] = {}  # capture dir -> planned at (monotonic s)
        self._running: list[tuple[Path, subprocess.Popen[bytes]]] = []
        self._last: int | None = None

    def run(self) -> None:
        """Every ``detect_interval_s``, or 10x the last pass's time if longer: the detector takes at
        most about a tenth of the leader's CPU (and GIL), however many ranks it reads."""
        wait_s = self.cfg.detect_interval_s
        while not self._stop_event.wait(wait_s):
            t0 = time.monotonic()
            try:
                self.tick()
            except Exception as exc:
                log.warning("stepscope monitor: the live detector stopped (%s: %s)", type(exc).__name__, exc)
                return
            wait_s = max(self.cfg.detect_interval_s, 10.0 * (time.monotonic() - t0))

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout_s)

    def tick(self, *, plan: bool = True) -> None:
        """One pass. A rank file that cannot be read now (being created, torn on a network file
        system) is skipped with a warning, not the end of detection."""
        from .detect import detect
        from .store import load_run, rank_files

        if not rank_files(self.run_dir):
            return
        since = None if self._last is None else max(0, self._last - self.cfg.history_steps)
        run = load_run(self.run_dir, since_step=since, skip_unreadable=True)
        for w in run.warnings:
            if w not in self._warned and len(self._warned) < 100:
                self._warned.add(w)
                log.warning("stepscope monitor: %s", w)
        if run.n_steps == 0:
            return
        self._last = int(run.steps["step"].max())
        det = detect(run, self.cfg.thresholds)
        active_from = self._last - self.cfg.thresholds.persist_m
        for a in sorted(det.anomalies, key=lambda a: _PRIORITY[a.kind]):
            if not self._is_new(a.kind, a.rank, a.first_step, a.last_step):
                continue
            self.on_anomaly(a.as_dict())
            if plan and a.last_step >= active_from:  # a capture sees the steps ahead: only for what goes on
                self._plan_capture(a.as_dict(), det, self._last, run.meta)
        self._analyze_finished()

    def _is_new(self, kind: str, rank: int, first: int, last: int) -> bool:
        """Whether an episode is not one already reported: the same (kind, rank) continuing or
        overlapping the last one reported (windows slide, so its first step moves) is not new."""
        key = (kind, rank)
        seen = self._reported.get(key)
        self._reported[key] = (
            (first, last)
            if seen is None or first > seen[1] + self.cfg.thresholds.persist_m
            else (
                seen[0],
                max(last, seen[1]),
            )
        )
        return seen is None or first > seen[1] + self.cfg.thresholds.persist_m

    def _plan_capture(self, a: dict[str, Any], det: Any, last: int, meta: dict[int, Any]) -> None:
        """The anomaly's rank and one healthy peer, from the first multiple of ``round_to`` far
        enough ahead for every rank to read the plan first: ``lead_steps``, or as many steps as
        two flush and detector intervals take at the median step time, if more."""
        c = self.cfg.capture
        now = time.monotonic()
        if not c.enabled or self._captures >= c.max_captures or now - self._last_capture_s < c.cooldown_s:
            return
        ranks = {int(a["rank"])}  # of a job-wide event, the rank whose own time rose: the others waited
        worst = {int(str(w["rank"])) for w in det.worst_ranks}
        others = sorted(set(meta) - ranks)
        healthy = [r for r in others if r not in worst]
        peer = healthy[0] if healthy else (others[-1] if others else None)
        if peer is not None:
            ranks.add(peer)
        step_s = max((float(s.dur_ns[-20:].mean()) / 1e9 for s in det.series if s.dur_ns.size), default=0.0)
        latency_s = 2 * (self.cfg.flush_interval_s + self.cfg.detect_interval_s)
        lead = max(c.lead_steps, math.ceil(latency_s / step_s) if step_s > 0 else 0)
        start = int(math.ceil((last + lead) / c.round_to) * c.round_to)
        self._captures += 1
        self._last_capture_s = now
        cid = f"capture-{self._captures:03d}-step{start}"
        d = self.run_dir / "captures" / cid
        d.mkdir(parents=True, exist_ok=True)
        plan = {
            "id": cid,
            "start_step": start,
            "steps": c.steps,
            "ranks": sorted(ranks),
            "reason": a["message"],
            "anomaly": a,
            "planned_unix_ns": time.time_ns(),
        }
        write_json_atomic(d / "plan.json", plan)
        self._pending[d] = now

    def _analyze_finished(self, *, wait: bool = False) -> None:
        """Start ``stepscope analyze`` on each capture whose ranks are all done (or failed), in a
        background process writing ``analysis.json`` and ``findings.txt`` next to the traces."""
        if not self.cfg.capture.analyze:
            return
        for d, planned in list(self._pending.items()):
            plan = _read_plan(d)
            ranks = plan.get("ranks", [])
            ended = [r for r in ranks if (d / f"rank-{r}.done").exists() or (d / f"rank-{r}.failed").exists()]
            if len(ended) < len(ranks) and time.monotonic() - planned < 600:
                continue
            del self._pending[d]
            traces = [str(d / _trace_name(d, r)) for r in ranks if (d / f"rank-{r}.done").exists()]
            if not traces:
                continue
            cmd = [sys.executable, "-m", "stepscope", "analyze", *traces, "--json", str(d / "analysis.json")]
            if shutil.which("nice"):  # lowest CPU priority: the training processes on this node come first
                cmd = ["nice", "-n", "19", *cmd]
            with open(d / "findings.txt", "wb") as out:
                proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            self._running.append((d, proc))
        if wait:
            for _, proc in self._running:
                proc.wait(timeout=600)

    def finish(self, timeout_s: float = 60.0) -> None:
        """At the monitor's end: wait (at most ``timeout_s``) for the other ranks' captures to end,
        analyze them, and wait for the analyses."""
        deadline = time.monotonic() + timeout_s
        for d in list(self._pending):  # no rank took it up (they ended first): nothing to wait for
            if not any(d.glob("rank-*.done")) and not any(d.glob("rank-*.failed")):
                del self._pending[d]
        while self._pending and time.monotonic() < deadline:
            self._analyze_finished()
            if self._pending:
                time.sleep(0.2)
        self._analyze_finished(wait=True)


def _read_plan(d: Path) -> dict[str, Any]:
    import json

    try:
        return dict(json.loads((d / "plan.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def _trace_name(d: Path, rank: int) -> str:
    import json

    try:
        return str(json.loads((d / f"rank-{rank}.done").read_text(encoding="utf-8"))["trace"])
    except (OSError, ValueError, KeyError):
        return f"rank-{rank}.json"
