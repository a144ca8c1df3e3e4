"""JSON text from users' files (model configs, ``--batch`` records, reports) -> Python values.

The standard library's decoder recurses, so JSON nested about a thousand deep raises
``RecursionError`` from inside it; here that is a ``json.JSONDecodeError`` like any other bad
JSON, which every caller already turns into one error line (or one error record).
"""

from __future__ import annotations

import json
from typing import Any


def loads(text: str) -> Any:
    """``json.loads(text)``; nesting too deep for the decoder is a ``json.JSONDecodeError``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deep", text[:64], 0) from None
