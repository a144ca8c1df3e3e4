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
from .job import LOSS_BYTES, RECOMPUTE, SCHEDULES, TP_OVERLAP, tp_overlap_needs_sp
from .search import KEY_ALIASES, parse_strategy

_PATH = "stepscope/data/frameworks.yaml"
SETTINGS = ("fused_projections", "loss", "fp8_weight_cache", "fp8_saved_inputs", "eager_swiglu", "tp_overlap", "zero_gather_copy_us")
_NUMBERS = ("zero_gather_copy_us",)  # settings that are numbers >= 0 (the rest: names or true/false)


@dataclass(frozen=True)
class Framework:
    name: str
    description: str
    settings: dict[str, Any]  # record keys of planner/cli.py (tp_overlap: a TP_OVERLAP name)
    recompute: tuple[str, ...]  # RECOMPUTE names
    schedules: tuple[str, ...]  # SCHEDULES names; empty: no restriction
    source: str


def _parse(name: str, e: Any) -> Framework:
    if not isinstance(e, dict):
        raise ConfigError(f"framework {name!r} is not a mapping", path=_PATH, fix="see the file's header")
    refuse_unknown_keys(e, ("description", "settings", "recompute", "schedules", "source"), path=_PATH, owner=f"framework {name}: ")
    settings = dict(e.get("settings") or {})
    refuse_unknown_keys(settings, SETTINGS, path=_PATH, owner=f"framework {name} settings: ")
    checks: dict[str, tuple[str, ...]] = {"loss": tuple(LOSS_BYTES), "tp_overlap": TP_OVERLAP, "fp8_saved_inputs": ("fp8", "bf16")}
    for key, value in settings.items():
        if key in _NUMBERS:
            ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < float("inf")
        else:
            ok = value in checks[key] if key in checks else isinstance(value, bool)
        if not ok:
            raise ConfigError(f"framework {name}: {key} cannot be {value!r}", path=_PATH,
                              fix=f"one of {', '.join(checks[key])}" if key in checks else "a number >= 0" if key in _NUMBERS else "true or false")
    policies = tuple(str(p) for p in e.get("recompute") or ())
    if not policies or any(p not in RECOMPUTE for p in policies):
        raise ConfigError(f"framework {name}: recompute must list policies of {', '.join(RECOMPUTE)}", path=_PATH,
                          fix="e.g. recompute: [none, selective, full]")
    schedules = tuple(str(p) for p in e.get("schedules") or ())
    if any(p not in SCHEDULES for p in schedules):
        raise ConfigError(f"framework {name}: schedules must be of {', '.join(SCHEDULES)}", path=_PATH, fix="e.g. schedules: [1f1b]")
    return Framework(name, str(e.get("description", "")), settings, policies, schedules, str(e.get("source", "")))


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
    out.update({k: v for k, v in fw.settings.items() if k != "tp_overlap" and k not in own})
    return out


def check(fw: Framework, policy: str, schedule: str) -> None:
    """A strategy's recompute policy and pipeline schedule must be ones the framework offers."""
    if policy not in fw.recompute:
        raise ConfigError(f"{fw.name} has no recompute policy {policy!r}", fix=f"its policies: {', '.join(fw.recompute)}")
    if fw.schedules and schedule not in fw.schedules:
        raise ConfigError(f"{fw.name} has no pipeline schedule {schedule!r}", fix=f"its schedules: {', '.join(fw.schedules)}")


def strategy(fw: Framework | None, text: str, *, add_tp_overlap: bool = True) -> str:
    """A strategy string (--evaluate, --baseline, a --batch record's) under the framework: its
    recompute policy checked against the framework's, and (``add_tp_overlap``: unless --tp-overlap
    was given) the framework's TP overlap added when the strategy states none and its mechanism
    works with the strategy's sequence parallelism (job.tp_overlap_needs_sp)."""
    if fw is None:
        return text
    s = parse_strategy(text)
    check(fw, RECOMPUTE[int(s["recompute"][0])], SCHEDULES[int(s["sched"][0])])
    keys = {part.split("=", 1)[0].strip().lower() for part in text.split(",") if "=" in part}
    tp = fw.settings.get("tp_overlap", "none")
    allowed = int(s["sp"][0]) or not tp_overlap_needs_sp(TP_OVERLAP.index(tp))
    if add_tp_overlap and tp != "none" and allowed and "tp_overlap" not in {KEY_ALIASES.get(k, k) for k in keys}:
        return f"{text},tp_overlap={tp}" if text.strip() else f"tp_overlap={tp}"
    return text


def where(fw: Framework | None, conditions: str) -> str:
    """--where with the framework's recompute policies and schedules added, each unless --where
    constrains it itself."""
    if fw is None:
        return conditions
    parts = [conditions.strip()] if conditions.strip() else []
    if "recompute" not in conditions.lower():
        parts.append(f"recompute={'|'.join(fw.recompute)}")
    if fw.schedules and "sched" not in conditions.lower():
        parts.append(f"sched={'|'.join(fw.schedules)}")
    return ",".join(parts)
