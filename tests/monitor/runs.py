"""Hand-made run directories for the monitor's tests: step records with chosen times."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from stepscope.monitor.record import STEP_COLUMNS
from stepscope.monitor.sinks import open_sink

MS = 1_000_000


def write_rank(
    run_dir: Path,
    rank: int,
    dur_ms: Sequence[float],
    *,
    world_size: int = 1,
    level: int = 0,
    comm_ms: Sequence[float] | None = None,
    phases_ms: dict[str, Sequence[float]] | None = None,
    tags: dict[int, str] | None = None,
    gc_ms: dict[int, float] | None = None,
    sink: str = "sqlite",
) -> None:
    """One rank's records, step i taking ``dur_ms[i]``; phases by column name (``forward_ns``...)."""
    rows = []
    t = 0
    for i, d in enumerate(dur_ms):
        rec = dict.fromkeys(STEP_COLUMNS)
        rec.update(rank=rank, step=i, start_unix_ns=t, dur_ns=int(d * MS), gc_ns=0, gc_count=0, tags="")
        if comm_ms is not None:
            rec.update(comm_ns=int(comm_ms[i] * MS), comm_calls=1)
        for col, xs in (phases_ms or {}).items():
            rec[col] = int(xs[i] * MS)
        if tags and i in tags:
            rec["tags"] = tags[i]
        if gc_ms and i in gc_ms:
            rec.update(gc_ns=int(gc_ms[i] * MS), gc_count=1)
        rows.append(tuple(rec[c] for c in STEP_COLUMNS))
        t += int(d * MS)
    s = open_sink(sink, run_dir, rank)  # type: ignore[arg-type]
    s.write(steps=rows, meta={"rank": rank, "world_size": world_size, "level": level})
    s.close()
