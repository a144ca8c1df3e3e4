"""Return the heap memory the reader and the analyses freed to the operating system.

The C scanner builds each block's columns in malloc'd buffers and frees them once they are copied
into the table; each analysis makes and drops arrays of megabytes. glibc keeps such freed blocks in
the process: the heap top is only trimmed when that much is free there, and once a large mapped
block is freed glibc raises both its mmap threshold and that trim threshold (up to 32 and 64 MiB),
so later arrays come from the heap and their freed space stays resident. On a 476 MB trace that was
140 MiB freed but resident during the analyses. Two remedies:

- ``malloc_trim(0)`` after a read and after each analysis hands free heap pages back (milliseconds);
- ``return_large_blocks`` (the command line sets it) fixes both thresholds, which turns that raising
  off: blocks of 32 MiB and more are mapped, and the heap top is trimmed once 16 MiB are free there
  (the default, 128 KiB, trims and regrows the heap so often that a 1 GB trace takes 10% longer).

On other C libraries and platforms both do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import lru_cache
from typing import Any

_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3
LARGE_BLOCK_BYTES = 32 << 20
TRIM_BYTES = 16 << 20


@lru_cache(maxsize=1)
def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def _malloc_trim() -> Any:
    return getattr(_libc(), "malloc_trim", None)  # glibc only (musl has none)


def return_large_blocks(threshold_bytes: int = LARGE_BLOCK_BYTES, trim_bytes: int = TRIM_BYTES) -> None:
    """Blocks of ``threshold_bytes`` and more get their own mapping, the heap top is trimmed once
    ``trim_bytes`` are free there, and glibc no longer raises either as blocks are freed
    (``mallopt``; process-wide, so only the command line sets it)."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, threshold_bytes)
        mallopt(_M_TRIM_THRESHOLD, trim_bytes)


def release_freed_heap() -> None:
    """``malloc_trim(0)`` where the C library has it."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
