"""How a framework setting is declared (config.py): one dataclass field whose metadata holds its
record key, unit, help, source, bounds and how the ``settings`` report shows it; its type (``bool``,
``float``, ``int``, a ``Literal`` of choices, optionally ``| None``) is the field's annotation.

From that one declaration the planner parses values (``--set key=value``, ``--config`` files,
``--batch`` records, ``--calibrate`` CSV cells, framework presets: :func:`parse`), validates a
configuration built in Python (:class:`Checked`), reports what a prediction assumed (settings.py)
and writes the knob table of docs/plan-settings.md (settings_doc.py). A value is given in the
key's unit (``zero_gather_copy_us`` in microseconds) and held in the field's (``gather_copy_s``):
field = key value x ``scale``; the report converts back with ``unscale``.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin

from ..errors import ConfigError

When = Literal["always", "changed", "fp8", "fp8 changed", "moe"]
# a setting's words in the ``assumed:`` line: (its reported value, all reported settings) -> text
Says = Callable[[Any, Mapping[str, Any]], str | None]


@dataclass(frozen=True, kw_only=True)
class Report:
    """How a setting shows in a prediction's ``settings`` (JSON) and its ``assumed:`` line.
    ``rank``: its place among the JSON keys; ``when``: always, when it differs from its default
    (``changed``: a true flag, a number other than the default; arrays of a calibration grid never),
    only with fp8 precision, or only for MoE models; ``key``: the JSON key when not the setting's;
    ``as_run``: the value as the job runs it (a function of the Job), else the setting's own;
    ``says``: its words in the ``assumed:`` line, from the JSON settings (None: nothing to say),
    at place ``line``."""

    rank: int
    when: When = "changed"
    key: str = ""
    as_run: Callable[[Any], Any] | None = None
    says: Says | None = None
    line: int = 0


@dataclass(frozen=True, kw_only=True)
class Meta:
    key: str
    help: str
    source: str = ""
    unit: str = ""
    example: str = ""  # a value for the fix of an error (default: the default)
    ge: float | None = None  # bounds on the value in the key's unit
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    scale: float = 1.0  # field value = key value x scale
    unscale: float = 1.0  # key value = field value x unscale
    report: Report | None = None


def on(text: str) -> Says:
    """The words a true flag adds to the ``assumed:`` line (Report.says)."""
    return lambda v, st: text if v else None


def knob(default: Any, **meta: Any) -> Any:
    """A setting's dataclass field: its default and :class:`Meta` (key, help, source, unit, ...)."""
    return field(default=default, metadata={"knob": Meta(**meta)})


Kind = Literal["bool", "float", "int", "choice"]


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One declared setting: the group and attribute it lives in, its key and everything Meta says."""

    group: str
    name: str
    kind: Kind
    choices: tuple[str, ...]
    optional: bool
    default: Any
    meta: Meta

    @property
    def key(self) -> str:
        return self.meta.key

    def type_text(self) -> str:
        """The type as the docs table shows it."""
        text = {"bool": "true/false", "float": "number", "int": "whole number"}.get(self.kind)
        text = text or " / ".join(c or '""' for c in self.choices)
        return text + (" or none" if self.optional and self.kind != "choice" else "")

    def allowed(self) -> str:
        """What a value may be, in words (for errors and the docs)."""
        m = self.meta
        if self.kind == "bool":
            return "true or false"
        if self.kind == "choice":
            return "one of " + ", ".join(c or '""' for c in self.choices)
        what = "a whole number" if self.kind == "int" else "a number"
        what = f"a finite {what[2:]}" if m.lt == math.inf else what
        lo = f">= {m.ge:g}" if m.ge is not None else f"> {m.gt:g}" if m.gt is not None else ""
        hi = f"<= {m.le:g}" if m.le is not None else f"< {m.lt:g}" if m.lt not in (None, math.inf) else ""
        bounds = " and ".join(b for b in (lo, hi) if b)
        return f"{what} {bounds}".strip() + (f" ({m.unit})" if m.unit else "")


def _kind(hint: Any) -> tuple[Kind, tuple[str, ...], bool]:
    """(kind, choices, optional) of a field's annotation."""
    args = get_args(hint)
    optional = get_origin(hint) in (Union, types.UnionType) and type(None) in args
    if optional:
        hint = next(a for a in args if a is not type(None))
    if get_origin(hint) is Literal:
        return "choice", tuple(str(a) for a in get_args(hint)), optional
    kinds: dict[Any, Kind] = {bool: "bool", float: "float", int: "int"}
    return kinds[hint], (), optional


