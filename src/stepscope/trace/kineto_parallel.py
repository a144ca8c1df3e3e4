"""One large uncompressed Kineto file scanned by several threads, each over its own byte range.

The C scanner releases the GIL while it scans, so threads scan in parallel with no copy of the
text between processes. The file's event array is cut into ``workers`` ranges at candidate event
boundaries (``}`` ``,`` ``{``). A candidate inside a string would make a wrong cut, so a cut is
accepted only when the range before it ends exactly on a complete event: its scan leaves nothing
but commas and whitespace, did not close the array and skipped no damaged text. Any range that
fails that check, or any damage at all, sends the whole file back to the one-thread reader, so the
table is always the one the one-thread reader gives (rows in the same order; only the chunking
of the Arrow columns differs).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..executor import cpus_for_one_job
from .columns import FileRead, file_read
from .jsonsalvage import EVENT_BOUNDARY
from .jsonstream import StreamState, event_text_blocks, is_gzip
from .jsontext import parse_trailer
from .kineto_scan import TAIL_CUT_WARNING, BlockScanner, FastPathFailed, _fast, with_memory

#: files smaller than this are read by one thread (the threads' start-up is not worth it)
PARALLEL_MIN_BYTES = 64 << 20
_PROBE_BYTES = 1 << 20
_SEPARATORS = b", \t\r\n"
_MAX_CANDIDATES = 64
_CHECK_BYTES = 64 << 10


def parallel_workers(path: Path, min_bytes: int = PARALLEL_MIN_BYTES) -> int:
    """How many threads to scan ``path`` with: 1 for compressed or small files, else the CPUs this
    job may use (``executor.cpus_for_one_job``: its share when files are read side by side in worker
    processes; at most 8)."""
    try:
        size = path.stat().st_size
    except OSError:
        return 1
    if size < min_bytes or is_gzip(path):
        return 1
    return max(1, min(8, cpus_for_one_job()))


def _cuts(fd: int, start: int, size: int, workers: int) -> list[int]:
    """Range starts: ``start`` and, near each 1/workers of the rest, the ``{`` of the first
    candidate event boundary from which the scanner reads at least one whole event (a candidate
    inside a string rarely does; the range check in :func:`_joined` catches the rest)."""
    assert _fast is not None
    cuts = [start]
    for i in range(1, workers):
        at = start + (size - start) * i // workers
        probe = os.pread(fd, _PROBE_BYTES, at)
        for tried, m in enumerate(EVENT_BOUNDARY.finditer(probe)):
            if tried >= _MAX_CANDIDATES:
                break
            _n, consumed, status, _raw = _fast.parse(probe[m.end() - 1 : m.end() - 1 + _CHECK_BYTES], False)
            if status >= 0 and consumed > 0:
                if at + m.end() - 1 > cuts[-1]:
                    cuts.append(at + m.end() - 1)
                break
    return cuts


def read_parallel(path: Path, rank: int, include_python: bool, block: int, workers: int) -> FileRead | None:
    """The file read by ``workers`` threads, or None when the one-thread reader must read it
    (damage, a cut that is not an event boundary, an array that does not close where expected)."""
    first, state = next(iter(event_text_blocks(path, block=block)))
    start = state.bytes_used
    del first
    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        cuts = _cuts(fd, start, size, workers)
        ends = [*cuts[1:], size]

        def scan(i: int) -> BlockScanner | None:
            scanner = BlockScanner(rank, include_python, block)
            pos, end = cuts[i], ends[i]
            try:
                while pos < end:
                    data = os.pread(fd, min(block, end - pos), pos)
                    if not data:
                        break
                    pos += len(data)
                    scanner.feed(data)
            except FastPathFailed:
                return None
            if i == len(cuts) - 1:
                scanner.finish()  # the end of the file (an inner range's end is not)
            return scanner

        with ThreadPoolExecutor(max_workers=len(cuts)) as pool:
            scanners = list(pool.map(scan, range(len(cuts))))
    finally:
        os.close(fd)
    return _joined(path, scanners, state, size)


def _joined(path: Path, scanners: list[BlockScanner | None], state: StreamState, size: int) -> FileRead | None:
    """The ranges' tables as one file read, or None when a range did not end where the next begins."""
    ok = [s for s in scanners if s is not None]
    if len(ok) != len(scanners) or any(s.skipped for s in ok):
        return None
    *inner, last = ok
    if any(s.closed or s.rem.strip(_SEPARATORS) for s in inner):
        return None
    state.bytes_read = size
    if not last.closed:
        state.truncated = True
    else:
        state.header.update(parse_trailer(last.tail, state.warnings))
    if last.tail_cut:
        state.warnings.append(TAIL_CUT_WARNING)
    return with_memory(file_read(str(path), [t for s in ok for t in s.tables], state, 0), ok)
