"""Op-class scales from the profile of one run (``plan --from-analysis REPORT --baseline STRATEGY``).

A profile says how long each op class took in the traced step; the planner says how long the
same class takes in the same strategy (the baseline: the traced run's). Where they differ, the
class's scale is set so that the planner's time equals the profile's:

- ``linear_attention`` kernels (GLA, Gated DeltaNet, Mamba scans; analysis/xla/ops.py's
  category) -> ``linear_attn_scale``;
- ``grouped_gemm`` kernels (Megablox gmm / tgmm, ragged dots: the routed experts) -> ``expert_scale``;
- ``all_to_all`` collectives (the MoE token exchange, whole kernel time) -> ``ep_scale``;
- the step's exposed communication -> ``comm_scale``, only where the trace gave no
  bandwidth-based scale (a report of one rank has no matched collectives, from_trace.py).

The compute classes' times are linear in 1/scale (compute.py divides their FLOPs by the class's
rate x scale), so the planner's time of a class is its compute time now minus its compute time
without the class (scale -> infinity), and the scale that matches the profile is
scale x model time / traced time. The exchange's time (exposed + hidden) is linear in
``ep_scale``. Exposure is not linear (the window hides what fits under compute): ``comm_scale``
is the value of a log grid (1/16 .. 16 of the current, 2^(1/24) apart) whose exposed transfers
are nearest the trace's, with ``ep_scale`` re-solved at each value so the exchange still matches;
none where the nearest is at the grid's edge or more than 25% off (a wait the links do not
explain: a straggler, the host).

Times are per step on one device: the trace's median step (the kernel time of each category /
the rank's devices; TPU TensorCores are JAX devices, each doing its half of a chip's work in the
chip's step time) and the planner's step on one device. Assumption: the baseline given is the
strategy the trace ran; where the model's compute with the op-class scales is more than 2x off the
traced compute, it is not, and nothing is set (profile_scales)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .cost import evaluate
from .job import Job
from .strategy import Strategy

# the trace's category -> the calibration field it sets
COMPUTE_CLASSES = {"linear_attention": "linear_attn_scale", "grouped_gemm": "expert_scale"}
EXCHANGE = "all_to_all"
EXPOSED_KEYS = ("tp_s", "ep_s", "dp_s", "cp_s", "pp_p2p_s")
WITHOUT = 1e12  # a class's scale at which its time is nil (0 x inf would be NaN)
COMM_GRID = 2.0 ** (np.arange(-96, 97) / 24)  # x the current comm_scale: 1/16 .. 16
# the profile is used only where the model's compute is within this factor of the trace's
COMPARABLE = 2.0
# the exposure matched no closer than this (relative) is not the links' doing
REACH = 0.25
# a scale this far from the prior means the baseline is not the traced run (or the category
# holds other kernels): kept, but flagged
PLAUSIBLE = (1e-3, 1e3)


def _cal(job: Job, name: str) -> float:
    return float(getattr(job.calibration, name))


def class_seconds(job: Job, s: dict[str, np.ndarray]) -> dict[str, float]:
    """The planner's seconds per step on a device of each op class, at the job's current scales
    (module docstring); 0 for a class the model or strategy does not have."""
    out: dict[str, float] = {}
    now = float(evaluate(job, s, keys=("compute_s",))["compute_s"][0])
    for cat, field in COMPUTE_CLASSES.items():
        without = float(evaluate(job.calibrated(**{field: WITHOUT}), s, keys=("compute_s",))["compute_s"][0])
        out[cat] = max(now - without, 0.0)
    r = evaluate(job, s, keys=("ep_s", "hidden_ep_s"))
    out[EXCHANGE] = float(r["ep_s"][0] + r["hidden_ep_s"][0])
    return out


def _exposed_s(job: Job, s: dict[str, np.ndarray]) -> np.ndarray:
    r = evaluate(job, s, keys=EXPOSED_KEYS)
    return np.asarray(sum(r[k] for k in EXPOSED_KEYS))


def _comm_fit(job: Job, strategy: Strategy, exposed_s: float, a2a_s: float | None) -> tuple[float, float | None] | str:
    """(comm_scale, ep_scale or None) whose exposed transfers are nearest ``exposed_s`` (ties to
    the current scale), ep_scale re-solved at each grid value so the exchange keeps its traced time
    ``a2a_s``; or why none is set: the model exposes nothing at any scale, or the nearest is at the
    grid's edge or more than REACH off (the trace's exposure is not the links' doing)."""
    n = COMM_GRID.size
    s = {k: np.full(n, v[0]) for k, v in strategy.arrays().items()}
    comm = _cal(job, "comm_scale") * COMM_GRID
    grid_job = job.calibrated(comm_scale=comm)
    ep = None
    if a2a_s:
        r = evaluate(grid_job, s, keys=("ep_s", "hidden_ep_s"))
        t_ep = r["ep_s"] + r["hidden_ep_s"]
        ep = np.where(t_ep > 0, _cal(job, "ep_scale") * a2a_s / np.maximum(t_ep, 1e-30), _cal(job, "ep_scale"))
        grid_job = grid_job.calibrated(ep_scale=ep)
    exposed = _exposed_s(grid_job, s)
    if not np.any(exposed > 0):
        return "the model exposes no communication in the baseline at any link speed"
    off = np.abs(np.log(np.maximum(exposed, 1e-12) / exposed_s))
    i = int(np.lexsort((np.abs(np.log(COMM_GRID)), np.round(off, 9)))[0])
    if i in (0, n - 1) or off[i] > np.log1p(REACH):
        return (
            f"no link speed within {COMM_GRID[0]:g}-{COMM_GRID[-1]:g}x makes the model expose the traced "
            f"{exposed_s:.4g} s (nearest {exposed[i]:.4g} s): the wait is not the links' (a straggler, the host)"
        )
    return float(comm[i]), (float(ep[i]) if ep is not None else None)