_DECLARED: dict[type, tuple[Setting, ...]] = {}


def settings_of(group_cls: type) -> tuple[Setting, ...]:
    """The settings a group dataclass declares, in declaration order (``group`` left blank: the
    configuration that holds the group names it, config.SETTINGS)."""
    if group_cls in _DECLARED:
        return _DECLARED[group_cls]
    hints = typing.get_type_hints(group_cls)
    out = []
    for f in dataclasses.fields(group_cls):
        kind, choices, optional = _kind(hints[f.name])
        out.append(
            Setting(
                group="",
                name=f.name,
                kind=kind,
                choices=choices,
                optional=optional,
                default=f.default,
                meta=f.metadata["knob"],
            )
        )
    _DECLARED[group_cls] = tuple(out)
    return _DECLARED[group_cls]


def _fix(s: Setting) -> str:
    example = s.meta.example or (str(s.default).lower() if isinstance(s.default, bool) else f"{s.default}")
    return f"e.g. --set {s.key}={example}"


def _refuse(s: Setting, v: Any) -> ConfigError:
    shown = f"{v:g}" if isinstance(v, float) else repr(v)
    return ConfigError(f"{s.key} must be {s.allowed()}, not {shown}", fix=_fix(s))


def _in_bounds(m: Meta, x: float) -> bool:
    """Within the bounds (a NaN is not)."""
    return not (
        math.isnan(x)
        or (m.ge is not None and not x >= m.ge)
        or (m.gt is not None and not x > m.gt)
        or (m.le is not None and not x <= m.le)
        or (m.lt is not None and not x < m.lt)
    )


def _number(s: Setting, v: Any) -> float:
    if isinstance(v, bool):
        raise _refuse(s, v)
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise _refuse(s, v) from None
    if s.kind == "int" and not (math.isfinite(x) and x == int(x)):
        raise _refuse(s, v)
    if not _in_bounds(s.meta, x):
        raise _refuse(s, x)
    return x


def parse(s: Setting, v: Any) -> Any:
    """A value as a record, a CSV cell, ``--set`` or a preset gives it (in the key's unit) -> the
    field's value; anything that is not one of the allowed values is one ConfigError naming the
    key and what it allows (never Python's truthiness: the string "false" is false)."""
    if v is None or (isinstance(v, str) and not v.strip()):
        if s.optional:
            return None
        if "" in s.choices:  # a choice whose blank is one of its values (no attention kernel named)
            return ""
        raise _refuse(s, v)
    if s.kind == "bool":
        if isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)):
            return bool(v)
        if isinstance(v, str) and v.strip().lower() in ("true", "false", "1", "0"):
            return v.strip().lower() in ("true", "1")
        raise _refuse(s, v)
    if s.kind == "choice":
        text = str(v).strip().lower()
        if isinstance(v, bool) or text not in s.choices:
            raise _refuse(s, v)
        return text
    x = _number(s, v)
    return int(x) if s.kind == "int" else x * s.meta.scale


def check(s: Setting, value: Any) -> None:
    """A field's value (in the field's unit) as built in Python: its type and bounds."""
    if value is None and s.optional:
        return
    ok = {
        "bool": lambda v: isinstance(v, bool),
        "choice": lambda v: v in s.choices,
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    }[s.kind](value)
    if not ok:
        raise _refuse(s, value)
    if s.kind in ("int", "float") and not _in_bounds(s.meta, float(value) * s.meta.unscale):
        raise _refuse(s, float(value) * s.meta.unscale)


class Checked:
    """A group of settings that checks every field against its declaration when it is built."""

    def __post_init__(self) -> None:
        for s in settings_of(type(self)):
            check(s, getattr(self, s.name))
