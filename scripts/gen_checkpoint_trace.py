"""Generate a CPU PyTorch (2.13.0) profiler trace of a small MLP trained with activation
checkpointing, for the recompute detection test.

    python scripts/gen_checkpoint_trace.py OUT.json [--blocks 2] [--no-checkpoint]

Each block is Linear -> ReLU -> Linear wrapped in torch.utils.checkpoint (non-reentrant), so each
step re-runs 3 forward ops per block inside the backward pass (known by construction).
Profiles 2 steps (schedule wait=1, warmup=1, active=2).
"""

from __future__ import annotations

import argparse


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--no-checkpoint", action="store_true")
    a = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    torch.set_num_threads(1)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(64, 256)
            self.b = torch.nn.Linear(256, 64)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(torch.relu(self.a(x)))

    blocks = torch.nn.ModuleList([Block() for _ in range(a.blocks)])
    opt = torch.optim.SGD(blocks.parameters(), lr=0.01)
    x = torch.randn(32, 64)
    sched = schedule(wait=1, warmup=1, active=2, repeat=1)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=sched,
        record_shapes=True,
        on_trace_ready=lambda p: p.export_chrome_trace(a.out),
    ) as prof:
        for _ in range(4):
            y = x
            for blk in blocks:
                y = blk(y) if a.no_checkpoint else checkpoint(blk, y, use_reentrant=False)
            opt.zero_grad()
            y.square().mean().backward()
            opt.step()
            prof.step()


if __name__ == "__main__":
    main()
