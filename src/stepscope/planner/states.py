"""Weights, gradients and optimizer states per device, by ZeRO stage.

Weights 2 B per parameter (bf16); gradients ``Job.grad_bytes`` (default by precision: 4 with
bf16/fp8, fp32 accumulation and reduction as Megatron with bf16, torchtitan's FSDP2 and nanotron
do; 2 with fp16, as Megatron and DeepSpeed reduce fp16 gradients); optimizer
``optimizer_bytes`` (12: fp32 master + Adam m, v; 8 with the moments in bf16). ZeRO-1 shards
the optimizer over the ``shard`` group (dp x cp: context-parallel ranks hold the same weights),
ZeRO-2 also the gradients, ZeRO-3/FSDP also the weights; HSDP shards all three over its shard
group (x cp) only (cost.py picks ``shard``). Expert parameters are held by ep x etp / tp times fewer
ranks (Megatron's expert data-parallel group, dp x cp x tp / (ep x etp), over which its distributed
optimizer shards them), so ZeRO divides them by shard / (ep x etp / tp), at least 1: where the
experts take every rank of that group (ep x etp = dp x cp x tp) each expert shard has one copy and
ZeRO leaves it whole.
"""

from __future__ import annotations

import numpy as np

from .job import Job


def sharded_params(
    p_dev: np.ndarray, e_dev: np.ndarray | float, shard: np.ndarray, ep_fold: np.ndarray | float
) -> np.ndarray:
    """Parameters a device holds when ZeRO shards ``p_dev`` over ``shard`` ranks: the dense ones
    / shard, the experts' (``e_dev``) / their own group, shard / ``ep_fold`` (at least 1)."""
    return (p_dev - e_dev) / shard + e_dev / np.maximum(shard / ep_fold, 1.0)


def state_bytes(
    job: Job,
    *,
    p_dev: np.ndarray,
    zero: np.ndarray,
    shard: np.ndarray,
    keep: np.ndarray,
    pp: np.ndarray,
    e_dev: np.ndarray | float = 0.0,
    ep_fold: np.ndarray | float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, gradients, optimizer states) in bytes for ``p_dev`` parameters on the device.
    ``keep``: FSDP without resharding after forward (``keep_params``, FSDP2
    reshard_after_forward=False, torchtitan's default under pipeline parallelism): the stage's bf16
    weights stay gathered from forward to backward; under a pipeline schedule the gradients then
    also accumulate unsharded until the last micro-batch's backward reduce-scatters them
    (PyTorch's pipelining turns FSDP2's gradient sync and post-backward resharding off for the
    others). ``e_dev``: the experts' share of ``p_dev``; ``ep_fold``: ep x etp / tp."""

    def held(on: np.ndarray) -> np.ndarray:  # parameters on the device, sharded where ``on``
        return np.where(on, sharded_params(p_dev, e_dev, shard, ep_fold), p_dev)

    w_b = np.where(keep, 2 * p_dev, 2 * held(zero >= 3))
    g_b = job.grad_bytes * held((zero >= 2) & ~(keep & (pp > 1)))
    o_b = job.framework.memory.optimizer_bytes * held(zero >= 1)
    return w_b, g_b, o_b
