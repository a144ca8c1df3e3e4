"""Monitor overhead: a CPU training loop with and without ``stepscope.monitor.Monitor``.

    python benchmarks/bench_monitor_overhead.py [--rounds 10] [--steps 200] [--warmup 20] [--threads 1]
                                                [--json FILE]

The loop: a 3-block pre-norm MLP stack (LayerNorm, Linear 512->2048, GELU, Linear 2048->512,
residual; 6.8M parameters) with a 1,000-class head, batch 64, cross-entropy, backward,
``AdamW(fused=True)``; ~30 ms a step on one core of the 2-vCPU VM. Batches are pre-built tensors
(8 distinct ones, cycled). ``torch.set_num_threads(--threads)``: 1 by default, which leaves the second
core to the monitor's writer and detector threads and to the OS.

Variants, each with the monitor's default settings (sqlite sink, live detector on rank 0, captures
on), which is what a job gets:

- ``off``: the same loop, no monitor object and no call to one;
- ``level0``: ``Monitor(run_dir, level=0)`` and ``mon.step()`` at the end of each iteration;
- ``level1``: ``Monitor(run_dir, level=1, model=model, optimizer=opt)``, batches through
  ``mon.loader(...)``, and ``mon.step()``;
- ``level2``: as level 1 with ``level=2``. One process, so no collective is ever called, but the
  ``torch.distributed`` patch is installed (the output says whether it was);
- ``level0-nodetect`` (only with ``--variants``): level 0 with ``detect=False``, to separate the
  detector thread's cost from the rest.

First, ``--warmup-runs`` runs of every variant are done and discarded: a process's first run is
~25% slower whatever it runs (allocator, caches, first imports), which would land on the variant the
first round happens to start with. Then each round runs every variant once, in an order shuffled
with a seeded RNG; each run builds the model and optimizer afresh from the same seed, does
``--warmup`` steps and then ``--steps`` timed steps, in a fresh run directory. A step's time is ``time.perf_counter_ns()`` from the end of one iteration to
the end of the next, taken in the benchmark loop itself: it includes fetching the batch and
``mon.step()``. Overhead = median of the variant's steps (all rounds pooled) / median of ``off``'s - 1;
the per-round range is the min and max over rounds of the same ratio within one round, and the 90%
interval is a bootstrap over rounds (rounds resampled with replacement, the pooled ratio recomputed). The mean
overhead is also given: the writer's flushes (every 1 s) and the detector's ticks (every 5 s) touch
few steps, so they show in the mean, not in the median. The training thread's CPU time per step
(``time.thread_time_ns()``, same boundaries) is given beside the wall time: other processes on the
machine change it much less, and it holds everything the monitor does on the training thread, but not
time that thread waits (for the GIL held by the monitor's threads, for a core). After each run the
script counts the steps the monitor stored, dropped records, anomalies reported and captures planned.

Then micro-benchmarks without training work: ``mon.step()`` called 100,000 times in a tight loop at
each level (ns per call: median over chunks of 1,000 calls; ``queue_size`` raised so no record is
dropped, which would take a cheaper path), and the level-1 probes: a batch through ``mon.loader``, a
forward of an ``nn.Identity`` with the monitor's hooks, an optimizer step with its hooks, each against
the same without the monitor.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from stepscope.monitor import Monitor

HIDDEN = 512
BLOCKS = 3
BATCH = 64
CLASSES = 1000
N_BATCHES = 8
SEED = 0
VARIANTS = ("off", "level0", "level1", "level2")
ALL_VARIANTS = (*VARIANTS, "level0-nodetect")
_now = time.perf_counter_ns
_cpu = time.thread_time_ns


class Block(nn.Module):
    def __init__(self, h: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, 4 * h)
        self.fc2 = nn.Linear(4 * h, h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


def build_model() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(SEED)
    model = nn.Sequential(*[Block(HIDDEN) for _ in range(BLOCKS)], nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, CLASSES))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    return model, opt


def build_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(SEED + 1)
    return [
        (torch.randn(BATCH, HIDDEN, generator=g), torch.randint(0, CLASSES, (BATCH,), generator=g))
        for _ in range(N_BATCHES)
    ]


def monitor_for(variant: str, run_dir: Path, model: nn.Module, opt: torch.optim.Optimizer) -> Monitor | None:
    if variant == "off":
        return None
    if variant == "level0":
        return Monitor(run_dir, level=0)
    if variant == "level0-nodetect":
        return Monitor(run_dir, level=0, detect=False)
    level = 1 if variant == "level1" else 2
    return Monitor(run_dir, level=level, model=model, optimizer=opt)


def train(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    step: Callable[[], None] | None,
    warmup: int,
) -> tuple[list[int], list[int]]:
    """The loop; returns the wall and training-thread CPU time of each step after the first ``warmup``."""
    times: list[int] = []
    cpu: list[int] = []
    t_prev = _now()
    c_prev = _cpu()
    for i, (x, y) in enumerate(batches):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if step is not None:
            step()
        t = _now()
        c = _cpu()
        if i >= warmup:
            times.append(t - t_prev)
            cpu.append(c - c_prev)
        t_prev = t
        c_prev = c
    return times, cpu


def run_once(
    variant: str, pool: list[tuple[torch.Tensor, torch.Tensor]], warmup: int, steps: int, tmp: Path
) -> dict[str, Any]:
    model, opt = build_model()
    data = [pool[i % len(pool)] for i in range(warmup + steps)]
    run_dir = Path(tempfile.mkdtemp(prefix=f"{variant}-", dir=tmp))
    gc.collect()
    mon = monitor_for(variant, run_dir, model, opt)
    info: dict[str, Any] = {}
    if mon is None:
        times, cpu = train(model, opt, data, None, warmup)
    else:
        with mon:
            batches = mon.loader(data) if mon.config.level >= 1 else data
            times, cpu = train(model, opt, batches, mon.step, warmup)
            info = background_cpu_ns(mon, warmup + len(times))
            info |= {
                "monitor_on": bool(mon._on),  # private: the benchmark checks what really ran
                "detector": mon._live is not None,
                "collective_patch": mon._patch is not None,
            }
        info.update(stored_records(run_dir), dropped=mon.dropped)
    return {"variant": variant, "times_ns": times, "cpu_ns": cpu, **info}


def background_cpu_ns(mon: Monitor, steps: int) -> dict[str, float]:
    """CPU the monitor spent off the training thread during the loop, per step: its writer thread
    (which holds the GIL while it runs Python) and the detector process (another process: it
    competes for a core, not for the GIL). Read before the monitor closes."""
    out = {"writer_cpu_ns_per_step": float("nan"), "detector_cpu_ns_per_step": float("nan")}
    w = mon._writer
    if w is not None and w.ident is not None:
        out["writer_cpu_ns_per_step"] = time.clock_gettime_ns(time.pthread_getcpuclockid(w.ident)) / steps
    if mon._live is not None:
        try:
            fields = Path(f"/proc/{mon._live.pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks = int(fields[11]) + int(fields[12])  # utime + stime
            out["detector_cpu_ns_per_step"] = ticks * 1e9 / os.sysconf("SC_CLK_TCK") / steps
        except (OSError, ValueError, IndexError):
            pass
    return out


def stored_records(run_dir: Path) -> dict[str, int]:
    """Steps stored, anomalies reported and captures planned in one run directory."""
    out = {"stored_steps": 0, "anomalies": 0, "captures": len(list(run_dir.glob("captures/*/plan.json")))}
    for db in run_dir.glob("rank-*.db"):
        con = sqlite3.connect(db)
        try:
            out["stored_steps"] += con.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
        finally:
            con.close()
    events = run_dir / "detector.jsonl"  # what the live detector process reported
    if events.is_file():
        out["anomalies"] = sum(1 for line in events.read_text().splitlines() if line.strip())
    return out


def bootstrap_pct(
    runs: list[dict[str, Any]], variants: list[str], rounds: int, key: str, n: int = 1000
) -> tuple[dict[str, float], dict[str, float]]:
    """5th and 95th percentiles of the pooled-median overhead (%) over ``n`` resamplings of rounds."""
    steps = {v: [np.asarray([], dtype=np.int64)] * rounds for v in variants}
    for r in runs:
        steps[r["variant"]][r["round"]] = np.asarray(r[key], dtype=np.int64)
    rng = np.random.default_rng(0)
    samples: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(n):
        idx = rng.integers(0, rounds, rounds)
        base = float(np.median(np.concatenate([steps["off"][i] for i in idx])))
        for v in variants:
            samples[v].append(100 * (float(np.median(np.concatenate([steps[v][i] for i in idx]))) / base - 1))
    lo = {v: float(np.percentile(s, 5)) for v, s in samples.items()}
    hi = {v: float(np.percentile(s, 95)) for v, s in samples.items()}
    return lo, hi


def ratio_stats(runs: list[dict[str, Any]], variants: list[str], rounds: int, key: str) -> dict[str, dict[str, float]]:
    """Per variant, from the per-step times under ``key``: pooled median and mean (ms), their
    overheads against ``off`` (%), and the min, median and max over rounds of the round's median
    ratio (%)."""
    pooled: dict[str, list[int]] = {v: [] for v in variants}
    by_round: list[dict[str, list[int]]] = [{} for _ in range(rounds)]
    for r in runs:
        pooled[r["variant"]] += r[key]
        by_round[r["round"]][r["variant"]] = r[key]
    per_round: dict[str, list[float]] = {v: [] for v in variants}
    for rnd in by_round:
        base = statistics.median(rnd["off"])
        for v in variants:
            per_round[v].append(100 * (statistics.median(rnd[v]) / base - 1))
    off_median = statistics.median(pooled["off"])
    off_mean = statistics.fmean(pooled["off"])
    lo, hi = bootstrap_pct(runs, variants, rounds, key)
    return {
        v: {
            "median_ms": statistics.median(pooled[v]) / 1e6,
            "mean_ms": statistics.fmean(pooled[v]) / 1e6,
            "overhead_pct": 100 * (statistics.median(pooled[v]) / off_median - 1),
            "mean_overhead_pct": 100 * (statistics.fmean(pooled[v]) / off_mean - 1),
            "round_min_pct": min(per_round[v]),
            "round_median_pct": statistics.median(per_round[v]),
            "round_max_pct": max(per_round[v]),
            "ci90_low_pct": lo[v],
            "ci90_high_pct": hi[v],
        }
        for v in variants
    }


def overhead_table(runs: list[dict[str, Any]], variants: list[str], rounds: int) -> list[dict[str, Any]]:
    wall = ratio_stats(runs, variants, rounds, "times_ns")
    cpu = ratio_stats(runs, variants, rounds, "cpu_ns")
    rows = []
    for v in variants:
        vr = [r for r in runs if r["variant"] == v]
        rows.append(
            {
                "variant": v,
                "steps": sum(len(r["times_ns"]) for r in vr),
                **wall[v],
                "cpu": cpu[v],
                "stored_steps": sum(r.get("stored_steps", 0) for r in vr),
                "dropped": sum(r.get("dropped", 0) for r in vr),
                "anomalies": sum(r.get("anomalies", 0) for r in vr),
                "captures": sum(r.get("captures", 0) for r in vr),
                "detector": any(r.get("detector", False) for r in vr),
                "collective_patch": any(r.get("collective_patch", False) for r in vr),
                "monitor_on": all(r.get("monitor_on", True) for r in vr),
                "writer_us_per_step": _median_of(vr, "writer_cpu_ns_per_step") / 1e3,
                "detector_us_per_step": _median_of(vr, "detector_cpu_ns_per_step") / 1e3,
            }
        )
    return rows


def _median_of(runs: list[dict[str, Any]], key: str) -> float:
    xs = [r[key] for r in runs if key in r and r[key] == r[key]]
    return statistics.median(xs) if xs else float("nan")


# -- micro-benchmarks ----------------------------------------------------------------------------


def _per_call_ns(fn: Callable[[], None], calls: int, chunk: int = 1000) -> float:
    """Median over chunks of ``chunk`` calls of the time per call (the loop's own cost included)."""
    per: list[float] = []
    for _ in range(calls // chunk):
        t = _now()
        for _ in range(chunk):
            fn()
        per.append((_now() - t) / chunk)
    return statistics.median(per)


def _noop() -> None:
    pass


def micro_step(calls: int, tmp: Path) -> dict[str, float]:
    """ns per ``mon.step()`` with no work between calls, at each level (default settings otherwise,
    ``queue_size`` large enough that no record is dropped)."""
    model, opt = build_model()
    out = {"loop_and_noop_call": _per_call_ns(_noop, calls)}
    for level in (0, 1, 2):
        run_dir = Path(tempfile.mkdtemp(prefix=f"micro-{level}-", dir=tmp))
        kw: dict[str, Any] = {"model": model, "optimizer": opt} if level else {}
        with Monitor(run_dir, level=level, queue_size=calls + 10_000, **kw) as mon:
            mon.step()
            out[f"level{level}"] = _per_call_ns(mon.step, calls)
            if mon.dropped:
                out[f"level{level}_dropped"] = mon.dropped
    return out


def micro_probes(calls: int, tmp: Path, repeats: int = 5) -> dict[str, float]:
    """ns added per use by the level-1 probes: the loader wrapper per batch, the forward hooks per
    forward, the optimizer hooks per step (each: with the monitor minus without, medians of
    ``repeats`` alternated measurements)."""
    ident = nn.Identity()
    x = torch.zeros(1)
    p = nn.Parameter(torch.zeros(1))
    p.grad = torch.zeros(1)
    sgd = torch.optim.SGD([p], lr=0.0)
    items = [None] * calls

    def loader_ns(it: Iterable[Any]) -> float:
        t = _now()
        for _ in it:
            pass
        return (_now() - t) / calls

    res: dict[str, list[float]] = {k: [] for k in ("loader", "forward", "optimizer")}
    for _ in range(repeats):
        base = {
            "loader": loader_ns(items),
            "forward": _per_call_ns(lambda: ident(x), calls),
            "optimizer": _per_call_ns(sgd.step, calls // 10, chunk=100),
        }
        run_dir = Path(tempfile.mkdtemp(prefix="micro-probes-", dir=tmp))
        with Monitor(run_dir, level=1, model=ident, optimizer=sgd, detect=False) as mon:
            hooked = {
                "loader": loader_ns(mon.loader(items)),
                "forward": _per_call_ns(lambda: ident(x), calls),
                "optimizer": _per_call_ns(sgd.step, calls // 10, chunk=100),
            }
        for k in res:
            res[k].append(hooked[k] - base[k])
    return {k: statistics.median(v) for k, v in res.items()}


# -- report --------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu or platform.processor(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def print_table(rows: list[dict[str, Any]], micro: dict[str, float], probes: dict[str, float]) -> None:
    print(
        f"{'variant':<16} {'median ms':>9} {'overhead':>9} {'90% interval':>16} {'per-round range':>17} "
        f"{'mean ms':>8} {'mean ovh':>9} {'cpu ovh':>8} {'ns/step()':>9} {'stored':>7} {'dropped':>7} "
        f"{'anomalies':>9} {'captures':>8}"
    )
    for r in rows:
        v = r["variant"]
        key = v.split("-")[0]
        ns = f"{micro[key]:.0f}" if key in micro else "-"
        ci = f"{r['ci90_low_pct']:+.2f}..{r['ci90_high_pct']:+.2f}%"
        rng = f"{r['round_min_pct']:+.2f}..{r['round_max_pct']:+.2f}%"
        print(
            f"{v:<16} {r['median_ms']:>9.3f} {r['overhead_pct']:>+8.2f}% {ci:>16} {rng:>17} {r['mean_ms']:>8.3f} "
            f"{r['mean_overhead_pct']:>+8.2f}% {r['cpu']['overhead_pct']:>+7.2f}% {ns:>9} {r['stored_steps']:>7} "
            f"{r['dropped']:>7} {r['anomalies']:>9} {r['captures']:>8}"
        )
    for r in rows:
        if r["variant"] != "off":
            print(
                f"{r['variant']}: off the training thread, per step: writer thread {r['writer_us_per_step']:.1f} us CPU, "
                f"detector process {r['detector_us_per_step']:.1f} us CPU; "
                f"monitor on for every run: {r['monitor_on']}; live detector: {r['detector']}; "
                f"torch.distributed patch installed: {r['collective_patch']}"
                + (" (one process: no collective is called)" if r["collective_patch"] else "")
            )
    print(f"empty loop + no-op call: {micro['loop_and_noop_call']:.0f} ns per iteration (included in ns/step())")
    print(
        "level-1 probes, ns added per use: "
        + ", ".join(f"{k} {v:.0f}" for k, v in probes.items())
        + f"; per training step (step() + one of each): {micro['level1'] + sum(probes.values()):.0f} ns"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--warmup-runs", type=int, default=1, help="discarded runs of every variant before round 1")
    ap.add_argument("--variants", nargs="+", choices=ALL_VARIANTS, default=list(VARIANTS))
    ap.add_argument("--micro-calls", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0, help="the shuffle of each round's order")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    variants = ["off", *[v for v in args.variants if v != "off"]]

    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    pool = build_batches()
    info = machine()
    print(
        f"torch {info['torch']}, python {info['python']}, {info['nproc']} CPUs ({info['cpu']}), "
        f"torch threads {torch.get_num_threads()}; model {BLOCKS}x{HIDDEN} MLP blocks, batch {BATCH}, fused AdamW; "
        f"{args.rounds} rounds x {len(variants)} variants x ({args.warmup} + {args.steps}) steps; "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    rng = random.Random(args.seed)
    runs: list[dict[str, Any]] = []
    t_start = time.monotonic()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="stepscope-overhead-") as tmp_s:
        tmp = Path(tmp_s)
        for _ in range(args.warmup_runs):
            for v in variants:
                run_once(v, pool, args.warmup, args.steps, tmp)
        print(f"{args.warmup_runs} discarded run(s) of each variant done", file=sys.stderr, flush=True)
        for rnd in range(args.rounds):
            order = variants[:]
            rng.shuffle(order)
            for v in order:
                r = run_once(v, pool, args.warmup, args.steps, tmp)
                r["round"] = rnd
                runs.append(r)
            print(f"round {rnd + 1}/{args.rounds}: {' '.join(order)}", file=sys.stderr, flush=True)
        micro = micro_step(args.micro_calls, tmp)
        probes = micro_probes(args.micro_calls, tmp)
    load1 = os.getloadavg()
    rows = overhead_table(runs, variants, args.rounds)
    print_table(rows, micro, probes)
    print(
        f"wall {time.monotonic() - t_start:.0f} s; load average (1 min) {load0[0]:.2f} at start, {load1[0]:.2f} at end"
    )
    if args.json:
        out = {
            "machine": info,
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "model": {
                "blocks": BLOCKS,
                "hidden": HIDDEN,
                "batch": BATCH,
                "classes": CLASSES,
                "optimizer": "AdamW fused",
            },
            "load_average": [load0[0], load1[0]],
            "variants": rows,
            "per_round_median_ms": [
                {
                    "round": r["round"],
                    "variant": r["variant"],
                    "median_ms": statistics.median(r["times_ns"]) / 1e6,
                    "cpu_median_ms": statistics.median(r["cpu_ns"]) / 1e6,
                }
                for r in runs
            ],
            "step_call_ns": micro,
            "level1_probe_ns": probes,
        }
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
