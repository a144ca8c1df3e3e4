"""Monitor overhead with one model in one process: blocks of steps with the monitor's work on the
training thread, and blocks without it, alternating on the same model instance.

    python benchmarks/bench_monitor_overhead_blocks.py [--blocks 200] [--block-steps 10] [--levels 0 1 2]

Why: run-to-run comparisons (``bench_monitor_overhead.py``) and two model instances side by side
(``bench_monitor_overhead_paired.py``) both compare different model instances, which on the 2-vCPU
VM differ by 2-4% on their own, more than the targets (0.5%, 1%). Here the instance, its memory
and the machine's speed of the moment are shared by adjacent blocks.

One ``Monitor(run_dir, level=L)`` with the default settings (SQLite sink, writer thread, the live
detector process on this rank) runs for the whole measurement, watching the model and optimizer
at levels 1 and 2. Blocks of ``--block-steps`` steps alternate in the order on, off, off, on, ...
(a linear drift cancels in each group of four):

- on: ``mon.step()`` after each iteration; at levels 1 and 2 the monitor's forward and optimizer
  hooks on the model (``probes.watch_model`` / ``watch_optimizer``, the ones ``Monitor`` installs)
  and batches through ``mon.loader``;
- off: the hooks removed, plain batches, no ``mon.step()``.

The first step of each block is not timed (it carries the switch, and an on-block's first
``mon.step()`` closes a "step" that spans the whole off-block: it is tagged ``eval`` so the
detectors leave it out). Captures are turned off: this measures steady monitoring, not a capture.
A step is ``perf_counter_ns`` from one iteration's end to the next. Overhead = median over groups
of four of (median step of the two on-blocks / median step of the two off-blocks) - 1, with a 90%
bootstrap interval over groups. Not in the difference: the writer thread's flushes (on a 1 s timer,
they land in either kind of block) and the detector process (a separate process): their CPU per
step is printed beside it, as an upper bound of what they could take from the training thread.
"""

from __future__ import annotations

import argparse
import itertools
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
from stepscope.monitor.config import CaptureConfig  # noqa: E402
from stepscope.monitor.probes import watch_model, watch_optimizer  # noqa: E402

_now = time.perf_counter_ns
_ORDER = (True, False, False, True)  # on/off within a group of four blocks


def _hooks(mon: Monitor, model: Any, opt: Any, on: bool) -> None:
    """The monitor's level-1 hooks on (as ``Monitor`` installs them) or off."""
    if on:
        mon._handles += watch_model(mon._acc, model) + watch_optimizer(mon._acc, opt)
    else:
        for h in mon._handles:
            h.remove()
        mon._handles = []


def run_level(level: int, blocks: int, block_steps: int, warmup: int, tmp: Path) -> dict[str, float]:
    model, opt = build_model()
    pool = build_batches()
    plain = itertools.cycle(pool)
    kw: dict[str, Any] = {"model": model, "optimizer": opt} if level >= 1 else {}
    blocks -= blocks % 4
    med = np.empty(blocks)
    with Monitor(tmp / f"level{level}", level=level, capture=CaptureConfig(enabled=False), **kw) as mon:  # type: ignore[arg-type]
        wrapped = iter(mon.loader(itertools.cycle(pool))) if level >= 1 else plain
        for _ in range(warmup):
            _train(model, opt, next(wrapped))
            mon.step()
        for b in range(blocks):
            on = _ORDER[b % 4]
            if level >= 1:
                _hooks(mon, model, opt, on)
            src = wrapped if on and level >= 1 else plain
            times = np.empty(block_steps - 1)
            t_prev = _now()
            for i in range(block_steps):
                _train(model, opt, next(src))
                if on:
                    mon.step(tags=("eval",) if i == 0 else ())
                t = _now()
                if i:
                    times[i - 1] = t - t_prev
                t_prev = t
            med[b] = np.median(times)
        if level >= 1:
            _hooks(mon, model, opt, True)  # as the monitor left them, for its close()
        bg = background_cpu_ns(mon, warmup + blocks * block_steps)
    groups = med.reshape(-1, 4)
    ratio = (groups[:, 0] + groups[:, 3]) / (groups[:, 1] + groups[:, 2])
    rng = np.random.default_rng(0)
    boots = np.median(rng.choice(ratio, size=(2000, ratio.size)), axis=1)
    return {
        "level": level,
        "groups": int(ratio.size),
        "on_ms": float(np.median(med[[_ORDER[b % 4] for b in range(blocks)]])) / 1e6,
        "off_ms": float(np.median(med[[not _ORDER[b % 4] for b in range(blocks)]])) / 1e6,
        "overhead_pct": (float(np.median(ratio)) - 1) * 100,
        "ci90_low_pct": (float(np.percentile(boots, 5)) - 1) * 100,
        "ci90_high_pct": (float(np.percentile(boots, 95)) - 1) * 100,
        "writer_us_per_step": bg["writer_cpu_ns_per_step"] / 1e3,
        "detector_us_per_step": bg["detector_cpu_ns_per_step"] / 1e3,
    }


def _train(model: Any, opt: Any, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, y = batch
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), y).backward()
    opt.step()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=200, help="blocks per level (a multiple of 4)")
    ap.add_argument("--block-steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--levels", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, {a.blocks} blocks of {a.block_steps} steps per level, torch threads {a.threads}")
    with tempfile.TemporaryDirectory(prefix="stepscope-blocks-") as tmp:
        for level in a.levels:
            r = run_level(level, a.blocks, a.block_steps, a.warmup, Path(tmp))
            print(
                f"level {level}: on {r['on_ms']:.3f} ms, off {r['off_ms']:.3f} ms, overhead {r['overhead_pct']:+.3f}% "
                f"(90%: {r['ci90_low_pct']:+.3f}..{r['ci90_high_pct']:+.3f}, {r['groups']} groups); writer "
                f"{r['writer_us_per_step']:.1f} us, detector {r['detector_us_per_step']:.1f} us CPU per step",
                flush=True,
            )


if __name__ == "__main__":
    main()
