"""Host time per (parameter tensor, DP rank) of a ZeRO-1 weight all-gather done tensor by tensor.

nanotron's ZeroDistributedOptimizer gathers the updated weights after every optimizer step
(optim/zero.py ``_all_gather_params``) through its ``all_gather_coalesced`` (distributed.py). Read
from that code, the host does, for T parameter tensors and a DP group of R ranks:

1. a slice of every tensor for every rank (T x R views) for the output lists, one per tensor for
   the input;
2. the lists regrouped rank by rank, the input flattened into one buffer and each rank's output
   slices flattened into one buffer each (R concatenations of T views);
3. the collective into those R buffers (a list-output all-gather: a flat result, then R copies out);
4. every rank's buffer unflattened into T views and each view copied into its slice (T x R
   ``copy_`` calls from Python).

Steps 1, 2 and 4 are Python-level work per (tensor, rank) pair: with R = 128 and a few hundred
tensors per pipeline stage, tens of thousands of small ops after every step. This script replays
that sequence with PyTorch on CPU tensors whose shards are tiny (16 elements), so the time is the
per-op host overhead, not data movement; the collective is replaced by copies. It is written from
the description above (no nanotron code). CUDA tensors add a kernel launch to each ``copy_``, so
on a GPU host the cost per pair is at least this. The planner's nanotron preset uses the rounded
median (``Job.zero_gather_copy_s``, data/frameworks.yaml).

Run: ``python benchmarks/zero_gather_host.py`` (needs torch; prints one JSON line per case and the
median over cases).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def replay(n_tensors: int, ranks: int, shard: int = 16, repeats: int = 5) -> float:
    """Seconds (best of ``repeats``) of one tensor-by-tensor gather of ``n_tensors`` over ``ranks``."""
    import torch
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    weights = [torch.zeros(ranks * shard, dtype=torch.bfloat16) for _ in range(n_tensors)]
    bounds = [[(r * shard, (r + 1) * shard) for r in range(ranks)] for _ in weights]
    mine = 0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        per_tensor = [[w.view(-1)[lo:hi] for lo, hi in bounds[i]] for i, w in enumerate(weights)]
        inputs = [w.view(-1)[slice(*bounds[i][mine])] for i, w in enumerate(weights)]
        per_rank = [[views[r] for views in per_tensor] for r in range(ranks)]
        send = _flatten_dense_tensors(inputs)
        recv = [_flatten_dense_tensors(views) for views in per_rank]
        flat = torch.empty(ranks * send.numel(), dtype=send.dtype)  # the collective's flat result
        flat.view(ranks, -1).copy_(send.expand(ranks, -1))
        for r in range(ranks):
            recv[r].copy_(flat[r * send.numel() : (r + 1) * send.numel()])
        for views, buf in zip(per_rank, recv, strict=True):
            for dst, src in zip(views, _unflatten_dense_tensors(buf, views), strict=True):
                dst.copy_(src)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    # (tensors on a stage, DP ranks): nanotron's 1.34B / 3.57B / 8.86B stages at dp 32 and 128
    per_pair = []
    for n, r in ((50, 32), (50, 128), (86, 32), (171, 128), (98, 32)):
        s = replay(n, r, repeats=args.repeats)
        per_pair.append(s / (n * r))
        print(
            json.dumps({"tensors": n, "ranks": r, "seconds": round(s, 5), "us_per_pair": round(s / (n * r) * 1e6, 2)})
        )
    print(json.dumps({"median_us_per_pair": round(statistics.median(per_pair) * 1e6, 2)}))


if __name__ == "__main__":
    main()
