"""Trace strings made safe to show on a terminal.

Kernel, op, device and file names come from other people's traces and are untrusted. Written raw
to a terminal, a control character in one can act: ``ESC ] 52`` sets the user's clipboard,
``ESC ] 0`` retitles the window, ``ESC [ 2 J`` clears the screen, a carriage return overwrites a
line. Every C0 and C1 control character and DEL (the ``Cc`` category, which holds ESC, BEL, CR,
LF and TAB) is shown as its escaped form instead (``\\x1b``), so the text stays readable and
nothing in it reaches the terminal as a control. The HTML report escapes its own way
(``html.escape``); the JSON report keeps strings as they are (JSON escapes control characters).
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with each control character replaced by its ``\\xNN`` escape."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
