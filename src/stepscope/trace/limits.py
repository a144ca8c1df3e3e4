"""The limits every reader keeps to, whatever a file holds (docs/limits.md lists them for users).

A trace comes from someone else's job and may be damaged or hostile; these bound the time and
memory one file can cost. Real traces stay far inside all of them.

- ``MAX_JSON_DEPTH``: JSON nesting deeper than this is refused where it is found: an event nesting
  deeper is dropped and counted as damaged; a header or trailer key nesting deeper is left out with
  a warning. Real traces nest at most about 6 levels (``args`` -> ``Input Dims`` -> lists).
- ``MAX_NAME_BYTES``: longer names (kernel, op, annotation) are cut to this many bytes and end
  with ``TRUNCATED_MARK``. The longest C++ template kernel names in real traces are about 3 KB.
- ``MAX_EVENT_BYTES``: an event whose text is still incomplete after this many bytes (checked at
  each block the reader takes) is dropped and counted as damaged, and so is the text after the
  event list past this size (a real event is under 100 KB even with every shape recorded).
- ``MAX_INFLATE_RATIO`` / ``DEFAULT_MAX_INFLATED_BYTES``: a compressed file that inflates to more
  than ``MAX_INFLATE_RATIO`` bytes per compressed byte (past the first ``INFLATE_RATIO_GRACE_BYTES``)
  is refused as a compression bomb, and any that inflates past the cap is read up to it with a
  warning; ``--max-inflated-gb`` raises the cap. Real Kineto traces inflate 5-30 times.
"""

from __future__ import annotations

import os

MAX_JSON_DEPTH = 64
MAX_NAME_BYTES = 16 << 10
TRUNCATED_MARK = "...[truncated]"
MAX_EVENT_BYTES = 16 << 20
MAX_INFLATE_RATIO = 200
INFLATE_RATIO_GRACE_BYTES = 64 << 20
DEFAULT_MAX_INFLATED_BYTES = 64 << 30
#: the environment variable ``--max-inflated-gb`` sets (worker processes inherit it)
MAX_INFLATED_ENV = "STEPSCOPE_MAX_INFLATED_GB"


def max_inflated_bytes() -> int:
    """The cap on one compressed file's inflated size: ``$STEPSCOPE_MAX_INFLATED_GB`` GiB, else 64 GiB."""
    raw = os.environ.get(MAX_INFLATED_ENV, "")
    try:
        gb = float(raw)
    except ValueError:
        return DEFAULT_MAX_INFLATED_BYTES
    return int(gb * 2**30) if gb > 0 else DEFAULT_MAX_INFLATED_BYTES
