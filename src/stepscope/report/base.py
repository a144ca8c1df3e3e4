"""The one renderer protocol. A renderer turns a finished result (an ``Analysis``, a plan, or the
``ModuleCosts`` of ``stepscope hlo``, ``analysis/xla/instructions.py``) into text or bytes; it never
computes figures. Renderers are listed in ``report/registry.py``; the CLI picks one by name
(``--json``, ``--format html``) or by the output file's extension (``-o report.html``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Subject = Literal["analysis", "plan", "hlo", "diff", "monitor"]


@dataclass(frozen=True, kw_only=True)
class Renderer:
    """One output format for one kind of result.

    ``render(result, options)`` returns the file's content: ``str`` for text formats, ``bytes`` for
    binary ones (``binary=True``; those cannot go to standard output). ``extensions`` are the
    output-file suffixes that select it (``.html``; the longest matching suffix wins, so
    ``.perfetto.json`` is not ``.json``); the terminal renderer has none, returns ``None`` and
    prints to the rich console it is given in ``options["console"]``.
    """

    name: str
    subject: Subject
    extensions: tuple[str, ...]
    render: Callable[[Any, Mapping[str, Any]], str | bytes | None]
    binary: bool = False
    description: str = ""
