"""A strategy's layout as the cost model reads it (cost.py): the parallel degrees as float arrays,
the groups they imply and the micro-batches a step runs, one entry per configuration."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .job import Job
from .vocab import DUALPIPE, DUALPIPEV


def opt(s: dict[str, np.ndarray], key: str, like: np.ndarray) -> np.ndarray:
    """An optional strategy field as float64 (absent: 0, "off")."""
    v = s.get(key)
    return np.zeros(like.shape) if v is None else v.astype(np.float64)


@dataclass(frozen=True, kw_only=True)
class Layout:
    """``s`` the strategy arrays as given; degrees (``etp`` resolved: 0 = tp); ``dpc`` = dp x cp
    ranks that share weights (context-parallel ranks compute gradients on other tokens, so gradient
    reduction and ZeRO sharding run over them too: Megatron's data-parallel group "with context
    parallel", torchtitan's dp_shard x cp FSDP mesh); ``shard`` the group ZeRO shards over (HSDP:
    hsdp x cp); ``n_micro`` micro-batches per replica per step and ``mb`` the sequences in each, as
    run; ``keep`` FSDP's gathered weights kept from forward to backward; ``dual`` DualPipe with a
    pipeline; ``tp_mode`` the TP_OVERLAP code; ``ep_on`` the EP exchange overlaps another
    micro-batch (ep_overlap, or a DualPipe schedule pairing forward and backward chunks);
    ``ep_fold`` = ep x etp / tp, how many times fewer ranks share the experts' parameters."""

    s: dict[str, np.ndarray]
    tp: np.ndarray
    pp: np.ndarray
    vpp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    dpc: np.ndarray
    shard: np.ndarray
    zero: np.ndarray
    rc: np.ndarray
    sched: np.ndarray
    offload: np.ndarray
    keep: np.ndarray
    n_micro: np.ndarray
    mb: np.ndarray
    dual: np.ndarray
    tp_mode: np.ndarray
    ep_on: np.ndarray
    ep_fold: np.ndarray


def layout(job: Job, s: dict[str, np.ndarray]) -> Layout:
    """The layout of the strategies ``s``. Pipelines split a replica's batch into at least pp
    micro-batches, unless the strategy states its gradient accumulation (ga > 0): then exactly
    that many, of global batch / (dp x ga) sequences."""
    tp, pp, vpp, dp, cp, ep = (s[k].astype(np.float64) for k in ("tp", "pp", "vpp", "dp", "cp", "ep"))
    zero, mb = s["zero"], s["mb"].astype(np.float64)
    etp = opt(s, "etp", tp)
    etp = np.where(etp > 0, etp, tp)
    hsdp = opt(s, "hsdp", tp)
    dpc = dp * cp
    sched = opt(s, "sched", tp).astype(np.int64)
    ga = opt(s, "ga", tp)
    n_micro = np.where(
        ga > 0, ga, np.where(pp > 1, np.maximum(job.global_batch / (dp * mb), pp), job.global_batch / (dp * mb))
    )
    dual = (sched == DUALPIPE) & (pp > 1)
    return Layout(
        s=s,
        tp=tp,
        pp=pp,
        vpp=vpp,
        dp=dp,
        cp=cp,
        ep=ep,
        etp=etp,
        dpc=dpc,
        shard=np.where((zero >= 3) & (hsdp > 0) & (hsdp < dp), hsdp * cp, dpc),
        zero=zero,
        rc=s["recompute"].astype(np.int64),
        sched=sched,
        offload=opt(s, "offload", tp) > 0,
        keep=(opt(s, "keep_params", tp) > 0) & (zero >= 3),
        n_micro=n_micro,
        mb=np.where((pp > 1) | (ga > 0), job.global_batch / (dp * n_micro), mb),
        dual=dual,
        tp_mode=opt(s, "tp_overlap", tp).astype(np.int64),
        ep_on=(opt(s, "ep_overlap", tp) > 0) | dual | (sched == DUALPIPEV),
        ep_fold=ep * etp / tp,
    )
