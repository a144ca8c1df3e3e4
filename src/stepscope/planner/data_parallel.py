"""Data-parallel time of a step: gradient reduction, ZeRO/FSDP gathers and when each can run.

Over the dp x cp ranks that share weights (written dp here), with when each collective can run (a
gradient is final only after the last micro-batch's backward):
- ZeRO-0: all-reduce 2(dp-1)/dp x gradient bytes, under the last micro-batch's backward;
- ZeRO-1 (distributed optimizer): reduce-scatter of the gradients, (dp-1)/dp x gradient bytes,
  under the last backward (the whole gradients accumulate locally: Megatron's distributed
  optimizer keeps a full gradient buffer, DeepSpeed's stage 1 reduces at the accumulation
  boundary only), then all-gather of the updated bf16 weights, (dp-1)/dp x 2 B/param,
  after the optimizer step: exposed (DeepSpeed, nanotron's ZeRO-1) unless the framework overlaps
  it with the next step's first forward (``param_gather_overlap``, Megatron's
  --overlap-param-gather); ``zero_sync_after_backward`` (nanotron with fp32 gradient
  accumulation) all-reduces the gradients after the backward instead, exposed;
- ZeRO-2: the gradients are held sharded, so they are reduce-scattered after *every*
  micro-batch's backward (DeepSpeed's stage 2 reduces its gradient buckets in each backward,
  stage_1_and_2.py reduce_ipg_grads, and keeps only its partition): n_micro reduce-scatters, each
  under its micro-batch's last backward, then the same weight all-gather as ZeRO-1 (with a
  pipeline too, as Llama 3's FSDP ran, reduce-scattering in fp32: Dubey et al. 2024, 3.3.2;
  DeepSpeed's PipelineEngine refuses stages 2 and 3 and Megatron has no stage 2, so neither
  preset searches it there: data/frameworks.yaml);
- ZeRO-3: per micro-batch, 2 all-gathers of the bf16 weights (the layers' in fp8 with
  ``fp8_all_gather``) (forward, backward) + a
  reduce-scatter of its gradients (FSDP2's and DeepSpeed's default under gradient accumulation),
  each under that micro-batch's compute and run layer by layer (one collective per layer and
  pass, each paying its ring latency); with ``keep_params`` (FSDP2 reshard_after_forward=False:
  the weights gathered in forward stay gathered for the backward) one all-gather + one
  reduce-scatter per micro-batch without a pipeline (FSDP2 still reshards after each backward
  and reduces each micro-batch's gradients), and per step under a pipeline, under one
  micro-batch (PyTorch's pipelining turns FSDP2's gradient sync and post-backward resharding off
  for all but the last micro-batch: the stage's gradients then accumulate unsharded until that
  reduce-scatter; memory holds them whole);
- HSDP: the ZeRO-3 traffic within the shard group g plus an all-reduce 2(r-1)/r of the sharded
  gradients across the r = dp/g replicas, under the last backward.
A group's link is inter-node when it spans nodes; ``Job.dp_overlap`` (prior 0.7) of each part
hides (ZeRO-3 prefetched a layer ahead, ``zero3_prefetch``: all but a micro-batch's first
all-gather and last reduce-scatter, 1 - 2 / (3 layers) of it; with kept weights 1 - 1 / layers),
never more than its window (planner/window.py); ZeRO-0/1/2 gradients reduced in
``dp_bucket_mb`` buckets pay one ring latency per bucket.

Expert parameters (``e_dev`` of ``p_dev``) are shared by fewer ranks: Megatron's expert
data-parallel group, dp x cp x tp / (ep x etp) (``ep_fold`` = ep x etp / tp times smaller than the
dense one; HSDP's shard group likewise). Their gradients are reduced and their ZeRO-3 weights
gathered over that group: a ring there moves (n_e - 1)/n_e of their bytes, none when each expert
shard has one replica; written as the dense group's ring over effective bytes, so the latency
terms are the dense group's.

ZeRO-1/2 weights gathered tensor by tensor on the host (``zero_gather_copy_us``, nanotron):
that time x the stage's parameter tensors (rates.weight_tensors_per_layer x its layers, + 2 for
the embedding or the head) x dp, after the optimizer step, exposed (:func:`zero_gather_host_s`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .buffers import layer_gather_bytes
from .job import Job
from .rates import weight_tensors_per_layer
from .states import sharded_params
from .window import Window

Ring = Callable[..., np.ndarray]  # links.Links.ring: (ranks, bytes, span, calls[, kind]) -> seconds


def dp_seconds(
    job: Job,
    *,
    ring: Ring,
    window: Window,
    p_dev: np.ndarray,
    gather_b: np.ndarray,
    tp: np.ndarray,
    pp: np.ndarray,
    dpc: np.ndarray,
    shard: np.ndarray,
    zero: np.ndarray,
    keep: np.ndarray,
    stage_L: np.ndarray,
    n_micro: np.ndarray,
    busy_s: np.ndarray,
    rf: np.ndarray,
    e_dev: np.ndarray | float = 0.0,
    ep_fold: np.ndarray | float = 1.0,
) -> np.ndarray:
    """Exposed DP/FSDP seconds per configuration (module docstring); what hides is taken from
    ``window``. ``p_dev`` parameters on the most loaded stage, ``e_dev`` the experts' of them,
    ``dpc`` = dp x cp ranks sharing weights (experts: dpc / ``ep_fold``), ``gather_b`` the bytes of
    one ZeRO-3 all-gather of the stage's weights (2 B per parameter, 1 for the layers' under
    ``fp8_all_gather``), ``shard`` the group ZeRO shards over, ``busy_s`` the compute + host
    wait, ``rf`` the recompute factor."""
    # the experts' bytes as the dense group's ring would move them (module docstring)
    e12, e3 = e_dev * _fold(dpc, ep_fold), e_dev * _fold(shard, ep_fold)
    p12, p3 = p_dev - e_dev + e12, p_dev - e_dev + e3
    gather_b = gather_b - layer_gather_bytes(job) * (e_dev - e3)
    grad_bytes = job.grad_bytes * p12  # reduced in the gradients' dtype
    grad3 = job.grad_bytes * p3
    # DP groups are strided by tp*pp*cp ranks; the shard group of HSDP is the innermost part of it
    span_dp, span_shard = tp * pp * dpc, tp * pp * shard
    replicas = dpc / shard
    # windows a DP collective can hide in: the last micro-batch's backward (recompute included), one
    # micro-batch, or every micro-batch (module docstring)
    micro_s = busy_s / np.maximum(n_micro, 1)
    last_bwd_s = micro_s * (1 - 1 / (3 * rf))
    # gradient buckets (dp_bucket_mb): each one a collective of its own, with its own latency
    buckets = (
        np.maximum(np.ceil(2 * p_dev / (job.framework.zero.bucket_mb * 1e6)), 1.0)
        if job.framework.zero.bucket_mb > 0
        else 1.0
    )
    # ZeRO-3/FSDP gathers and reduces layer by layer (FSDP2's fully_shard per transformer block,
    # DeepSpeed's per-module fetch, XLA's per-layer collectives in a scanned stack): one collective
    # per layer of the stage and pass, each paying its ring latency
    zero3_once = ring(shard, gather_b + grad3, span_shard, 2 * stage_L)  # one all-gather + one reduce-scatter
    zero3_each = ring(shard, 2 * gather_b + grad3, span_shard, 3 * stage_L)  # two all-gathers + one reduce-scatter
    # HSDP's replicas all-reduce the sharded gradients (experts' shards are ep_fold x larger)
    replica_ar = ring(
        replicas, 2 * job.grad_bytes * sharded_params(p_dev, e_dev, shard, ep_fold), span_dp, 2 * stage_L, "all_reduce"
    )
    # each branch hides only where it applies (a share of 0 elsewhere takes nothing from the window)
    z3, z12 = zero >= 3, (zero >= 1) & (zero < 3)
    # prefetched a layer ahead (zero3_prefetch): of a micro-batch's collectives (3 per layer;
    # kept weights: 2) only the first all-gather and the last reduce-scatter have no compute beside them
    z3_share = np.where(keep, 1 - 1 / stage_L, 1 - 2 / (3 * stage_L)) if job.framework.zero.prefetch else job.dp_overlap
    # kept weights: once per step under a pipeline (within one micro-batch), else once per micro-batch
    once_per_step = keep & (pp > 1)
    z3_s = window.hide(
        np.where(keep, zero3_once * np.where(once_per_step, 1.0, n_micro), zero3_each * n_micro),
        z3_share * z3,
        np.where(once_per_step, micro_s, busy_s),
        "dp",
    ) + window.hide(replica_ar, job.dp_overlap * z3, last_bwd_s, "dp")
    # ZeRO-2 reduce-scatters every micro-batch's gradients, each under that micro-batch's last backward
    rs_calls = np.where(zero == 2, n_micro, 1.0)
    z12_s = (
        ring(dpc, 2 * grad_bytes, span_dp, 2, "all_reduce")
        if job.framework.zero.sync_after_backward
        else window.hide(
            rs_calls * ring(dpc, grad_bytes, span_dp, buckets, "reduce_scatter"),
            job.dp_overlap * z12,
            rs_calls * last_bwd_s,
            "dp",
        )
    ) + window.hide(
        ring(dpc, 2 * p12, span_dp),
        (job.dp_overlap if job.framework.zero.param_gather_overlap else 0.0) * z12,
        micro_s - last_bwd_s,
        "dp",
    )
    z0_s = window.hide(
        ring(dpc, 2 * grad_bytes, span_dp, 2 * buckets, "all_reduce"), job.dp_overlap * (zero == 0), last_bwd_s, "dp"
    )
    return np.asarray(np.where(z3, z3_s, np.where(z12, z12_s, z0_s)))


def _fold(group: np.ndarray, ep_fold: np.ndarray | float) -> np.ndarray:
    """The share of the experts' bytes a ring over ``group`` ranks moves when they are shared by
    group / ep_fold ranks: ((n_e - 1)/n_e) / ((n - 1)/n), 0 with one replica, 1 without EP."""
    n = np.maximum(np.asarray(group, dtype=np.float64), 1.0)
    n_e = np.maximum(n / ep_fold, 1.0)
    return np.where(n > 1, ((n_e - 1) / n_e) / np.maximum((n - 1) / n, 1e-30), 0.0)


def zero_gather_host_s(job: Job, *, zero: np.ndarray, dpc: np.ndarray, stage_L: np.ndarray) -> np.ndarray | float:
    """Host seconds of a ZeRO-1/2 weight gather done tensor by tensor (``zero_gather_copy_us``
    x the stage's tensors x dp; module docstring), 0 elsewhere."""
    if not job.framework.zero.gather_copy_s:
        return 0.0
    tensors = stage_L * weight_tensors_per_layer(job.model, job.framework.kernels.fused_projections) + 2.0
    return np.where((zero >= 1) & (zero < 3) & (dpc > 1), job.framework.zero.gather_copy_s * tensors * dpc, 0.0)
