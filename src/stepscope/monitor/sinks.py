"""Where a rank's records go: an SQLite database in WAL mode (the default) or JSON lines, one file
per rank in the run directory, written only by that rank's writer thread.

SQLite in WAL mode with ``synchronous=NORMAL``: each flush is one transaction; a transaction that
committed survives the process being killed (``kill -9``), and readers (``stepscope monitor report``
/ ``watch``, other ranks' detectors) read while the job writes. JSON lines are the fallback for file
systems where SQLite's locking does not work (some network file systems): each flush appends whole
lines and flushes the file, so a killed process loses at most the lines of the flush it was in.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from .record import COLLECTIVE_COLUMNS, DEVICE_COLUMNS, FILE_STEM, STEP_COLUMNS

SinkKind = Literal["sqlite", "jsonl"]
Row = Sequence[Any]


class Sink(Protocol):
    path: Path

    def write(
        self,
        *,
        steps: Sequence[Row] = (),
        collectives: Sequence[Row] = (),
        devices: Sequence[Row] = (),
        events: Sequence[Mapping[str, Any]] = (),
        meta: Mapping[str, Any] | None = None,
    ) -> None: ...

    def close(self) -> None: ...


def open_sink(kind: SinkKind, run_dir: Path, rank: int) -> Sink:
    stem = FILE_STEM.format(rank=rank)
    if kind == "sqlite":
        return SqliteSink(run_dir / f"{stem}.db")
    return JsonlSink(run_dir / f"{stem}.jsonl")


def _ddl() -> list[str]:
    steps = ", ".join(f"{c} {'TEXT' if c == 'tags' else 'INTEGER'}" for c in STEP_COLUMNS)
    colls = ", ".join(f"{c} {'TEXT' if c == 'op' else 'INTEGER'}" for c in COLLECTIVE_COLUMNS)
    devs = ", ".join(f"{c} INTEGER" for c in DEVICE_COLUMNS)
    return [
        f"CREATE TABLE IF NOT EXISTS steps ({steps})",
        f"CREATE TABLE IF NOT EXISTS collectives ({colls})",
        f"CREATE TABLE IF NOT EXISTS devices ({devs})",
        "CREATE TABLE IF NOT EXISTS events (json TEXT)",
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)",
    ]


class SqliteSink:
    """One rank's database. ``check_same_thread=False``: opened on the job's thread, written by the
    writer thread (only ever one thread at a time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(str(path), timeout=5.0, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        for stmt in _ddl():
            self._db.execute(stmt)
        self._ins_steps = f"INSERT INTO steps VALUES ({', '.join('?' * len(STEP_COLUMNS))})"
        self._ins_colls = f"INSERT INTO collectives VALUES ({', '.join('?' * len(COLLECTIVE_COLUMNS))})"
        self._ins_devs = f"INSERT INTO devices VALUES ({', '.join('?' * len(DEVICE_COLUMNS))})"

    def write(
        self,
        *,
        steps: Sequence[Row] = (),
        collectives: Sequence[Row] = (),
        devices: Sequence[Row] = (),
        events: Sequence[Mapping[str, Any]] = (),
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        db = self._db
        db.execute("BEGIN")
        try:
            if steps:
                db.executemany(self._ins_steps, steps)
            if collectives:
                db.executemany(self._ins_colls, collectives)
            if devices:
                db.executemany(self._ins_devs, devices)
            if events:
                db.executemany("INSERT INTO events VALUES (?)", [(json.dumps(e),) for e in events])
            if meta:
                db.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()]
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._db.close()


class JsonlSink:
    """One rank's JSON lines: ``{"t": "step", ...}``, ``{"t": "coll", ...}``, ``{"t": "dev", ...}``,
    ``{"t": "event", ...}``, ``{"t": "meta", ...}`` (the last meta line of a key wins)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def write(
        self,
        *,
        steps: Sequence[Row] = (),
        collectives: Sequence[Row] = (),
        devices: Sequence[Row] = (),
        events: Sequence[Mapping[str, Any]] = (),
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        lines = [json.dumps({"t": "step", **dict(zip(STEP_COLUMNS, r))}) for r in steps]
        lines += [json.dumps({"t": "coll", **dict(zip(COLLECTIVE_COLUMNS, r))}) for r in collectives]
        lines += [json.dumps({"t": "dev", **dict(zip(DEVICE_COLUMNS, r))}) for r in devices]
        lines += [json.dumps({"t": "event", "event": dict(e)}) for e in events]
        if meta:
            lines.append(json.dumps({"t": "meta", "meta": dict(meta)}))
        if lines:
            self._f.write("\n".join(lines) + "\n")
            self._f.flush()

    def close(self) -> None:
        self._f.close()
