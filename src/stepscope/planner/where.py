"""Search constraints (``plan --where``): keep the configurations whose fields match.

``"tp=8,pp=1|2,recompute=selective|full,cp<=2"``: comma-separated conditions, all of which must
hold. ``key=v1|v2`` keeps the listed values (named as ``--evaluate`` names them: recompute
policies, schedules, true/false, and the same key aliases); ``key<=n`` and ``key>=n`` bound a
numeric field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .strategy import KEY_ALIASES, STRATEGY_DEFAULTS, parse_value

_COND = re.compile(r"^([a-z_]+)\s*(<=|>=|=)\s*(.+)$")
_NUMERIC = ("tp", "pp", "vpp", "dp", "cp", "ep", "etp", "zero", "hsdp", "mb", "ga")


@dataclass(frozen=True)
class Condition:
    field: str
    op: str  # "in", "<=" or ">="
    values: tuple[int, ...]


def parse_where(text: str) -> list[Condition]:
    """The conditions of a ``--where`` string; a bad item is a one-line error naming it."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = _COND.match(part.lower())
        if not m:
            raise ConfigError(
                f"bad --where item {part!r}", fix="use key=value, key=v1|v2, key<=n or key>=n, e.g. tp=8,pp<=4"
            )
        key, op, rhs = m.groups()
        if op != "=" and (KEY_ALIASES.get(key, key) not in _NUMERIC or "|" in rhs):
            raise ConfigError(
                f"--where {part!r}: only a numeric field is bounded, by one number",
                fix=f"e.g. pp<=4; numeric fields: {', '.join(_NUMERIC)}",
            )
        coded = [parse_value(key, v.strip(), part) for v in rhs.split("|")]
        field = coded[0][0]
        out.append(Condition(field, "in" if op == "=" else op, tuple(code for _, code in coded)))
    return out


def mask(strategies: dict[str, np.ndarray], conditions: list[Condition]) -> np.ndarray:
    """The configurations that meet every condition. A field the strategies lack reads as its
    default (as ``--evaluate`` reads it); etp 0 is "equal to tp"."""
    n = len(strategies["tp"])
    keep = np.ones(n, dtype=bool)
    for c in conditions:
        col = strategies.get(c.field)
        col = np.full(n, STRATEGY_DEFAULTS[c.field]) if col is None else col
        if c.field == "etp":
            col = np.where(col > 0, col, strategies["tp"])
        if c.op == "in":
            keep &= np.isin(col, c.values)
        elif c.op == "<=":
            keep &= col <= c.values[0]
        else:
            keep &= col >= c.values[0]
    return keep
