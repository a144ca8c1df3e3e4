"""argparse types that reject bad values as one usage line (exit 2), and the parser that prints
usage errors as one line. Shared by every subcommand's options."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import NoReturn


def positive(text: str) -> int:
    """argparse type for counts: a positive integer (argparse turns the error into one usage line, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type for durations, FLOPs and thresholds: a finite number > 0 (nan and inf are
    refused: they pass ``> 0`` checks or compare false everywhere downstream)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number more than 0, not {text}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type for tolerances: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number of 0 or more, not {text}")
    return value


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line that names the fix (argparse prints the whole usage block). An
    empty string is never a value: ``--json ''`` or ``analyze ''`` (a shell variable that was not
    set) is an error, not standard output or the current directory."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        ns, rest = super().parse_known_args(args, namespace)
        for action in self._actions:  # this parser's own options (a subcommand's parser checks its own)
            value = getattr(ns, action.dest, None)
            if value == action.default:
                continue  # not given
            if value == "" or (isinstance(value, list) and "" in value):
                name = (action.option_strings or [action.dest])[-1]
                self.error(f"an empty value for {name} (an unset shell variable?)")
        return ns, rest
