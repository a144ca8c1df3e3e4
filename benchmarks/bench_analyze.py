"""Large-trace benchmark: stepscope analyze vs HolisticTraceAnalysis on the same input.

    python benchmarks/bench_analyze.py --size-mb 1024 [--workdir bench-data] [--skip-hta]

Builds a trace of at least ``--size-mb`` MB by repeating the real A100 trace in examples/ with
shifted timestamps and ids (the steps stay distinct), then measures in fresh subprocesses:
  1. ingest only (read_kineto, one core): wall time, MB/s, peak RSS;
  2. ``stepscope analyze --json`` end to end: wall time, peak RSS;
  3. HTA (``pip install HolisticTraceAnalysis``): TraceAnalysis + get_temporal_breakdown +
     get_comm_comp_overlap: wall time, peak RSS.
Peak RSS is the child's ru_maxrss. Prints one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
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
    t = time.perf_counter()
    p = subprocess.run([python, "-c", code], capture_output=True, text=True)
    wall = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if p.returncode != 0:
        return {"error": p.stderr[-2000:], "wall_s": wall}
    return {"wall_s": round(wall, 2), "peak_rss_mib_max_so_far": round(rss), "out": p.stdout.strip()[-300:]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--source", default=str(SRC), help="a real Kineto .json.gz to repeat")
    ap.add_argument("--copies", type=int, default=0, help="repeat the source exactly this many times")
    ap.add_argument("--workdir", default=str(ROOT / "bench-data"))
    ap.add_argument("--skip-hta", action="store_true")
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
        print(json.dumps({"built": str(path), "bytes": size, "events": count, "s": round(time.perf_counter() - t, 1)}))
    size = path.stat().st_size
    ingest = run(
        "import time,resource;from stepscope.trace.kineto import read_kineto;t=time.perf_counter();"
        f"fr=read_kineto({str(path)!r});dt=time.perf_counter()-t;"
        "print(fr.table.num_rows, round(dt,2), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss//1024)"
    )
    rows, secs, rss = ingest["out"].split()
    print(
        json.dumps(
            {
                "measure": "ingest (read_kineto, 1 core)",
                "events": int(rows),
                "s": float(secs),
                "MB_per_s": round(size / 1e6 / float(secs), 1),
                "peak_rss_mib": int(rss),
            }
        )
    )
    e2e = run(
        "import time,resource,sys;from stepscope.cli import main;t=time.perf_counter();"
        f"rc=main(['analyze',{str(path)!r},'--json',{str(wd / 'out.json')!r},'-q']);"
        "print(rc, round(time.perf_counter()-t,2), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss//1024)"
    )
    rc, secs_e2e, rss_e2e = e2e["out"].split()[-3:]
    print(
        json.dumps(
            {
                "measure": "stepscope analyze end to end",
                "rc": int(rc),
                "s": float(secs_e2e),
                "peak_rss_mib": int(rss_e2e),
            }
        )
    )
    if not a.skip_hta:
        hta = run(
            "import time,resource,logging;logging.disable(logging.WARNING);t=time.perf_counter();"
            "from hta.trace_analysis import TraceAnalysis;"
            f"ta=TraceAnalysis(trace_dir={str(wd / 'trace')!r});"
            "tb=ta.get_temporal_breakdown(visualize=False);ov=ta.get_comm_comp_overlap(visualize=False);"
            "print(round(time.perf_counter()-t,2), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss//1024)",
            a.hta_python,
        )
        if "error" in hta:
            print(json.dumps({"measure": "HTA", "error": hta["error"][-500:]}))
        else:
            s_hta, rss_hta = hta["out"].split()[-2:]
            print(
                json.dumps(
                    {
                        "measure": "HTA temporal breakdown + comm/comp overlap",
                        "s": float(s_hta),
                        "peak_rss_mib": int(rss_hta),
                        "speedup_vs_hta": round(float(s_hta) / float(secs_e2e), 1),
                    }
                )
            )
    print(json.dumps({"input_mb": round(size / 1e6), "input_mib": round(size / 2**20), "cpus": os.cpu_count()}))
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
        res = run(
            "import time,resource;from stepscope.cli import main;t=time.perf_counter();"
            f"rc=main(['analyze',{str(d)!r},'--workers','{workers}','--json',{str(wd / 'ranks.json')!r},'-q']);"
            "print(rc, round(time.perf_counter()-t,2), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss//1024)"
        )
        rc, secs, rss = res["out"].split()[-3:]
        print(
            json.dumps(
                {
                    "measure": f"{ranks} ranks x {rank_mb} MB, --workers {workers}",
                    "rc": int(rc),
                    "s": float(secs),
                    "MB_per_s": round(ranks * one.stat().st_size / 1e6 / float(secs), 1),
                    "parent_peak_rss_mib": int(rss),
                }
            )
        )


if __name__ == "__main__":
    main()
