"""The framework configuration a plan assumes: a frozen, nested record of groups (precision,
kernels, loss, fp8, pipeline, ZeRO/FSDP, TP/SP, MoE, host, memory) whose every setting is declared
once, with its record key, type, unit, default, help and source (config_kernels.py,
config_parallel.py; knobs.py says what the metadata means).

``--set key=value``, ``--config FILE``, ``--framework`` presets (data/frameworks.yaml), ``--batch``
records and ``--calibrate`` columns all name settings by these keys; :meth:`FrameworkConfig.from_keys`
parses them, the JSON ``settings`` and the ``assumed:`` line (settings.py) and the knob table of
docs/plan-settings.md (settings_doc.py) are generated from the same declaration."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from ..errors import ConfigError
from .config_kernels import Fp8, Kernels, Loss, Pipeline, PrecisionSettings
from .config_parallel import Host, Memory, Moe, TensorParallel, Zero
from .knobs import Setting, parse, settings_of
from .vocab import TP_OVERLAP, tp_overlap_needs_sp

# settings that cannot both be on: (one, the other, why)
EXCLUSIVE = (
    (
        "sp_saves_gathered",
        "sp_regather",
        "sequence parallelism either keeps its gathered inputs (torchtitan) or gathers them again in "
        "backward (Megatron, nanotron), not both",
    ),
    (
        "pipeline_split_embedding",
        "pipeline_split_cost",
        "the pipeline split is either by layers with the embedding and loss counted (Megatron) or by "
        "cost (nanotron), not both",
    ),
)


@dataclass(frozen=True, kw_only=True)
class Requirement:
    """``key`` at a value ``when`` accepts needs the boolean setting ``needs`` on; ``why`` (with
    ``{value}``, the key's value) and ``fix`` are the error's words."""

    key: str
    when: Callable[[Any], bool]
    needs: str
    why: str
    fix: str


# settings that need another on
REQUIRES = (
    Requirement(
        key="tp_overlap",
        when=lambda mode: tp_overlap_needs_sp(TP_OVERLAP.index(mode)),
        needs="sequence_parallel",
        why="tp_overlap {value} (it splits all-gathers and reduce-scatters) needs sequence parallelism",
        fix="drop sequence_parallel=false, or use tp_overlap=bwd",
    ),
)


@dataclass(frozen=True, kw_only=True)
class FrameworkConfig:
    """Everything the cost model reads about how the framework runs the job, beyond the strategy."""

    precision: PrecisionSettings = field(default_factory=PrecisionSettings)
    kernels: Kernels = field(default_factory=Kernels)
    loss: Loss = field(default_factory=Loss)
    fp8: Fp8 = field(default_factory=Fp8)
    pipeline: Pipeline = field(default_factory=Pipeline)
    zero: Zero = field(default_factory=Zero)
    tp: TensorParallel = field(default_factory=TensorParallel)
    moe: Moe = field(default_factory=Moe)
    host: Host = field(default_factory=Host)
    memory: Memory = field(default_factory=Memory)

    def __post_init__(self) -> None:
        for one, other, why in EXCLUSIVE:
            if self.value(one) and self.value(other):
                raise ConfigError(why, fix=f"drop {one} or {other}")
        for r in REQUIRES:
            if r.when(self.value(r.key)) and not self.value(r.needs):
                raise ConfigError(r.why.format(value=self.value(r.key)), fix=r.fix)

    @classmethod
    def from_keys(cls, values: Mapping[str, Any]) -> FrameworkConfig:
        """The configuration the setting keys of a record, a CSV row, ``--set`` or a file give, in
        their keys' units (absent, None or blank: the default); other keys are not read here."""
        return cls().with_keys({k: v for k, v in values.items() if k in BY_KEY and not _blank(v)})

    def with_keys(self, values: Mapping[str, Any]) -> FrameworkConfig:
        """This configuration with the settings named by key replaced (values in the keys' units,
        parsed and checked as a record's are)."""
        unknown = sorted(str(k) for k in values if k not in BY_KEY)
        if unknown:
            raise ConfigError(f"unknown setting {', '.join(unknown)}", fix=f"settings: {', '.join(BY_KEY)}")
        by_group: dict[str, dict[str, Any]] = {}
        for key, v in values.items():
            s = BY_KEY[key]
            by_group.setdefault(s.group, {})[s.name] = parse(s, v)
        return dataclasses.replace(
            self, **{g: dataclasses.replace(getattr(self, g), **kw) for g, kw in by_group.items()}
        )

    def value(self, key: str) -> Any:
        """A setting's value in its field's unit (``zero_gather_copy_us`` -> seconds)."""
        s = BY_KEY[key]
        return getattr(getattr(self, s.group), s.name)

    def key_value(self, key: str) -> Any:
        """A setting's value in its key's unit, as a record gives it."""
        v = self.value(key)
        return v * BY_KEY[key].meta.unscale if isinstance(v, float) else v


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


@cache
def _groups() -> tuple[tuple[str, type], ...]:
    hints = typing.get_type_hints(FrameworkConfig)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(FrameworkConfig))


SETTINGS: tuple[Setting, ...] = tuple(
    dataclasses.replace(s, group=group) for group, cls in _groups() for s in settings_of(cls)
)
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
