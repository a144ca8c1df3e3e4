"""The type of a registered analysis's result beyond the built-in fields, and how an analysis reads
the results of those listed before it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import is_dataclass
from typing import Any, ClassVar, Protocol, TypeGuard, TypeVar

T = TypeVar("T")


class ExtraResult(Protocol):
    """A (frozen) dataclass instance: the JSON report serializes it with ``dataclasses.asdict``."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


def is_extra(value: object) -> TypeGuard[ExtraResult | None]:
    return value is None or (is_dataclass(value) and not isinstance(value, type))


def earlier_result(earlier: Mapping[str, object], name: str, kind: type[T]) -> T:
    """The result of the analysis ``name`` among ``earlier`` (those run before the caller), of type ``kind``."""
    got = earlier.get(name)
    if not isinstance(got, kind):
        raise LookupError(f"analysis {name!r} ({kind.__name__}) is not listed before this one in the registry")
    return got
