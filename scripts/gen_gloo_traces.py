"""Generate real multi-rank PyTorch profiler traces on CPU with gloo (needs torch==2.13.0).

    python scripts/gen_gloo_traces.py OUT_DIR [--ranks 2] [--slow-loader-rank 1] [--loader-sleep-ms 20]
                                      [--slow-compute-rank R --compute-sleep-ms 30]

Each rank trains a small MLP with DistributedDataParallel over gloo and profiles 3 steps with
torch.profiler; rank ``--slow-loader-rank`` sleeps ``--loader-sleep-ms`` in every
``Dataset.__getitem__`` (one item per batch), an injected slow data loader of known size; rank
``--slow-compute-rank`` spends ``--compute-sleep-ms`` more inside its forward pass in a custom op
``stepscope_test::busy`` (a torch.library op that sleeps: the profiler records it as an operator
of exactly that wall time, whatever the CPU contention), an injected slow device of known size
(the other ranks then wait for it in the gradient all-reduce). Writes ``OUT_DIR/rank-<r>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def busy_op():  # type: ignore[no-untyped-def]
    """``stepscope_test::busy(x, ms)``: sleeps ``ms`` and returns a copy of ``x`` (gradient passed
    through). The profiler records it as an operator of exactly that wall time, whatever the CPU
    contention. Registered once per process."""
    import torch

    @torch.library.custom_op("stepscope_test::busy", mutates_args=(), schema="(Tensor x, float ms) -> Tensor")
    def busy(x: torch.Tensor, ms: float) -> torch.Tensor:
        time.sleep(ms / 1000.0)
        return x.clone()

    @busy.register_fake
    def _(x: torch.Tensor, ms: float) -> torch.Tensor:
        return torch.empty_like(x)

    def _busy_backward(ctx, grad):  # type: ignore[no-untyped-def]
        return grad, None

    busy.register_autograd(_busy_backward)
    return busy


def _worker(
    rank: int,
    world: int,
    out_dir: str,
    slow_rank: int,
    sleep_ms: float,
    port: int,
    slow_compute_rank: int = -1,
    compute_sleep_ms: float = 0.0,
) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)

    class Data(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int):
            if rank == slow_rank:
                time.sleep(sleep_ms / 1000.0)
            return torch.randn(256), torch.randn(16)

    loader = torch.utils.data.DataLoader(Data(), batch_size=1)

    busy = busy_op()

    class SlowIdentity(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if rank == slow_compute_rank:
                return busy(x, compute_sleep_ms)
            return x

    model = DDP(
        torch.nn.Sequential(torch.nn.Linear(256, 512), SlowIdentity(), torch.nn.ReLU(), torch.nn.Linear(512, 16))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    out = str(Path(out_dir) / f"rank-{rank}.json")
    sched = schedule(wait=1, warmup=1, active=3, repeat=1)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=sched,
        record_shapes=True,
        on_trace_ready=lambda p: p.export_chrome_trace(out),
    ) as prof:
        for step, (x, y) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
            if step >= 5:
                break
    # both ranks must be done with the group before either tears it down (else gloo may abort)
    dist.barrier()
    dist.destroy_process_group()
    # the trace is on disk; skip interpreter teardown, where a C++ thread still alive in torch/gloo
    # can abort the process ("terminate called without an active exception", seen once in CI)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--slow-loader-rank", type=int, default=1)
    ap.add_argument("--loader-sleep-ms", type=float, default=20.0)
    ap.add_argument("--slow-compute-rank", type=int, default=-1)
    ap.add_argument("--compute-sleep-ms", type=float, default=30.0)
    ap.add_argument("--port", type=int, default=29517)
    a = ap.parse_args()
    import torch.multiprocessing as mp

    Path(a.out_dir).mkdir(parents=True, exist_ok=True)
    mp.spawn(
        _worker,
        args=(
            a.ranks,
            a.out_dir,
            a.slow_loader_rank,
            a.loader_sleep_ms,
            a.port,
            a.slow_compute_rank,
            a.compute_sleep_ms,
        ),
        nprocs=a.ranks,
        join=True,
    )


if __name__ == "__main__":
    main()
