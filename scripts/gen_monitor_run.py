"""Run a small data-parallel training job on CPU with gloo under ``stepscope.monitor.Monitor``
(needs torch==2.13.0): the run directory the monitor tests and the overhead benchmark read.

    python scripts/gen_monitor_run.py RUN_DIR [--ranks 2] [--steps 120] [--level 2]
        [--mode ddp|allreduce] [--step-ms 20] [--slow-rank R --slow-ms 6 --slow-from 60]
        [--no-capture] [--port P]

Each rank trains a small MLP; a module inside the forward sleeps ``--step-ms`` (steps dominated by
a known wall time, whatever the CPU contention of a small machine), and rank ``--slow-rank`` sleeps
``--slow-ms`` more from step ``--slow-from`` on: an injected straggler of known size, whose peers
then wait for it in the gradient all-reduce. ``--mode allreduce`` averages gradients with explicit
``torch.distributed.all_reduce`` calls instead of DistributedDataParallel.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _average_gradients(model, world: int) -> None:  # type: ignore[no-untyped-def]
    import torch.distributed as dist

    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world


def _worker(rank: int, a: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from stepscope.monitor import CaptureConfig, Monitor

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    state = {"step": 0}

    class Busy(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            ms = a.step_ms + (a.slow_ms if rank == a.slow_rank and state["step"] >= a.slow_from else 0.0)
            time.sleep(ms / 1000.0)
            return x

    net = torch.nn.Sequential(torch.nn.Linear(64, 128), Busy(), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    model = DDP(net) if a.mode == "ddp" else net
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    capture = CaptureConfig(enabled=a.capture, steps=3, round_to=10, lead_steps=5, cooldown_s=0.0, max_captures=1)
    with Monitor(
        a.run_dir,
        level=a.level,
        model=model,
        optimizer=opt,
        flush_interval_s=0.1,
        detect_interval_s=0.25,
        capture=capture,
        tokens_per_step=32,
        detector_wait_s=300.0,  # rank 0 returns once the detector's last pass and analyses are written
    ) as mon:
        data = [(torch.randn(32, 64), torch.randn(32, 8)) for _ in range(8)]
        batches = (data[i % len(data)] for i in range(a.steps))
        for x, y in mon.loader(batches):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            if a.mode == "allreduce":
                _average_gradients(model, a.ranks)
            opt.step()
            mon.step()
            state["step"] += 1
        dist.barrier()
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown (a gloo C++ thread can abort it; see gen_gloo_traces.py)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--level", type=int, default=2, choices=(0, 1, 2))
    ap.add_argument("--mode", choices=("ddp", "allreduce"), default="ddp")
    ap.add_argument("--step-ms", type=float, default=20.0)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-ms", type=float, default=0.0)
    ap.add_argument("--slow-from", type=int, default=60)
    ap.add_argument("--no-capture", dest="capture", action="store_false")
    ap.add_argument("--port", type=int, default=29533)
    a = ap.parse_args()
    import torch.multiprocessing as mp

    mp.start_processes(_worker, args=(a,), nprocs=a.ranks, start_method="spawn", join=True)


if __name__ == "__main__":
    main()
