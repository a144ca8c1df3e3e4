"""Nsight Systems SQLite export benchmark: how fast an export reads into the event table.

    python benchmarks/bench_nsys_sqlite.py [--kernels 1000000] [--workdir bench-data]

Builds an export in nsys's table layout (the columns trace/nsys_sqlite.py reads) by repeating the
launch pattern of the real export in tests/fixtures (nsys_concurrent_profile4.sqlite: its kernels
spread over its streams, one runtime call per kernel): ``--kernels`` kernels over 8 streams in
steps of 1,000, one ``cudaLaunchKernel`` per kernel inside its own ``emit_nvtx`` op range (a
distinct text each: seq, op_id, sizes), a memcpy per 10 kernels, an NVTX range per 20 (300
distinct texts) and one per step, 2,000 distinct kernel names. Then, in fresh
subprocesses: (1) ``read_nsys_sqlite`` alone: wall time, rows/s, MB/s, peak RSS; (2) ``stepscope
analyze --json --step-marker step`` end to end: wall time, peak RSS. One JSON line per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from stepscope.trace.nsys_sqlite import READ_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
PID, TID = 4242, 4243
G, T = (1 << 56) | (PID << 24), (1 << 56) | (PID << 24) | TID


def build(out: Path, kernels: int) -> int:
    if out.exists():
        out.unlink()
    rng = np.random.default_rng(0)
    con = sqlite3.connect(out)
    con.executescript("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;" + READ_COLUMNS)
    names = [f"void kernel_{i}<float, {i % 7}>(Params)" for i in range(2000)]
    con.executemany(
        "INSERT INTO StringIds VALUES (?, ?)",
        [(i + 10, n) for i, n in enumerate(names)] + [(1, "cudaLaunchKernel_v7000")],
    )
    launch = 1_000 + np.arange(kernels, dtype=np.int64) * 3_000  # a launch every 3 us on the host
    start = launch + 5_000
    dur = rng.integers(1_000, 20_000, kernels)
    corr = np.arange(kernels, dtype=np.int64) + 1
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, ?, ?, ?, ?, ?)",
        zip(
            start.tolist(),
            (start + dur).tolist(),
            (7 + corr % 8).tolist(),
            corr.tolist(),
            [G] * kernels,
            (10 + rng.integers(0, 2000, kernels)).tolist(),
            [0] * kernels,
        ),
    )
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, 1, 0)",
        zip(launch.tolist(), (launch + 2_000).tolist(), [T] * kernels, corr.tolist()),
    )
    m = np.arange(0, kernels, 10)
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 1, 7, -1, ?, 1048576, 1, 1, 3)",
        zip((start[m] + 100).tolist(), (start[m] + 600).tolist(), [G] * m.size),
    )
    r = np.arange(0, kernels, 20)
    texts = [f"layer_{i % 300}.forward" for i in range(300)]
    con.executemany(
        "INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, NULL, NULL, NULL, ?, ?, NULL, NULL, 0)",
        zip(launch[r].tolist(), (launch[r] + 50_000).tolist(), [texts[i % 300] for i in range(r.size)], [T] * r.size),
    )
    # PyTorch emit_nvtx(record_shapes=True) op ranges around every launch, each text distinct (seq, op_id)
    con.executemany(
        "INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, NULL, NULL, NULL, ?, ?, NULL, NULL, 0)",
        (
            (int(a) - 200, int(a) + 2_500, f"aten::mm, seq = {i}, op_id = {i}, sizes = [[64, 128], [128, 256]]", T)
            for i, a in enumerate(launch)
        ),
    )
    steps = np.arange(0, kernels, 1_000)
    con.executemany(
        "INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, NULL, NULL, NULL, 'step', ?, NULL, NULL, 0)",
        zip(launch[steps].tolist(), (launch[steps] + 3_000 * 1_000).tolist(), [T] * steps.size),
    )
    con.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H100 80GB HBM3', 85899345920, 132, 9, 0)")
    con.commit()
    con.close()
    return kernels * 3 + m.size + r.size + steps.size


READ = """
import sys, time, resource, json
from stepscope.trace.nsys_sqlite import read_nsys_sqlite
t0 = time.perf_counter()
fr = read_nsys_sqlite(sys.argv[1])
dt = time.perf_counter() - t0
print(json.dumps({"rows": fr.table.num_rows, "s": dt, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--workdir", type=Path, default=ROOT / "bench-data")
    ns = ap.parse_args()
    ns.workdir.mkdir(parents=True, exist_ok=True)
    db = ns.workdir / f"nsys_{ns.kernels}.sqlite"
    t0 = time.perf_counter()
    rows = build(db, ns.kernels)
    mb = db.stat().st_size / 1e6
    print(
        json.dumps({"built": str(db), "rows": rows, "mb": round(mb, 1), "build_s": round(time.perf_counter() - t0, 1)})
    )
    out = json.loads(
        subprocess.run([sys.executable, "-c", READ, str(db)], capture_output=True, text=True, check=True).stdout
    )
    print(
        json.dumps(
            {
                "measure": "read_nsys_sqlite",
                "rows": out["rows"],
                "wall_s": round(out["s"], 2),
                "rows_per_s": round(out["rows"] / out["s"]),
                "mb_per_s": round(mb / out["s"], 1),
                "peak_rss_mb": round(out["rss_mb"]),
            }
        )
    )
    report = ns.workdir / "nsys_report.json"
    t0 = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from stepscope.cli import main; sys.exit(main())",
            "analyze",
            str(db),
            "--json",
            str(report),
            "-q",
            "--step-marker",
            "step",
        ],
        check=True,
    )
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    steps = len(json.loads(report.read_text())["ranks"][0]["steps"])
    print(
        json.dumps(
            {
                "measure": "analyze",
                "wall_s": round(dt, 2),
                "steps": steps,
                "peak_rss_mb": round(rss),
                "cpus": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
