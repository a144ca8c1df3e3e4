"""The one place the CLIs write output files: an unwritable path is one line (exit 1), not a
traceback."""

from __future__ import annotations

import sys
from pathlib import Path

from .errors import StepscopeError


def write_output(path: str, text: str) -> None:
    """Write ``text`` to ``path``; ``-`` is standard output (for a pipe: ``--json - | jq``)."""
    if path == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise StepscopeError(
            f"cannot write output ({exc.strerror})", path=path, fix="check the directory exists and is writable"
        ) from None
