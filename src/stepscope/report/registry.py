"""Every renderer, in one tuple, and how the CLI finds one: by name (``--format json``, the
``--json`` alias) or by the extension of the output file (``-o report.html``).

A new renderer is one file and one line: write ``report/<name>.py`` with a
``render(result, options)`` function and a module-level ``RENDERER = Renderer(...)`` (see
``base.py``; ``markdown.py`` is a short example), then add ``<name>.RENDERER`` to ``RENDERERS``
below. The CLI's ``-o``, ``--format`` and their help text read this tuple, so nothing else changes.
Renderers of another subject (``"plan"``, ``"hlo"``) go in the same tuple; lookups filter by subject.
"""

from __future__ import annotations

from ..errors import ConfigError
from . import (
    diff_json,
    diff_terminal,
    hlo_json,
    hlo_terminal,
    html_report,
    json_report,
    markdown,
    monitor_html,
    monitor_json,
    monitor_terminal,
    perfetto,
    plan_html,
    plan_json,
    plan_terminal,
    roofline_png,
    terminal,
)
from .base import Renderer, Subject

RENDERERS: tuple[Renderer, ...] = (
    terminal.RENDERER,
    json_report.RENDERER,
    html_report.RENDERER,
    roofline_png.RENDERER,
    perfetto.RENDERER,
    markdown.RENDERER,
    plan_terminal.RENDERER,
    plan_json.RENDERER,
    plan_html.RENDERER,
    hlo_terminal.RENDERER,
    hlo_json.RENDERER,
    diff_terminal.RENDERER,
    diff_json.RENDERER,
    monitor_terminal.RENDERER,
    monitor_json.RENDERER,
    monitor_html.RENDERER,
)


def for_subject(subject: Subject) -> tuple[Renderer, ...]:
    return tuple(r for r in RENDERERS if r.subject == subject)


def file_renderers(subject: Subject) -> tuple[Renderer, ...]:
    """The renderers that write files (those with an extension), in registry order."""
    return tuple(r for r in for_subject(subject) if r.extensions)


def by_name(subject: Subject, name: str) -> Renderer:
    for r in for_subject(subject):
        if r.name == name:
            return r
    names = ", ".join(r.name for r in file_renderers(subject))
    raise ConfigError(f"no {subject} output format named {name!r}", fix=f"the formats are {names}")


def for_path(subject: Subject, path: str) -> Renderer:
    """The renderer whose extension ends ``path`` (case-insensitive); the longest match wins, so
    ``cp.perfetto.json`` is the Perfetto trace and ``report.json`` the JSON report."""
    lower = path.lower()
    hits = [(len(ext), r) for r in for_subject(subject) for ext in r.extensions if lower.endswith(ext)]
    if hits:
        return max(hits, key=lambda h: h[0])[1]
    raise ConfigError(
        f"the extension of {path!r} names no output format",
        fix=f"end the file name with {' or '.join(extensions(subject))}, or write to - with --format NAME",
    )


def extensions(subject: Subject) -> list[str]:
    return [ext for r in file_renderers(subject) for ext in r.extensions]


def extensions_help(subject: Subject) -> str:
    """``.json (JSON report), .html/.htm (...), ...``: the extensions the CLI's help lists."""
    return ", ".join(f"{'/'.join(r.extensions)} ({r.description})" for r in file_renderers(subject))
