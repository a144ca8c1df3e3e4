"""The outputs a command was asked for (``-o FILE`` by extension, ``-o - --format NAME``, and
alias options such as ``--json FILE``), checked before any work is done, then rendered and
written. Used by every subcommand that writes reports; ``subject`` picks its renderers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..outfile import write_output
from .base import Renderer, Subject
from .registry import by_name, file_renderers, for_path


@dataclass(frozen=True, kw_only=True)
class Output:
    option: str  # what asked for it, as the user wrote it: "--json", "-o", "-o - --format json"
    renderer: Renderer
    path: str  # "-": standard output


def resolve(
    subject: Subject,
    *,
    aliases: Sequence[tuple[str, str, str | None]] = (),
    paths: Sequence[str] = (),
    fmt: str | None = None,
) -> list[Output]:
    """Every output asked for: the ``aliases`` given ((option, renderer name, path or None), in
    that order), then each of ``paths`` (``-o``) in order, its renderer chosen by the extension, or
    by ``fmt`` for ``-``. At most one output goes to standard output, and no binary one."""
    outs = [Output(option=opt, renderer=by_name(subject, name), path=p) for opt, name, p in aliases if p]
    if fmt and "-" not in paths:
        raise ConfigError("--format names the format of -o -", fix="add -o -, or let the file's extension name it")
    for p in paths:
        if p != "-":
            outs.append(Output(option="-o", renderer=for_path(subject, p), path=p))
            continue
        formats = ", ".join(r.name for r in file_renderers(subject))
        if not fmt:
            raise ConfigError("-o - needs --format NAME", fix=f"e.g. -o - --format json; the formats are {formats}")
        r = by_name(subject, fmt)
        if not r.extensions:
            raise ConfigError(f"--format {r.name} is not a file format", fix=f"the formats are {formats}")
        outs.append(Output(option=f"-o - --format {r.name}", renderer=r, path=p))
    _check_standard_output(outs)
    return outs


def _check_standard_output(outs: list[Output]) -> None:
    piped = [o for o in outs if o.path == "-"]
    if len(piped) > 1:
        raise ConfigError(
            f"only one output can go to standard output, not {' and '.join(o.option for o in piped)}",
            fix="give the others a file name",
        )
    for o in piped:
        if o.renderer.binary:
            raise ConfigError(
                f"{o.option} cannot go to standard output (it is binary)",
                fix=f"give it a file name, e.g. {o.renderer.name}{o.renderer.extensions[0]}",
            )


def write_all(outputs: Sequence[Output], result: Any, options: Mapping[str, Any] | None = None) -> None:
    """Render every output first, then write them all: when a renderer refuses the result (a
    critical path trace of one rank), no file is written."""
    contents = [(o.path, o.renderer.render(result, options or {})) for o in outputs]
    for path, content in contents:
        if content is not None:
            write_output(path, content)
