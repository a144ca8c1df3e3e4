"""Tables that fit the terminal without cutting a number.

Numbers are never shortened. To fit a width, in this order: headers wrap at their spaces; names
(kernel, op, scope, step names) are shortened in the middle, down to ``NAME_MIN`` characters;
columns marked droppable go, highest ``drop`` first (the table's caption says which); if the
table still does not fit, each row is printed as ``name: header value, ...`` lines instead.

Widths follow rich's default box with one space of padding: a table of columns ``w_1..w_n``
takes ``sum(w_i) + 3n + 1`` characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is loaded when a report is printed, not to write files
    from rich.console import Console


#: a shortened name keeps at least this many characters
NAME_MIN = 16


@dataclass(frozen=True)
class Col:
    """A column: its header, whether it holds names (shortened to fit) or figures (never cut),
    and when it may be dropped (0: never; of the droppable ones the highest goes first)."""

    header: str
    name: bool = False
    drop: int = 0
    left: bool = False  # left-justified (names and labels); figures are right-justified


def middle(text: str, width: int) -> str:
    """``text`` shortened in the middle to ``width`` characters (an ellipsis in place of the rest)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head = width // 2
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def _header_width(header: str) -> int:
    return max((len(w) for w in header.split()), default=0)


def _need(col: Col, cells: list[str]) -> int:
    widest = max((len(c) for c in cells), default=0)
    return max(widest, _header_width(col.header), 1)


def _layout(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int) -> tuple[list[int], list[int]] | None:
    """(kept column indices, their widths) fitting ``width``, or None when no choice fits."""
    keep = list(range(len(cols)))
    need = [_need(c, [r[i] for r in rows]) for i, c in enumerate(cols)]
    while True:
        overhead = 3 * len(keep) + 1
        fixed = sum(need[i] for i in keep if not cols[i].name)
        names = [i for i in keep if cols[i].name]
        room = width - overhead - fixed
        if sum(need[i] for i in names) <= room:
            return keep, [need[i] for i in keep]
        floor = [min(need[i], max(NAME_MIN, _header_width(cols[i].header))) for i in names]
        if sum(floor) <= room:
            widths = dict(zip(names, floor))
            spare = room - sum(floor)
            for i in names:  # the spare room to the names, in order, up to what each needs
                extra = min(spare, need[i] - widths[i])
                widths[i] += extra
                spare -= extra
            return keep, [widths[i] if cols[i].name else need[i] for i in keep]
        droppable = [i for i in keep if cols[i].drop > 0]
        if not droppable:
            return None
        keep.remove(max(droppable, key=lambda i: (cols[i].drop, i)))


def print_table(
    con: Console, title: str, cols: Sequence[Col], rows: Sequence[Sequence[str]], *, width: int | None = None
) -> None:
    """Print ``rows`` (plain text cells, no markup) under ``cols`` on ``con``, fitted to its width."""
    from rich.table import Table
    from rich.text import Text

    w = width if width is not None else con.width
    layout = _layout(cols, rows, w)
    if layout is None:
        _as_lines(con, title, cols, rows)
        return
    keep, widths = layout
    dropped = [cols[i].header for i in range(len(cols)) if i not in keep]
    t = Table(title=title, caption=f"(narrow terminal: left out {', '.join(dropped)})" if dropped else None)
    for i, cw in zip(keep, widths):
        c = cols[i]
        header = "\n".join(_wrap(c.header, cw))
        t.add_column(
            header, justify="left" if (c.left or c.name) else "right", no_wrap=True, width=cw, overflow="ellipsis"
        )
    for r in rows:
        t.add_row(*(Text(middle(r[i], cw) if cols[i].name else r[i]) for i, cw in zip(keep, widths)))
    con.print(t)


def _wrap(header: str, width: int) -> list[str]:
    """The header's words on lines of at most ``width`` characters (a longer word alone on its line)."""
    lines: list[str] = []
    for word in header.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def _as_lines(con: Console, title: str, cols: Sequence[Col], rows: Sequence[Sequence[str]]) -> None:
    from rich.text import Text

    con.print(Text(title, style="italic"))
    for r in rows:
        label = r[0]
        rest = ", ".join(f"{c.header} {v}" for c, v in zip(cols[1:], r[1:]) if v != "")
        con.print(Text(f"  {label}: {rest}"))
