"""Time to read a monitor run and detect anomalies (``stepscope monitor report``'s work, and what
the leader's live detector does each pass), on a synthetic run of R ranks x N steps.

    python benchmarks/bench_monitor_report.py [--ranks 64] [--steps 10000] [--sink sqlite|jsonl]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from stepscope.monitor.sinks import open_sink
from stepscope.monitor.store import load_run
from stepscope.monitor.summary import report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--sink", choices=("sqlite", "jsonl"), default="sqlite")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for r in range(a.ranks):  # 100 ms steps with a deterministic jitter under 1%
            rows = [
                (
                    r,
                    i,
                    i * 10**8,
                    10**8 + (i * 7919 + r * 31) % 10**6,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    0,
                    0,
                    None,
                    None,
                    "",
                )
                for i in range(a.steps)
            ]
            s = open_sink(a.sink, d, r)
            s.write(steps=rows, meta={"rank": r, "world_size": a.ranks, "level": 0})
            s.close()
        t0 = time.perf_counter()
        run = load_run(d)
        t1 = time.perf_counter()
        rep = report(d)
        t2 = time.perf_counter()
    print(
        f"{a.ranks} ranks x {a.steps:,} steps ({run.n_steps:,} records, {a.sink}): read {t1 - t0:.2f} s, "
        f"read + detect {t2 - t1:.2f} s, {len(rep.anomalies)} anomalies"
    )


if __name__ == "__main__":
    main()
