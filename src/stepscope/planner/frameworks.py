"""Framework presets (data/frameworks.yaml): the framework properties a training framework has
without extra options, and the recompute policies it offers, so that `plan --framework NAME`
models that framework instead of the planner's Megatron-like defaults. A setting given explicitly
(``--set``, ``--config``, a record's key) wins over the preset."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import ConfigError, refuse_unknown_keys
from ..yamlio import safe_load
from .config import BY_KEY, EXCLUSIVE, REQUIRES
from .knobs import parse
from .recompute import RECOMPUTE
from .strategy import Strategy
from .vocab import SCHEDULES

_PATH = "stepscope/data/frameworks.yaml"


@dataclass(frozen=True)
class Framework:
    name: str
    description: str
    settings: dict[str, Any]  # framework settings by key (config.BY_KEY), in the keys' units
    recompute: tuple[str, ...]  # RECOMPUTE names
    schedules: tuple[str, ...]  # SCHEDULES names; empty: no restriction
    source: str
    zero: tuple[int, ...] = ()  # the ZeRO stages it offers (0 plain DP .. 3 FSDP); empty: no restriction
    virtual_stages: bool = True  # interleaved pipeline stages (vpp > 1)
    pipeline_zero: tuple[int, ...] = ()  # the ZeRO stages it runs with pp > 1; empty: those of ``zero``

    def zero_stages(self, pp: int) -> tuple[int, ...]:
        """The ZeRO stages it runs with ``pp`` pipeline stages (empty: no restriction)."""
        return (self.pipeline_zero or self.zero) if pp > 1 else self.zero


def _parse(name: str, e: Any) -> Framework:
    if not isinstance(e, dict):
        raise ConfigError(f"framework {name!r} is not a mapping", path=_PATH, fix="see the file's header")
    refuse_unknown_keys(
        e,
        ("description", "settings", "recompute", "schedules", "zero", "pipeline_zero", "virtual_stages", "source"),
        path=_PATH,
        owner=f"framework {name}: ",
    )
    settings = dict(e.get("settings") or {})
    refuse_unknown_keys(settings, BY_KEY, path=_PATH, owner=f"framework {name} settings: ", see="docs/plan-settings.md")
    for key, value in settings.items():
        try:
            parse(BY_KEY[key], value)
        except ConfigError as exc:
            raise ConfigError(f"framework {name}: {exc.message}", path=_PATH, fix=exc.fix) from None
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
    zero, pipeline_zero = (_stages(name, key, e.get(key)) for key in ("zero", "pipeline_zero"))
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
        zero,
        virtual,
        pipeline_zero,
    )


def _stages(name: str, key: str, value: Any) -> tuple[int, ...]:
    """A list of ZeRO stages from the file (0 plain data parallelism .. 3 FSDP)."""
    stages = value or ()
    if not isinstance(stages, list | tuple) or any(isinstance(z, bool) or z not in (0, 1, 2, 3) for z in stages):
        raise ConfigError(
            f"framework {name}: {key} must list ZeRO stages of 0, 1, 2, 3", path=_PATH, fix=f"e.g. {key}: [0, 1]"
        )
    return tuple(int(z) for z in stages)


@lru_cache(maxsize=1)
def catalog() -> dict[str, Framework]:
    doc = safe_load(resources.files("stepscope.data").joinpath("frameworks.yaml").read_text(encoding="utf-8"))
    return {str(n): _parse(str(n), e) for n, e in (doc.get("frameworks") or {}).items()}


def by_name(name: str) -> Framework:
    fw = catalog().get(name.strip().lower())
    if fw is None:
        raise ConfigError(f"unknown framework {name!r}", fix=f"one of {', '.join(catalog())} (data/frameworks.yaml)")
    return fw


def default_for(hardware_name: str) -> str:
    """The framework a search assumes when none is named: MaxText on TPUs, MindSpeed-LLM on Ascend
    NPUs, Megatron-LM elsewhere (the most used framework on each: every row it returns is then
    runnable as printed)."""
    name = hardware_name.upper()
    return "maxtext" if name.startswith("TPU") else "mindspeed" if name.startswith("ASCEND") else "megatron"


def apply(record: dict[str, Any], fw: Framework) -> dict[str, Any]:
    """The record with the preset's settings where the record has none of its own (a value of None
    or "" counts as none). A setting the record turns on wins over the preset's exclusive other
    (config.EXCLUSIVE: Megatron's embedding-counting split over a preset's split by cost, gathered
    inputs kept over a preset's re-gathers), and a preset's setting whose requirement the record
    turns off is left out (config.REQUIRES: TP overlap that needs sequence parallelism)."""
    own = {k for k, v in record.items() if v not in (None, "")}
    preset = {k: v for k, v in fw.settings.items() if k not in own}
    for one, other, _ in EXCLUSIVE:
        for key, excluded in ((one, other), (other, one)):
            if key in own and parse(BY_KEY[key], record[key]) is True:
                preset.pop(excluded, None)
    for r in REQUIRES:
        turned_off = r.needs in own and not parse(BY_KEY[r.needs], record[r.needs])
        if turned_off and r.key in preset and r.when(parse(BY_KEY[r.key], preset[r.key])):
            preset.pop(r.key)
    return {**record, **preset}


def check(fw: Framework, policy: str, schedule: str, zero: int = 0, vpp: int = 1, pp: int = 1) -> None:
    """A strategy's recompute policy, pipeline schedule, ZeRO stage (with its pipeline) and
    interleaving must be ones the framework offers."""
    if fw.zero and zero not in fw.zero:
        raise ConfigError(f"{fw.name} has no ZeRO stage {zero}", fix=f"its stages: zero={'|'.join(map(str, fw.zero))}")
    stages = fw.zero_stages(pp)  # with pp = 1 the same as fw.zero, checked above
    if stages and zero not in stages:
        raise ConfigError(
            f"{fw.name} runs no ZeRO stage {zero} with pipeline parallelism (pp={pp})",
            fix=f"with pp > 1 its stages: zero={'|'.join(map(str, stages))}",
        )
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


def check_strategy(fw: Framework | None, strategy: Strategy) -> Strategy:
    """The strategy, its recompute policy, schedule, ZeRO stage and interleaving checked against
    the framework's (none: no restriction)."""
    if fw is not None:
        check(fw, RECOMPUTE[strategy.recompute], SCHEDULES[strategy.sched], strategy.zero, strategy.vpp, strategy.pp)
    return strategy


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
