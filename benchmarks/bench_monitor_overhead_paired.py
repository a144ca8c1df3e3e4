"""Monitor overhead, paired step by step: the same loop as ``bench_monitor_overhead.py`` on two
identical models in one process, one monitored and one not, their steps alternating (A B, then B A,
...). Adjacent steps share the machine's speed of the moment, so the drift that makes run-to-run
comparisons on a small VM noisy (several percent) cancels in each pair.

    python benchmarks/bench_monitor_overhead_paired.py [--pairs 2000] [--warmup 50] [--levels -1 0 1 2]

Model A runs under ``Monitor(run_dir, level=L)`` with the default settings (``model=`` /
``optimizer=`` and ``mon.loader`` at level >= 1; ``mon.step()`` after each of A's steps); model B
runs the same code with no monitor. What this measures is what the monitor does on the training
thread (the clock reads, hooks, ``mon.step()``, and the training thread's share of waiting for the
GIL when the writer thread runs during A's steps rather than B's). The writer thread and the
detector process run throughout, beside both models' steps alike: their CPU is given separately.

Overhead = median over pairs of t_A / t_B - 1, with a 90% bootstrap interval over pairs. Level -1
is the control: neither model monitored, so it shows what two identical models differ by alone.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_monitor_overhead import background_cpu_ns, build_batches, build_model  # noqa: E402

from stepscope.monitor import Monitor  # noqa: E402

_now = time.perf_counter_ns


def _step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), y).backward()
    opt.step()


def _timed(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, step: Any) -> int:
    t = _now()
    _step(model, opt, x, y)
    if step is not None:
        step()
    return _now() - t


def paired(level: int, pairs: int, warmup: int, tmp: Path) -> dict[str, float]:
    pool = build_batches()
    ma, oa = build_model()
    mb, ob = build_model()
    data = [pool[i % len(pool)] for i in range(pairs + warmup)]
    kw = {"model": ma, "optimizer": oa} if level >= 1 else {}
    ta, tb = np.empty(pairs), np.empty(pairs)
    # level -1: the control, no monitor at all (what two identical models differ by on their own)
    with Monitor(tmp / f"level{level}", level=max(level, 0), detect=level >= 0, **kw) as mon:  # type: ignore[arg-type]
        if level < 0:
            mon.close()
        batches_a = iter(mon.loader(data)) if level >= 1 else iter(data)
        step_a = mon.step if level >= 0 else None
        for i, (xb, yb) in enumerate(data):
            xa, ya = next(batches_a)
            if i % 2 == 0:
                a = _timed(ma, oa, xa, ya, step_a)
                b = _timed(mb, ob, xb, yb, None)
            else:
                b = _timed(mb, ob, xb, yb, None)
                a = _timed(ma, oa, xa, ya, step_a)
            if i >= warmup:
                ta[i - warmup], tb[i - warmup] = a, b
        nan = float("nan")
        no_bg = {"writer_cpu_ns_per_step": nan, "detector_cpu_ns_per_step": nan}
        bg = background_cpu_ns(mon, pairs + warmup) if level >= 0 else no_bg
    ratio = ta / tb
    rng = np.random.default_rng(0)
    boots = np.median(rng.choice(ratio, size=(1000, ratio.size)), axis=1)
    return {
        "level": level,
        "median_a_ms": float(np.median(ta)) / 1e6,
        "median_b_ms": float(np.median(tb)) / 1e6,
        "overhead_pct": (float(np.median(ratio)) - 1) * 100,
        "ci90_low_pct": (float(np.percentile(boots, 5)) - 1) * 100,
        "ci90_high_pct": (float(np.percentile(boots, 95)) - 1) * 100,
        "writer_us_per_step": bg["writer_cpu_ns_per_step"] / 1e3,
        "detector_us_per_step": bg["detector_cpu_ns_per_step"] / 1e3,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--levels", type=int, nargs="+", default=[-1, 0, 1, 2], help="-1: the control, no monitor")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, {a.pairs} pairs after {a.warmup}, torch threads {a.threads}")
    with tempfile.TemporaryDirectory(prefix="stepscope-paired-") as tmp:
        for level in a.levels:
            r = paired(level, a.pairs, a.warmup, Path(tmp))
            print(
                f"level {level}: A {r['median_a_ms']:.3f} ms, B {r['median_b_ms']:.3f} ms, overhead "
                f"{r['overhead_pct']:+.3f}% (90%: {r['ci90_low_pct']:+.3f}..{r['ci90_high_pct']:+.3f}); "
                f"writer {r['writer_us_per_step']:.1f} us, detector {r['detector_us_per_step']:.1f} us CPU per step",
                flush=True,
            )


if __name__ == "__main__":
    main()
