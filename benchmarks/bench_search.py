"""Planner search: time and peak memory of `plan`'s search on large spaces, each job in a fresh process.

    python benchmarks/bench_search.py

Per job: configurations searched, median of 5 searches (after one warm-up) and the process's peak
RSS (ru_maxrss), one JSON line each. The search ranks every configuration on fits / step time /
memory and evaluates only the top rows in full (planner/search.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

JOBS = [
    ("deepseek-v3", "h100", 2048, 15360, 4096),
    ("llama3-405b", "h100", 16384, 2048, 8192),
    ("llama3-70b", "h100", 1024, 2048, 8192),
]

CHILD = """
import json, resource, sys, time
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware, model, search
name, hw, devices, batch, seq = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
job = make_job(model(name), hardware(hw), devices, 8, batch, seq)
plan = search(job, top=20)
times = []
for _ in range(5):
    t = time.perf_counter()
    search(job, top=20)
    times.append(time.perf_counter() - t)
print(json.dumps({"model": name, "devices": devices, "configs": plan.evaluated, "median_s": round(sorted(times)[2], 3),
                  "configs_per_s": round(plan.evaluated / sorted(times)[2]), "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))
"""


def main() -> None:
    for job in JOBS:
        out = subprocess.run([sys.executable, "-c", CHILD, *map(str, job)], capture_output=True, text=True, check=True)
        print(json.dumps(json.loads(out.stdout)))


if __name__ == "__main__":
    main()
