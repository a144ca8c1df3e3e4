"""Ascend timeline and rocprofv3 JSON readers: how fast large files read into the event table.

    python benchmarks/bench_npu_rocm_readers.py [--ascend-copies 200] [--rocprof-copies 5] [--workdir bench-data]

Builds, from the real files in tests/fixtures:
- an Ascend ``trace_view.json``: the msprof-analyze sample (3,670 events, one step) repeated
  ``--ascend-copies`` times back to back, each copy shifted past the previous one's end, with its
  flow ids and step number renumbered, in an ``*_ascend_pt`` directory, with a ``kernel_details.csv``
  of one row per NPU task (the reader joins it to the tasks);
- a rocprofv3 ``results.json``: TraceLens's MI350X file (43,915 dispatches) with its dispatch
  records repeated ``--rocprof-copies`` times, each copy shifted past the previous one's end and
  given fresh correlation ids.
Then, in fresh subprocesses, for each: the reader alone (``read_one``: wall time, rows, peak RSS)
and ``stepscope analyze --json`` end to end (wall time, peak RSS). One JSON line per measurement.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASCEND = ROOT / "tests/fixtures/traces/msprof-analyze/test/ut/advisor/timeline_advice/trace_view.json"
ROCPROF = ROOT / "tests/fixtures/traces/TraceLens/tests/rocprof/908_results.json.gz"
DETAILS_HEADER = "Name,Type,Accelerator Core,Stream ID,Start Time(us),Duration(us),Input Shapes,Input Data Types\n"
SHAPES = '"1024,1024;1024,1024",FLOAT16;FLOAT16'


def build_ascend(out_dir: Path, copies: int) -> Path:
    events = json.loads(ASCEND.read_text())
    timed = [e for e in events if e.get("ts") is not None]
    t0 = min(Decimal(str(e["ts"])) for e in timed)
    span = max(Decimal(str(e["ts"])) + Decimal(str(e.get("dur", 0))) for e in timed) - t0 + 100
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    d = out_dir / "bench_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True, exist_ok=True)
    (d.parent / "profiler_info_0.json").write_text("{}")
    hw = {e["pid"] for e in meta if e.get("name") == "process_name" and e["args"].get("name") == "Ascend Hardware"}
    p = d / "trace_view.json"
    details = open(d / "kernel_details.csv", "w")  # noqa: SIM115 - written alongside the timeline
    details.write(DETAILS_HEADER)
    with open(p, "w") as fh, details:
        fh.write("[" + ",".join(json.dumps(e) for e in meta))
        for k in range(copies):
            shift = span * k
            for e in body:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = str(Decimal(str(e["ts"])) + shift)
                if e.get("ph") == "X" and e.get("pid") in hw:
                    details.write(f"{e2['name']},MatMul,AI_CORE,{e2['tid']},{e2['ts']},{e2['dur']},{SHAPES}\n")
                if "id" in e2:
                    e2["id"] = f"{e['id']}{k:05d}" if isinstance(e["id"], str) else int(e["id"]) * 100_000 + k
                if e2.get("name") == "ProfilerStep#1":
                    e2["name"] = f"ProfilerStep#{k + 1}"
                fh.write("," + json.dumps(e2))
        fh.write("]")
    return d.parent


def build_rocprof(out_dir: Path, copies: int) -> Path:
    with gzip.open(ROCPROF) as f:
        doc = json.loads(f.read())
    proc = doc["rocprofiler-sdk-tool"][0]
    recs = proc["buffer_records"]["kernel_dispatch"]
    t0 = min(r["start_timestamp"] for r in recs)
    span = max(r["end_timestamp"] for r in recs) - t0 + 1_000
    n = len(recs)
    out = []
    for k in range(copies):
        for r in recs:
            r2 = json.loads(json.dumps(r))
            r2["start_timestamp"] += span * k
            r2["end_timestamp"] += span * k
            r2["correlation_id"]["internal"] += n * k
            out.append(r2)
    proc["buffer_records"]["kernel_dispatch"] = out
    p = out_dir / "bench_results.json"
    p.write_text(json.dumps(doc, separators=(",", ":")))
    return p


def _child(what: str, target: str) -> dict[str, object]:
    code = (
        "import json, time\n"
        "t = time.perf_counter()\n"
        + (
            "from stepscope.trace.loader import ReadJob, expand_inputs, read_one\n"
            f"paths, _ = expand_inputs({target!r})\n"
            "rows = sum(read_one(ReadJob(str(q))).table.num_rows for q in paths)\n"
            if what == "read"
            else "from stepscope.cli import main\n"
            f"rc = main(['analyze', {target!r}, '-q', '--workers', '1', '--json', {target!r} + '.report.json'])\n"
            "rows = rc\n"
        )
        + "hwm = [ln for ln in open('/proc/self/status') if ln.startswith('VmHWM')][0].split()[1]\n"
        "print(json.dumps({'wall_s': round(time.perf_counter() - t, 2), 'rows_or_rc': rows,"
        " 'peak_rss_mb': round(int(hwm) / 1024)}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ascend-copies", type=int, default=200)
    ap.add_argument("--rocprof-copies", type=int, default=5)
    ap.add_argument("--workdir", default="bench-data")
    a = ap.parse_args()
    work = Path(a.workdir)
    work.mkdir(exist_ok=True)
    t = time.perf_counter()
    asc = build_ascend(work / "ascend", a.ascend_copies)
    roc = build_rocprof(work, a.rocprof_copies)
    print(json.dumps({"built_s": round(time.perf_counter() - t, 1)}), flush=True)
    for name, target, size in (
        ("ascend", asc, (asc / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").stat().st_size),
        ("rocprofv3", roc, roc.stat().st_size),
    ):
        for what in ("read", "analyze"):
            res = _child(what, str(target))
            print(json.dumps({"format": name, "measure": what, "file_mb": round(size / 2**20), **res}), flush=True)


if __name__ == "__main__":
    main()