def profile_scales(
    job: Job,
    strategy: Strategy,
    traced_s: Mapping[str, float],
    exposed_comm_s: float | None = None,
    compute_s: float | None = None,
) -> tuple[dict[str, float], dict[str, Any]]:
    """The calibration fields that make the baseline's op classes take the traced times, and what
    was compared: per class the traced and the model's seconds (before), and the classes kept at
    their scale with the reason. ``traced_s``: seconds per step on a device by category
    (``linear_attention``, ``grouped_gemm``, ``all_to_all``); ``exposed_comm_s``: the traced step's
    exposed communication, given only when ``comm_scale`` is to be set from it; ``compute_s``: the
    traced step's compute. Nothing is set where the model's compute with the op-class scales is
    not within COMPARABLE of the traced compute: the baseline (or the job) does not describe the
    traced run, and what hides under the compute would not be comparable either."""
    s = strategy.arrays()
    changes, compared, kept = _class_changes(job, s, traced_s)
    if exposed_comm_s and exposed_comm_s > 0:
        compared["exposed_comm"] = {
            "traced_s": exposed_comm_s,
            "model_s": float(_exposed_s(job.calibrated(**changes), s)[0]),
        }
    model_compute = float(evaluate(job.calibrated(**changes), s, keys=("compute_s",))["compute_s"][0])
    if compute_s and not 1 / COMPARABLE <= model_compute / compute_s <= COMPARABLE:
        why = (
            f"the model's baseline computes {model_compute / compute_s:.2g}x the traced step's compute: it does not "
            "describe the traced run (check --baseline, --model, --devices, --global-batch and --seq-len)"
        )
        return {}, {"op_classes": compared, "op_classes_kept": {k: why for k in compared}}
    if "exposed_comm" in compared:
        a2a = traced_s.get(EXCHANGE) if "ep_scale" in changes else None
        found = _comm_fit(job.calibrated(**changes), strategy, float(exposed_comm_s or 0.0), a2a)
        if isinstance(found, str):
            kept["exposed_comm"] = found
        else:
            changes["comm_scale"] = found[0]
            if found[1] is not None:
                changes["ep_scale"] = found[1]
    info: dict[str, Any] = {"op_classes": compared}
    if kept:
        info["op_classes_kept"] = kept
    if odd := sorted(k for k, v in changes.items() if not PLAUSIBLE[0] <= v <= PLAUSIBLE[1]):
        info["op_scales_implausible"] = odd
    return changes, info


def _class_changes(
    job: Job, s: dict[str, np.ndarray], traced_s: Mapping[str, float]
) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, str]]:
    """(the op-class scales, traced vs model seconds by class, the classes kept and why)."""
    model = class_seconds(job, s)
    changes: dict[str, float] = {}
    compared: dict[str, dict[str, float]] = {}
    kept: dict[str, str] = {}
    for cat, field in {**COMPUTE_CLASSES, EXCHANGE: "ep_scale"}.items():
        t = traced_s.get(cat) or 0.0
        if t <= 0:
            continue
        compared[cat] = {"traced_s": t, "model_s": model[cat]}
        if model[cat] <= 0:
            kept[cat] = "the baseline has no such work (check --baseline and the model)"
            continue
        changes[field] = _cal(job, field) * (model[cat] / t if field != "ep_scale" else t / model[cat])
    return changes, compared, kept
