"""The type of a registered analysis's result beyond the built-in fields."""

from __future__ import annotations

from dataclasses import is_dataclass
from typing import Any, ClassVar, Protocol, TypeGuard


class ExtraResult(Protocol):
    """A (frozen) dataclass instance: the JSON report serializes it with ``dataclasses.asdict``."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


def is_extra(value: object) -> TypeGuard[ExtraResult | None]:
    return value is None or (is_dataclass(value) and not isinstance(value, type))
