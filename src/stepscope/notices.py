"""Warnings as data: what the user should know about an input or a rank, with the rank and the file it
concerns as fields, so that renumbering a rank or naming a file by its URL is a field change, never a
text edit, and notices of many ranks can be collapsed into one line each.

Rendered text: ``"rank R: text"`` for a rank's notice, ``"PATH: text"`` for a file's, ``"rank R: PATH: text"``
for both, else the text. :func:`collapse` gives one line per distinct per-rank notice
(``"ranks 0, 1, 2 (3 ranks): text"``), in first-seen order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass

#: ranks named in a collapsed line before "..."
SHOWN_RANKS = 8


@dataclass(frozen=True)
class Notice:
    text: str
    _: KW_ONLY
    rank: int | None = None
    path: str | None = None

    @property
    def body(self) -> str:
        """The text with its file, without the rank."""
        return f"{self.path}: {self.text}" if self.path is not None else self.text

    def __str__(self) -> str:
        return f"rank {self.rank}: {self.body}" if self.rank is not None else self.body


def collapse(notices: Iterable[Notice]) -> tuple[str, ...]:
    """One line per notice without a rank, and one line per distinct per-rank body, placed where it
    first appears and naming its ranks in order of appearance; thousands of ranks with the same notice
    give one line, not thousands."""
    order: list[Notice | str] = []  # a notice without a rank, or the body of per-rank notices
    ranks_of: dict[str, list[int]] = {}
    for n in notices:
        if n.rank is None:
            order.append(n)
            continue
        if n.body not in ranks_of:
            ranks_of[n.body] = []
            order.append(n.body)
        ranks_of[n.body].append(n.rank)
    out = []
    for item in order:
        if isinstance(item, Notice):
            out.append(str(item))
            continue
        ranks = [str(r) for r in ranks_of[item]]
        if len(ranks) == 1:
            out.append(f"rank {ranks[0]}: {item}")
        else:
            shown = ", ".join(ranks[:SHOWN_RANKS]) + (", ..." if len(ranks) > SHOWN_RANKS else "")
            out.append(f"ranks {shown} ({len(ranks)} ranks): {item}")
    return tuple(out)
