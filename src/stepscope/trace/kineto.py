"""Kineto / torch.profiler Chrome-trace JSON -> the normalized event table (see ``schema.py``).

Two readers give the same table: the C scanner (``_fastkineto.c``, built by setup.py when a
compiler is present) and the portable msgspec reader (``kineto_portable.py``). Both stream the
file in blocks, so memory stays bounded whatever the file size.
"""

from __future__ import annotations

from pathlib import Path

from .columns import FileRead, file_read
from .heap import release_freed_heap
from .jsonstream import BLOCK_BYTES, StreamState, event_text_blocks
from .jsontext import parse_trailer
from .kineto_parallel import parallel_workers, read_parallel
from .kineto_portable import read_portable
from .kineto_scan import TAIL_CUT_WARNING, BlockScanner, FastPathFailed, _fast, with_memory

__all__ = ["FileRead", "read_kineto"]


def read_kineto(
    path: str | Path,
    *,
    rank: int = 0,
    include_python: bool = False,
    block: int = BLOCK_BYTES,
    force_portable: bool = False,
    workers: int | None = None,
) -> FileRead:
    """Read one Kineto trace file into the event table (all rows get ``rank``).

    Uses the C scanner when it is built (``_fastkineto``), else msgspec; both give the same table.
    A large uncompressed file is scanned by ``workers`` threads (default: one per CPU, see
    ``kineto_parallel``); the table is the same as with one.
    """
    p = Path(path)
    if _fast is not None and not force_portable:
        n = parallel_workers(p) if workers is None else workers
        try:
            fr = read_parallel(p, rank, include_python, block, n) if n > 1 else None
            return fr if fr is not None else _read_fast(p, rank, include_python, block)
        except FastPathFailed:
            pass  # odd content: the portable path below decides (and recovers what it can)
        finally:
            release_freed_heap()  # the scanner's block buffers
    return read_portable(p, rank, include_python, block)


def _read_fast(p: Path, rank: int, include_python: bool, block: int) -> FileRead:
    """C scanner path: each block scanned in place (``BlockScanner``), its columns put in Arrow."""
    scanner = BlockScanner(rank, include_python, block)
    state = StreamState()
    for data, state in event_text_blocks(p, block=block):  # noqa: B007  (the last state is read below)
        scanner.feed(data)
    scanner.finish()
    if not scanner.closed:
        state.truncated = True  # the event array never closes: a job killed mid-write
    elif not state.truncated:
        state.header.update(parse_trailer(scanner.tail, state.warnings))
    if scanner.tail_cut:
        state.warnings.append(TAIL_CUT_WARNING)
    return with_memory(file_read(str(p), scanner.tables, state, scanner.skipped), [scanner])
