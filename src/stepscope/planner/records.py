"""The records a plan is made of: one JSON-ready dict per configuration evaluated (the strategy as
run, with its recompute policy, schedule and TP overlap mechanism by name; its step, memory and
time parts), from the cost model's arrays (cost.evaluate)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .bottleneck import BOTTLENECKS
from .recompute import RECOMPUTE
from .strategy import FIELDS
from .vocab import SCHEDULES, TP_OVERLAP
from .window import HIDDEN_PARTS

_MEM = ("weights_gb", "grads_gb", "optimizer_gb", "activations_gb", "buffers_gb", "reserve_gb")
_TIME = ("compute_s", "tp_s", "ep_s", "dp_s", "cp_s", "bubble_s", "pp_p2p_s", "optimizer_s", "offload_s", "host_s")


def records(
    strategies: dict[str, np.ndarray], results: dict[str, np.ndarray], dense: bool = False
) -> list[dict[str, Any]]:
    """One JSON-ready record per configuration. ``dense``: the model has no experts, so Megatron's
    ``layernorm_moe_act`` recompute is its ``--recompute-modules layernorm`` and is named so."""
    out = []
    for i in range(len(strategies["tp"])):
        strat: dict[str, int | float | str] = {
            k: int(strategies[k][i]) for k in FIELDS if k not in ("recompute", "sched", "tp_overlap")
        }
        policy = RECOMPUTE[int(strategies["recompute"][i])]
        strat["recompute"] = "layernorm" if dense and policy == "layernorm_moe_act" else policy
        strat["sched"] = SCHEDULES[int(strategies["sched"][i])]
        strat["tp_overlap"] = TP_OVERLAP[int(strategies["tp_overlap"][i])]
        # as run: a stated ga sets mb, a pipeline splits the batch into at least pp micro-batches
        mb = float(results["micro_batch"][i])
        strat["mb"] = int(mb) if mb.is_integer() else round(mb, 3)
        strat["ga"] = round(float(results["grad_accum"][i]))  # the stated ga, or derived from the batch
        if not strat["etp"]:
            strat["etp"] = strat["tp"]  # the default: experts sharded like the dense layers
        if not strat["hsdp"] and strat["zero"] == 3:
            strat["hsdp"] = strat["dp"]  # plain FSDP: one shard group over all of dp
        out.append(
            {
                "strategy": strat,
                "step_time_s": float(results["step_s"][i]),
                "tokens_per_s_per_device": float(results["tokens_per_s_per_device"][i]),
                "mfu": float(results["mfu"][i]),
                "hfu": float(results["hfu"][i]),
                "tflops_per_device": float(results["tflops_per_device"][i]),
                "memory_gb": {**{k[:-3]: float(results[k][i]) for k in _MEM}, "total": float(results["total_gb"][i])},
                "fits": bool(results["fits"][i]),
                "headroom_gb": float(results["headroom_gb"][i]),
                "bottleneck": BOTTLENECKS[int(results["bottleneck"][i])],
                "grad_accum": float(results["grad_accum"][i]),
                "time_s": {k[:-2]: float(results[k][i]) for k in _TIME},
                # seconds of each transfer hidden under compute (time_s holds what stays exposed)
                "hidden_s": {p: float(results[f"hidden_{p}_s"][i]) for p in HIDDEN_PARTS},
            }
        )
    return out
