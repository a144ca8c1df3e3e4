"""Real PyTorch runs on CPU with a known problem, and the same runs with it fixed (needs torch 2.13.0).

    python scripts/advisor_cases.py CASE VARIANT OUT_DIR [--steps 10] [--port P]

CASE is one of:
- ``loader``: every sample costs 2 ms of I/O (a sleep in ``Dataset.__getitem__``), 8 samples per
  batch; ``broken`` loads in the training process (``num_workers=0``), ``fixed`` with two worker
  processes and prefetching (the loading then runs beside the step);
- ``gc``: a large live Python heap (300k small objects) and ``gc.collect()`` inside every step;
  ``fixed`` calls ``gc.freeze()`` once after building the heap and never collects in the loop;
- ``item``: ``loss.item()`` every step; ``fixed`` does not (on CPU an ``.item()`` waits for
  nothing: the advisor must not call it a problem, and the diff finds no saving);
- ``tiny``: a model of many small layers (64 x Linear(32, 32)) trained with Adam one tensor at a
  time (``foreach=False``: a dozen tiny operators per parameter per step); ``fixed`` uses the fused
  Adam (``fused=True``: one operator for all parameters);
- ``straggler``: 3 ranks over gloo with DistributedDataParallel; rank 1 spends 40 ms more per step
  before its forward pass (``gen_gloo_traces.busy_op``, an operator that sleeps), the others wait
  for it in the gradient all-reduce; ``fixed`` has no extra work.

Each rank profiles ``--steps`` steps after one warm-up step (``torch.profiler``, CPU activity) and
writes ``OUT_DIR/rank-<r>.json``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

from gen_gloo_traces import busy_op  # scripts/ is on the path of a script run from it

CASES = ("loader", "gc", "item", "tiny", "straggler")


def _model(case: str = ""):
    import torch

    torch.manual_seed(0)
    if case == "tiny":
        return torch.nn.Sequential(*(torch.nn.Linear(32, 32) for _ in range(64)), torch.nn.Linear(32, 16))
    return torch.nn.Sequential(
        torch.nn.Linear(512, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 16),
    )


class _Samples:
    """A map-style dataset of random samples; ``io_ms`` of sleep per sample (simulated storage)."""

    def __init__(self, io_ms: float, n: int = 4096, width: int = 512) -> None:
        self.io_ms, self.n, self.width = io_ms, n, width

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        import torch

        if self.io_ms:
            time.sleep(self.io_ms / 1000.0)
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.width, generator=g), torch.randn(16, generator=g)


def _loop(case: str, variant: str, out: Path, steps: int, rank: int = 0, extra_ms: float = 0.0) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.set_num_threads(1)
    model = _model(case)
    if case == "straggler":
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model)
    broken = variant == "broken"
    if case == "tiny":
        opt: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False, fused=not broken)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    workers = 2 if case == "loader" and not broken else 0
    loader = torch.utils.data.DataLoader(
        _Samples(2.0 if case == "loader" else 0.0, width=32 if case == "tiny" else 512),
        batch_size=8 if case == "loader" else 32,
        num_workers=workers,
        prefetch_factor=4 if workers else None,
        persistent_workers=bool(workers),
    )
    heap = [{"i": i, "t": (i, str(i))} for i in range(300_000)] if case == "gc" else []
    if case == "gc" and not broken:
        gc.freeze()
    busy = busy_op() if case == "straggler" else None
    it = iter(loader)
    sched = schedule(wait=0, warmup=1, active=steps, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched) as prof:
        for _ in range(steps + 1):
            x, y = next(it)
            if busy is not None and extra_ms:
                x = busy(x, extra_ms)
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if case == "item" and broken:
                loss.item()
            if case == "gc" and broken:
                gc.collect()
            prof.step()
    prof.export_chrome_trace(str(out / f"rank-{rank}.json"))
    del heap


def _rank(rank: int, world: int, variant: str, out: str, steps: int, port: int) -> None:
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    extra = 40.0 if variant == "broken" and rank == 1 else 0.0
    try:
        _loop("straggler", variant, Path(out), steps, rank=rank, extra_ms=extra)
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("case", choices=CASES)
    p.add_argument("variant", choices=("broken", "fixed"))
    p.add_argument("out_dir")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--port", type=int, default=29533)
    a = p.parse_args(argv)
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if a.case != "straggler":
        _loop(a.case, a.variant, out, a.steps)
        return 0
    import torch.multiprocessing as mp

    mp.spawn(_rank, args=(3, a.variant, str(out), a.steps, a.port), nprocs=3, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
