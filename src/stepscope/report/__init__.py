"""Renderers. A new renderer = a new module + one line in ``FILE_RENDERERS``."""

from __future__ import annotations

from collections.abc import Callable

from ..analysis.results import Analysis
from . import html_report, json_report

#: output option name -> function returning the file's text
FILE_RENDERERS: dict[str, Callable[[Analysis], str]] = {
    "json": json_report.render,
    "html": html_report.render,
}
