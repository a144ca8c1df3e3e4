"""The one place the CLIs write output files: an unwritable path is one line (exit 1), not a
traceback."""

from __future__ import annotations

import sys
from pathlib import Path

from .errors import ConfigError, StepscopeError


def write_output(path: str, content: str | bytes) -> None:
    """Write ``content`` to ``path``: text as UTF-8, bytes as they are. ``-`` is standard output
    (for a pipe: ``--json - | jq``), for text only; a final newline is added there when missing."""
    if path == "-":
        if isinstance(content, bytes):
            raise ConfigError("binary output cannot go to standard output", fix="give it a file name")
        if sys.stdout is None:  # started with standard output closed (>&-)
            raise ConfigError("standard output is closed", fix="write to a file instead of -")
        sys.stdout.write(content if content.endswith("\n") else content + "\n")
        sys.stdout.flush()
        return
    try:
        if isinstance(content, bytes):
            Path(path).write_bytes(content)
        else:
            Path(path).write_text(content, encoding="utf-8")
    except OSError as exc:
        raise StepscopeError(
            f"cannot write output ({exc.strerror})", path=path, fix="check the directory exists and is writable"
        ) from None
