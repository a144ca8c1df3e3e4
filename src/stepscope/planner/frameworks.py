"""Framework presets (data/frameworks.yaml): the framework properties a training framework has
without extra options, and the recompute policies it offers, so that `plan --framework NAME`
models that framework instead of the planner's Megatron-like defaults. A flag or record key given
explicitly wins over the preset."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from ..errors import ConfigError, refuse_unknown_keys
from .attention import KERNELS as ATTENTION_KERNELS
from .job import LOSS_BYTES, RECOMPUTE, SCHEDULES, TP_OVERLAP, ZERO3_GATHER, tp_overlap_needs_sp
from .search import KEY_ALIASES, parse_strategy

_PATH = "stepscope/data/frameworks.yaml"
SETTINGS = (
    "fused_projections",
    "kv_repeated",
    "zero3_prefetch",
    "sp_saves_gathered",
    "loss",
    "fp8_weight_cache",
    "fp8_saved_inputs",
    "eager_swiglu",
    "tp_overlap",
    "zero_gather_copy_us",
    "attention_kernel",
    "zero3_gather",
    "pipeline_split_cost",
    "grad_accum_bytes",
    "fp8_gain_thresholds",
    "sp_regather",
)
_NUMBERS = ("zero_gather_copy_us", "grad_accum_bytes")  # settings that are numbers >= 0 (the rest: names or true/false)


@dataclass(frozen=True)
class Framework:
    name: str
    description: str
    settings: dict[str, Any]  # record keys of planner/cli.py (tp_overlap: a TP_OVERLAP name)
    recompute: tuple[str, ...]  # RECOMPUTE names
    schedules: tuple[str, ...]  # SCHEDULES names; empty: no restriction
    source: str
    zero: tuple[int, ...] = ()  # the ZeRO stages it offers (0 plain DP .. 3 FSDP); empty: no restriction
    virtual_stages: bool = True  # interleaved pipeline stages (vpp > 1)


def _parse(name: str, e: Any) -> Framework:
    if not isinstance(e, dict):
        raise ConfigError(f"framework {name!r} is not a mapping", path=_PATH, fix="see the file's header")
    refuse_unknown_keys(
        e,
        ("description", "settings", "recompute", "schedules", "zero", "virtual_stages", "source"),
        path=_PATH,
        owner=f"framework {name}: ",
    )
    settings = dict(e.get("settings") or {})
    refuse_unknown_keys(settings, SETTINGS, path=_PATH, owner=f"framework {name} settings: ")
    checks: dict[str, tuple[str, ...]] = {
        "loss": tuple(LOSS_BYTES),
        "tp_overlap": TP_OVERLAP,
        "fp8_saved_inputs": ("fp8", "bf16"),
        "zero3_gather": ZERO3_GATHER,
        "attention_kernel": ATTENTION_KERNELS,
    }
    for key, value in settings.items():
        if key in _NUMBERS:
            ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < float("inf")
        else:
            ok = value in checks[key] if key in checks else isinstance(value, bool)
        if not ok:
            raise ConfigError(
                f"framework {name}: {key} cannot be {value!r}",
                path=_PATH,
                fix=f"one of {', '.join(checks[key])}"
                if key in checks
                else "a number >= 0"
                if key in _NUMBERS
                else "true or false",
            )
    policies = tuple(str(p) for p in e.get("recompute") or ())
    if not policies or any(p not in RECOMPUTE for p in policies):
        raise ConfigError(
            f"framework {name}: recompute must list policies of {', '.join(RECOMPUTE)}",
            path=_PATH,
            fix="e.g. recompute: [none, selective, full]",
        )
    schedules = tuple(str(p) for p in e.get("schedules") or ())
    if any(p not in SCHEDULES for p in schedules):
        raise ConfigError(
            f"framework {name}: schedules must be of {', '.join(SCHEDULES)}", path=_PATH, fix="e.g. schedules: [1f1b]"
        )
    zero = e.get("zero") or ()
    if not isinstance(zero, list | tuple) or any(isinstance(z, bool) or z not in (0, 1, 2, 3) for z in zero):
        raise ConfigError(
            f"framework {name}: zero must list ZeRO stages of 0, 1, 2, 3", path=_PATH, fix="e.g. zero: [0, 1]"
        )
    virtual = e.get("virtual_stages", True)
    if not isinstance(virtual, bool):
        raise ConfigError(f"framework {name}: virtual_stages cannot be {virtual!r}", path=_PATH, fix="true or false")
    return Framework(
        name,
        str(e.get("description", "")),
        settings,
        policies,
        schedules,
        str(e.get("source", "")),
        tuple(int(z) for z in zero),
        virtual,
    )


@lru_cache(maxsize=1)
def catalog() -> dict[str, Framework]:
    doc = yaml.safe_load(resources.files("stepscope.data").joinpath("frameworks.yaml").read_text(encoding="utf-8"))
    return {str(n): _parse(str(n), e) for n, e in (doc.get("frameworks") or {}).items()}


def by_name(name: str) -> Framework:
    fw = catalog().get(name.strip().lower())
    if fw is None:
        raise ConfigError(f"unknown framework {name!r}", fix=f"one of {', '.join(catalog())} (data/frameworks.yaml)")
    return fw


def apply(record: dict[str, Any], fw: Framework) -> dict[str, Any]:
    """The record with the preset's job settings where the record has none of its own (a value of
    None or "" counts as none; ``"fused_loss": false``, --unfused-loss, names the loss too;
    tp_overlap is a strategy property and is not set here)."""
    out = dict(record)
    own = {k for k, v in out.items() if v not in (None, "")} | ({"loss"} if out.get("fused_loss") is False else set())
    # Megatron's embedding-counting split, asked for, wins over a preset's split by cost
    own |= {"pipeline_split_cost"} if out.get("pipeline_split_embedding") is True else set()
    # and gathered inputs kept, asked for, win over a preset's re-gathers
    own |= {"sp_regather"} if out.get("sp_saves_gathered") is True else set()
    out.update({k: v for k, v in fw.settings.items() if k != "tp_overlap" and k not in own})
    return out


def check(fw: Framework, policy: str, schedule: str, zero: int = 0, vpp: int = 1) -> None:
    """A strategy's recompute policy, pipeline schedule, ZeRO stage and interleaving must be ones
    the framework offers."""
    if fw.zero and zero not in fw.zero:
        raise ConfigError(f"{fw.name} has no ZeRO stage {zero}", fix=f"its stages: zero={'|'.join(map(str, fw.zero))}")
    if vpp > 1 and not fw.virtual_stages:
        raise ConfigError(f"{fw.name} has no interleaved pipeline stages (vpp={vpp})", fix="use vpp=1")
    if policy not in fw.recompute:
        raise ConfigError(
            f"{fw.name} has no recompute policy {policy!r}", fix=f"its policies: {', '.join(fw.recompute)}"
        )
    if fw.schedules and schedule not in fw.schedules:
        raise ConfigError(
            f"{fw.name} has no pipeline schedule {schedule!r}", fix=f"its schedules: {', '.join(fw.schedules)}"
        )


def strategy(fw: Framework | None, text: str, *, add_tp_overlap: bool = True) -> str:
    """A strategy string (--evaluate, --baseline, a --batch record's) under the framework: its
    recompute policy checked against the framework's, and (``add_tp_overlap``: unless --tp-overlap
    was given) the framework's TP overlap added when the strategy states none and its mechanism
    works with the strategy's sequence parallelism (job.tp_overlap_needs_sp)."""
    if fw is None:
        return text
    s = parse_strategy(text)
    check(fw, RECOMPUTE[int(s["recompute"][0])], SCHEDULES[int(s["sched"][0])], int(s["zero"][0]), int(s["vpp"][0]))
    keys = {part.split("=", 1)[0].strip().lower() for part in text.split(",") if "=" in part}
    tp = fw.settings.get("tp_overlap", "none")
    allowed = int(s["sp"][0]) or not tp_overlap_needs_sp(TP_OVERLAP.index(tp))
    if add_tp_overlap and tp != "none" and allowed and "tp_overlap" not in {KEY_ALIASES.get(k, k) for k in keys}:
        return f"{text},tp_overlap={tp}" if text.strip() else f"tp_overlap={tp}"
    return text


def where(fw: Framework | None, conditions: str) -> str:
    """--where with the framework's recompute policies, schedules, ZeRO stages and (without
    interleaving) vpp=1 added, each unless --where constrains it itself."""
    if fw is None:
        return conditions
    parts = [conditions.strip()] if conditions.strip() else []
    if "recompute" not in conditions.lower():
        parts.append(f"recompute={'|'.join(fw.recompute)}")
    if fw.schedules and "sched" not in conditions.lower():
        parts.append(f"sched={'|'.join(fw.schedules)}")
    if fw.zero and not any(k in conditions.lower() for k in ("zero", "fsdp")):
        parts.append(f"zero={'|'.join(map(str, fw.zero))}")
    if not fw.virtual_stages and "vpp" not in conditions.lower():
        parts.append("vpp=1")
    return ",".join(parts)
