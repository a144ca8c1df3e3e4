"""Large-trace benchmark: stepscope analyze vs HolisticTraceAnalysis on the same input.

    python benchmarks/bench_analyze.py --size-mb 1024 [--workdir bench-data] [--skip-hta]

Builds a trace of at least ``--size-mb`` MB (or ``--copies`` N copies) by repeating a real trace
(default: the A100 trace in examples/) with shifted timestamps and ids (the steps stay distinct),
compiles the package's bytecode, then measures in fresh subprocesses:
  1. that the threaded read gives the one-thread table;
  2. ingest only (read_kineto) with one thread and with one per CPU: time, MB/s, peak RSS;
  3. ``stepscope analyze --json`` end to end, ``--repeat`` times before and after HTA;
  4. HTA (``pip install HolisticTraceAnalysis``, ``--hta-python``): TraceAnalysis +
     get_temporal_breakdown + get_comm_comp_overlap;
  5. the speed-up, median over median.
Times are the child process's wall time (interpreter start-up and imports included).
Peak RSS is the child's ru_maxrss. The load average is printed at the start and the end. One JSON
line per measurement.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "examples" / "traces" / "a100_nccl_rank0.json.gz"


def build(out: Path, size_mb: int, src: Path = SRC, copies: int = 0) -> tuple[int, int]:
    """Write ``src`` repeated until the file reaches ``size_mb`` MB, or exactly ``copies`` times."""
    doc = json.load(gzip.open(src))
    events = doc.pop("traceEvents")
    ts = [e["ts"] for e in events if "ts" in e]
    span = max(ts) - min(ts) + 1000.0
    lines = []
    for e in events:
        lines.append(e)
    total_bytes = 0
    count = 0
    header = {k: v for k, v in doc.items() if k in ("schemaVersion", "deviceProperties", "distributedInfo")}
    with open(out, "w") as fh:
        fh.write(json.dumps(header)[:-1] + ', "traceEvents": [\n')
        k = 0
        first = True
        while (k < copies) if copies else (total_bytes < size_mb * 1_000_000):
            for e in events:
                if e.get("ph") == "M" and k > 0:
                    continue
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = round(e["ts"] + k * span, 3)
                a = e.get("args")
                if isinstance(a, dict):
                    a2 = dict(a)
                    for key in ("correlation", "External id"):
                        if isinstance(a2.get(key), int):
                            a2[key] += k * 10_000_000
                    e2["args"] = a2
                if isinstance(e2.get("id"), int):
                    e2["id"] += k * 10_000_000
                name = e2.get("name", "")
                if isinstance(name, str) and name.startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{int(name.split('#')[1]) + 100 * k}"
                s = ("" if first else ",\n") + json.dumps(e2)
                first = False
                fh.write(s)
                total_bytes += len(s)
                count += 1
            k += 1
        fh.write('\n], "traceName": "bench"}\n')
    return out.stat().st_size, count


def run(code: str, python: str = sys.executable) -> dict:
    """Run ``code`` in a fresh interpreter; its last output line is returned as ``out``."""
    t = time.perf_counter()
    p = subprocess.run([python, "-c", code], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"child failed: {p.stderr[-2000:]}")
    return {"wall_s": round(wall, 3), "out": p.stdout.strip().splitlines()[-1]}


_TIMED = (
    "import time,resource;t=time.perf_counter();{body};"
    "print(round(time.perf_counter()-t,3), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss//1024)"
)


def timed(body: str, python: str = sys.executable) -> tuple[float, int]:
    """(wall seconds of the child process, interpreter start-up included; its peak RSS in MiB)."""
    r = run(_TIMED.format(body=body), python)
    return float(r["wall_s"]), int(r["out"].split()[-1])


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--source", default=str(SRC), help="a real Kineto .json.gz to repeat")
    ap.add_argument("--copies", type=int, default=0, help="repeat the source exactly this many times")
    ap.add_argument("--workdir", default=str(ROOT / "bench-data"))
    ap.add_argument("--repeat", type=int, default=3, help="stepscope end-to-end runs before and after HTA")
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--hta-repeat", type=int, default=1)
    ap.add_argument("--ranks", type=int, default=0, help="also time a multi-rank set of this many files")
    ap.add_argument("--rank-mb", type=int, default=256)
    ap.add_argument("--hta-python", default=sys.executable, help="a Python with HolisticTraceAnalysis installed")
    a = ap.parse_args()
    wd = Path(a.workdir)
    (wd / "trace").mkdir(parents=True, exist_ok=True)
    path = wd / "trace" / "rank-0.json"
    if not path.exists() or (not a.copies and path.stat().st_size < a.size_mb * 1_000_000):
        t = time.perf_counter()
        size, count = build(path, a.size_mb, Path(a.source), a.copies)
        emit(built=str(path), bytes=size, events=count, s=round(time.perf_counter() - t, 1))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src" / "stepscope")], check=False)
    size = path.stat().st_size
    emit(
        input=str(path),
        input_mb=round(size / 1e6),
        input_mib=round(size / 2**20),
        cpus=os.cpu_count(),
        loadavg_start=os.getloadavg()[0],
    )
    same = run(
        "from stepscope.trace.kineto import read_kineto;"
        f"a=read_kineto({str(path)!r},workers=1);b=read_kineto({str(path)!r});"
        "print(a.table.num_rows, a.table.equals(b.table) and a.header==b.header)"
    )["out"].split()
    emit(measure="threaded read gives the one-thread table", rows=int(same[0]), identical=same[1] == "True")
    for workers in (1, None):
        secs, rss = timed(
            f"from stepscope.trace.kineto import read_kineto;read_kineto({str(path)!r},workers={workers})"
        )
        emit(
            measure=f"ingest, {'1 thread' if workers else 'one thread per CPU'}",
            s=secs,
            MB_per_s=round(size / 1e6 / secs, 1),
            peak_rss_mib=rss,
        )
    # the ``stepscope`` command's own entry point, as a user runs it
    argv = ["stepscope", "analyze", str(path), "--json", str(wd / "out.json"), "-q"]
    body = f"import sys;sys.argv={argv!r};from stepscope.console import main;main()"
    e2e: list[float] = []
    hta: list[float] = []

    def stepscope_runs() -> None:
        for _ in range(a.repeat):
            secs, rss = timed(body)
            e2e.append(secs)
            emit(measure="stepscope analyze end to end", s=secs, peak_rss_mib=rss)

    stepscope_runs()
    for _ in range(0 if a.skip_hta else a.hta_repeat):
        secs, rss = timed(
            "import logging;logging.disable(logging.WARNING);from hta.trace_analysis import TraceAnalysis;"
            f"ta=TraceAnalysis(trace_dir={str(wd / 'trace')!r});"
            "ta.get_temporal_breakdown(visualize=False);ta.get_comm_comp_overlap(visualize=False)",
            a.hta_python,
        )
        hta.append(secs)
        emit(measure="HTA temporal breakdown + comm/comp overlap", s=secs, peak_rss_mib=rss)
    if hta:
        stepscope_runs()
        emit(
            measure="speed-up over HTA (median / median)",
            stepscope_s=median(e2e),
            hta_s=median(hta),
            speedup=round(median(hta) / median(e2e), 1),
            range=[round(min(hta) / max(e2e), 1), round(max(hta) / min(e2e), 1)],
        )
    emit(loadavg_end=os.getloadavg()[0])
    if a.ranks:
        scaling(wd, a.ranks, a.rank_mb)


def scaling(wd: Path, ranks: int, rank_mb: int) -> None:
    """Multi-rank set: ``ranks`` files of ``rank_mb`` MB (hard links of one built file, so
    each is read in full), analyzed with 1 worker process and with one per CPU."""
    one = wd / f"rank_src_{rank_mb}mb.json"
    if not one.exists():
        build(one, rank_mb)
    d = wd / f"ranks{ranks}"
    d.mkdir(exist_ok=True)
    for r in range(ranks):
        q = d / f"trace_rank-{r}.json"
        if not q.exists():
            os.link(one, q)
    for workers in sorted({1, os.cpu_count() or 1}):
        argv = ["stepscope", "analyze", str(d), "--workers", str(workers), "--json", str(wd / "ranks.json"), "-q"]
        secs, rss = timed(f"import sys;sys.argv={argv!r};from stepscope.console import main;main()")
        emit(
            measure=f"{ranks} ranks x {rank_mb} MB, --workers {workers}",
            s=secs,
            MB_per_s=round(ranks * one.stat().st_size / 1e6 / secs, 1),
            parent_peak_rss_mib=rss,
        )


if __name__ == "__main__":
    main()
