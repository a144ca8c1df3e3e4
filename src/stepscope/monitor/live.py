"""The live detector: in its own process beside the leader rank (``Monitor`` starts it; see
``__main__`` below), every ``detect_interval_s`` it reads the recent records of every rank from the
run directory (out of band: no collective, and no share of the training process's GIL), runs the
detectors, reports each new anomaly once (``detector.jsonl``), plans a fine capture of the
implicated rank plus one healthy peer for an anomaly still going on (stragglers first, then
regressions, then fluctuations), and analyzes finished captures with ``stepscope analyze`` in a
background process. It ends when the job's process does (or ``detector.stop`` appears): a last
pass, the analyses of finished captures, then ``detector.done``.
"""

from __future__ import annotations

import logging
import math
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .capture import read_json, trace_name, write_json_atomic
from .config import MonitorConfig

log = logging.getLogger("stepscope.monitor")
#: which anomaly gets a capture first when several are new at once
_PRIORITY = {"straggler": 0, "regression": 1, "fluctuation": 2}


class LiveDetector:
    def __init__(self, run_dir: Path, cfg: MonitorConfig, *, on_anomaly: Callable[[dict[str, Any]], None]) -> None:
        self.run_dir = run_dir
        self.cfg = cfg
        self.on_anomaly = on_anomaly
        self._reported: dict[tuple[str, int], tuple[int, int]] = {}  # (kind, rank) -> last episode
        self._warned: set[str] = set()
        self._captures = 0
        self._last_capture_s = -math.inf
        self._pending: dict[Path, float] = {}  # capture dir -> planned at (monotonic s)
        self._running: list[tuple[Path, subprocess.Popen[bytes]]] = []
        self._last: int | None = None

    def run(self, alive: Callable[[], bool]) -> None:
        """Every ``detect_interval_s``, or 10x the last pass's time if longer, while ``alive()``."""
        wait_s = self.cfg.detect_interval_s
        while _sleep_while(alive, wait_s):
            t0 = time.monotonic()
            self.tick()
            wait_s = max(self.cfg.detect_interval_s, 10.0 * (time.monotonic() - t0))

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
            plan = read_json(d / "plan.json")
            ranks = plan.get("ranks", [])
            ended = [r for r in ranks if (d / f"rank-{r}.done").exists() or (d / f"rank-{r}.failed").exists()]
            if len(ended) < len(ranks) and time.monotonic() - planned < 600:
                continue
            del self._pending[d]
            traces = [str(d / trace_name(d / f"rank-{r}.done")) for r in ranks if (d / f"rank-{r}.done").exists()]
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


def _sleep_while(alive: Callable[[], bool], seconds: float) -> bool:
    """Sleep ``seconds`` in short naps; False as soon as ``alive()`` is."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not alive():
            return False
        time.sleep(min(0.05, max(0.0, end - time.monotonic())))
    return alive()


#: files of the detector process in the run directory
EVENTS_FILE = "detector.jsonl"
CONFIG_FILE = "detector-config.json"
STOP_FILE = "detector.stop"
DONE_FILE = "detector.done"
LOG_FILE = "detector.log"


def config_to_json(cfg: MonitorConfig) -> str:
    import dataclasses
    import json

    return json.dumps(dataclasses.asdict(cfg))


def config_from_json(text: str) -> MonitorConfig:
    import json

    from .config import CaptureConfig, DetectConfig

    d = json.loads(text)
    d["thresholds"] = DetectConfig(**d["thresholds"])
    d["capture"] = CaptureConfig(**d["capture"])
    return MonitorConfig(**d)


def start_process(run_dir: Path, cfg: MonitorConfig) -> subprocess.Popen[bytes]:
    """The detector process for ``run_dir``, at the lowest CPU priority, one numpy thread."""
    import os

    (run_dir / CONFIG_FILE).write_text(config_to_json(cfg), encoding="utf-8")
    (run_dir / STOP_FILE).unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "stepscope.monitor.live", str(run_dir), str(os.getpid())]
    if shutil.which("nice"):
        cmd = ["nice", "-n", "19", *cmd]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with open(run_dir / LOG_FILE, "ab") as out:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)


def main(argv: list[str]) -> int:
    """``python -m stepscope.monitor.live RUN_DIR PARENT_PID``: detect until the parent ends."""
    import json
    import os

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    run_dir, parent = Path(argv[0]), int(argv[1])
    cfg = config_from_json((run_dir / CONFIG_FILE).read_text(encoding="utf-8"))
    events = open(run_dir / EVENTS_FILE, "a", encoding="utf-8")  # noqa: SIM115 - closed below

    def on_anomaly(a: dict[str, Any]) -> None:
        events.write(json.dumps({"type": "anomaly", "time_unix_ns": time.time_ns(), **a}) + "\n")
        events.flush()

    det = LiveDetector(run_dir, cfg, on_anomaly=on_anomaly)
    alive = lambda: os.getppid() == parent and not (run_dir / STOP_FILE).exists()  # noqa: E731
    try:
        det.run(alive)
        det.tick(plan=False)
        det.finish()
    except Exception as exc:
        log.warning("stepscope monitor: the live detector stopped (%s: %s)", type(exc).__name__, exc)
        return 1
    finally:
        events.close()
        (run_dir / DONE_FILE).write_text(str(time.time_ns()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
