"""Cluster-view benchmark: 8, 64 and 256 synthetic ranks made from the real A100 trace, with an
injected straggler and a slow link known by construction.

    python benchmarks/bench_cluster.py [--ranks 8 64 256] [--workers 1 2] [--workdir bench-cluster]

Rank files are Parquet event tables (what ``stepscope convert`` writes) derived from
examples/traces/a100_nccl_rank0.json.gz with vectorized Arrow/numpy edits:
- every rank gets its own clock offset (13.777 us x rank);
- NCCL kernels alternate between the world group (``Process Group Name`` "0", size R) and pair
  groups ``pair<r//2>`` (size 2), so each rank has both kinds of collective;
- straggler (the last rank): before each world collective its last compute kernel runs ``--delay-us``
  longer and everything after moves later; every other rank waits that long in the collective
  (its NCCL kernel grows) and moves later by the same amount, so all stay consistent;
- slow link: the pair group of ranks 2 and 3 transfers 4x slower (its pair kernels last 4x longer).
Measured: ``analyze`` wall time per (ranks, workers), peak RSS of the parent and of the
worst worker process, and whether the faults were found (straggler with cause "compute" and its
excess per step; ranks 2 and 3 flagged "link"). One JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "examples" / "traces" / "a100_nccl_rank0.json.gz"


def build(workdir: Path, n_ranks: int, delay_us: float) -> tuple[list[str], int, float]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    import stepscope
    from stepscope.trace.columns import FileRead
    from stepscope.trace.parquet import write_parquet
    from stepscope.trace.schema import EVENT_SCHEMA

    base = stepscope.load(str(SRC)).events
    kind = base["kind"].cast(pa.string()).to_numpy(zero_copy_only=False)
    names = pc.fill_null(base["name"].cast(pa.string()), "").to_numpy(zero_copy_only=False)
    ts0, dur0 = base["ts_ns"].to_numpy(), base["dur_ns"].to_numpy()
    is_kernel = kind == "kernel"
    nccl = np.flatnonzero(is_kernel & np.char.startswith(names.astype(str), "nccl"))
    nccl = nccl[np.argsort(ts0[nccl], kind="stable")]
    world, pair = nccl[0::2], nccl[1::2]
    compute = np.flatnonzero(is_kernel & ~np.isin(np.arange(base.num_rows), nccl))
    c_end = ts0[compute] + dur0[compute]
    o = np.argsort(c_end, kind="stable")
    # the compute kernel that ends last before each world collective starts
    before = compute[o][np.clip(np.searchsorted(c_end[o], ts0[world], side="right") - 1, 0, None)]
    d = int(delay_us * 1000)
    straggler = n_ranks - 1
    workdir.mkdir(parents=True, exist_ok=True)
    paths = []
    pg = base["pg_name"].cast(pa.string()).to_pylist()
    gsize = base["group_size"].to_numpy().copy()
    for r in range(n_ranks):
        ts, dur = ts0.copy(), dur0.copy()
        if r == straggler:
            ts += d * np.searchsorted(np.sort(ts0[world]), ts0, side="right")
            dur[before] += d
        else:
            ends = np.sort(ts0[world] + dur0[world])
            ts += d * np.searchsorted(ends, ts0, side="right")
            dur[world] += d
        if r in (2, 3):
            dur[pair] *= 4
        ts += r * 13_777
        names_pg = list(pg)
        for i in world:
            names_pg[i] = "0"
        for i in pair:
            names_pg[i] = f"pair{r // 2}"
        gs = gsize.copy()
        gs[world], gs[pair] = n_ranks, 2
        t = base.set_column(base.schema.get_field_index("ts_ns"), "ts_ns", pa.array(ts))
        t = t.set_column(t.schema.get_field_index("dur_ns"), "dur_ns", pa.array(dur))
        t = t.set_column(
            t.schema.get_field_index("pg_name"), "pg_name", pa.array(names_pg, pa.string()).dictionary_encode()
        )
        t = t.set_column(t.schema.get_field_index("group_size"), "group_size", pa.array(gs.astype(np.int32)))
        t = t.set_column(0, "rank", pa.array(np.full(t.num_rows, r, dtype=np.int32))).cast(EVENT_SCHEMA)
        p = workdir / f"rank-{r}.parquet"
        write_parquet(FileRead(str(p), t, {}, False, "", 0, 0), p)
        paths.append(str(p))
    # injected excess per step: the world collectives inside each ProfilerStep window, x delay
    steps = np.flatnonzero(np.char.startswith(names.astype(str), "ProfilerStep#"))
    per_step = [int(((ts0[world] >= ts0[s]) & (ts0[world] < ts0[s] + dur0[s])).sum()) for s in steps]
    return paths, straggler, d * float(np.median(per_step))


def measure(paths: list[str], workers: int) -> None:
    """Runs in a fresh process: analyze, then print timing, memory and what was found."""
    from stepscope.analysis.api import analyze

    t = time.perf_counter()
    a = analyze(paths, workers=workers)
    wall = time.perf_counter() - t
    c = a.cluster
    found = [
        dict(rank=s.rank, cause=s.cause, score=round(s.score, 1), excess_ms=round(s.excess_ns / 1e6, 3))
        for s in c.stragglers
        if s.is_straggler or s.cause == "link"
    ]  # type: ignore[union-attr]
    print(
        json.dumps(
            {
                "wall_s": round(wall, 2),
                "parent_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                "worker_rss_mb_max": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024,
                "matched_collectives": len(c.collectives),
                "found": found[:8],
            }
        )
    )  # type: ignore[union-attr]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 64, 256])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--workdir", default="bench-cluster")
    ap.add_argument("--delay-us", type=float, default=2000.0)
    ap.add_argument("--measure", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.measure:
        measure(a.measure, a.workers[0])
        return
    for n in a.ranks:
        t = time.perf_counter()
        paths, straggler, inj = build(Path(a.workdir) / f"r{n}", n, a.delay_us)
        built = time.perf_counter() - t
        for w in a.workers:
            out = subprocess.run(
                [sys.executable, __file__, "--workers", str(w), "--measure", *paths],
                capture_output=True,
                text=True,
                check=True,
            )
            res = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                json.dumps(
                    {
                        "ranks": n,
                        "workers": w,
                        "build_s": round(built, 1),
                        "injected_straggler": straggler,
                        "injected_excess_ms_per_step": inj / 1e6,
                        "injected_slow_link_ranks": [2, 3],
                        **res,
                    }
                )
            )


if __name__ == "__main__":
    main()
