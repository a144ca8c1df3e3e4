"""False positives of the monitor's detectors on clean runs: a real CPU DDP job over gloo
(scripts/gen_monitor_run.py, no injected slowdown) under the monitor at level 2, then
``stepscope monitor report``; every anomaly found is a false positive.

    python benchmarks/bench_monitor_false_positives.py [--ranks 4] [--steps 1000] [--runs 1] [--step-ms 20]

Prints anomalies per 1,000 rank-steps by kind, and each anomaly's rank, steps and excess.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--step-ms", type=float, default=20.0, help="the sleep in each forward (the rest is compute)")
    a = ap.parse_args()
    from stepscope.monitor.summary import report

    kinds: Counter[str] = Counter()
    rank_steps = 0
    for _ in range(a.runs):
        with tempfile.TemporaryDirectory() as d:
            cmd = [sys.executable, str(ROOT / "scripts" / "gen_monitor_run.py"), d, "--ranks", str(a.ranks)]
            cmd += ["--steps", str(a.steps), "--step-ms", str(a.step_ms), "--no-capture", "--port", str(_port())]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            rep = report(d)
            rank_steps += rep.steps_recorded
            for an in rep.anomalies:
                kinds[an.kind] += 1
                print(
                    f"  {an.kind} rank {an.rank} steps {an.first_step}-{an.last_step} {an.excess_ratio:+.0%} ({an.cause})"
                )
    print(f"{a.runs} run(s) x {a.ranks} ranks x {a.steps} steps of {a.step_ms:g} ms sleep = {rank_steps:,} rank-steps")
    for k in ("fluctuation", "regression", "straggler"):
        print(f"{k:12s} {kinds[k]:4d}  {kinds[k] * 1000 / max(1, rank_steps):.2f} per 1,000 rank-steps")


if __name__ == "__main__":
    main()
