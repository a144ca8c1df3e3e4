"""One exception hierarchy. User errors carry the fix; the CLI maps classes to exit codes in one place."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class StepscopeError(Exception):
    """Base class. ``exit_code`` is what the CLI returns for it."""

    exit_code = 1

    def __init__(self, message: str, *, fix: str | None = None, path: str | None = None) -> None:
        self.message = message
        self.fix = fix
        self.path = path
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """Path, message and fix on one line: a message quoting a library's multi-line error (a
        Parquet decoder's, a YAML parser's) is folded, its whitespace runs made single spaces."""
        where = f"{self.path}: " if self.path else ""
        fix = f" ({' '.join(self.fix.split())})" if self.fix else ""
        return f"{where}{' '.join(self.message.split())}{fix}"


class InputError(StepscopeError):
    """The user's input (trace file, option, rule file) cannot be used as given."""

    exit_code = 2


class TraceFormatError(InputError):
    """A file is not a trace stepscope can read (not JSON, no events, wrong schema)."""


class ConfigError(InputError):
    """An option or configuration value is invalid."""


def refuse_unknown_keys(
    d: Mapping[Any, Any], known: Iterable[str], *, path: str, owner: str = "", see: str = ""
) -> None:
    """A file entry's keys must be ones its reader reads: a misspelt optional key would otherwise
    be ignored without a word. ``known`` is listed in the fix in the order given."""
    names = list(known)
    unknown = sorted(str(k) for k in d if k not in names)
    if unknown:
        raise ConfigError(
            f"{owner}unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}",
            path=path,
            fix=f"the keys are {', '.join(names)}" + (f" (see {see})" if see else ""),
        )
