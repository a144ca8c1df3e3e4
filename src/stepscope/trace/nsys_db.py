"""Nsight Systems SQLite exports: opening one read-only, probing its tables and columns, fetching
integer rows in bounded chunks, looking up ``StringIds``, and the ``TARGET_INFO_GPU`` devices.

What a damaged file raises here is ``DB_ERRORS``; the reader (``nsys_sqlite``) skips the table
that raised and names it in a warning.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from .limits import MAX_NAME_BYTES, TRUNCATED_MARK

MAGIC = b"SQLite format 3\x00"


def is_nsys_sqlite(path: str | Path) -> bool:
    """The file starts with SQLite's header."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


CHUNK_ROWS = 1 << 16
#: ``globalPid`` / ``globalTid`` pack the process id in bits 24-47 and the thread id in bits 0-23
PID_SHIFT, ID_MASK = 24, 0xFFFFFF
#: what a damaged file raises: SQLite's own errors, and its error text when that is not UTF-8
DB_ERRORS = (sqlite3.DatabaseError, UnicodeDecodeError)


def connect(p: Path) -> sqlite3.Connection:
    """A read-only, immutable connection (no journal or lock files beside a report on a read-only
    share); text that is not UTF-8 is decoded with replacement characters."""
    from urllib.request import pathname2url  # 20 ms to import: only when a database is opened

    con = sqlite3.connect(f"file:{pathname2url(str(p.resolve()))}?mode=ro&immutable=1", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    return con


def tables_of(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def columns_of(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def fetch(con: sqlite3.Connection, sql: str, width: int) -> np.ndarray:
    """Integer rows of ``sql`` as an (n, width) int64 array, fetched in chunks (nulls are -1 in the
    SQL). A value that is not an integer (SQLite stores any type in any column; a damaged page
    does) is a damaged table: ``sqlite3.DatabaseError``."""
    cur = con.execute(sql)
    parts = []
    while chunk := cur.fetchmany(CHUNK_ROWS):
        try:
            parts.append(np.array(chunk, dtype=np.int64).reshape(-1, width))
        except (TypeError, ValueError, OverflowError) as exc:
            raise sqlite3.DatabaseError(f"values that are not integers ({exc.__class__.__name__})") from None
    return np.concatenate(parts) if parts else np.empty((0, width), np.int64)


class StringIds:
    """``StringIds`` values looked up for the ids a table uses (its distinct ids only: the table can
    hold millions of strings, of which a trace's kernels and calls use a few thousand)."""

    def __init__(self, con: sqlite3.Connection, present: bool) -> None:
        self.con, self.present = con, present and "value" in columns_of(con, "StringIds")

    def __call__(self, ids: np.ndarray) -> dict[int, str]:
        if not self.present or ids.size == 0:
            return {}
        out: dict[int, str] = {}
        for k in range(0, ids.size, 50_000):  # bounded statement length
            listed = ", ".join(str(int(i)) for i in ids[k : k + 50_000])
            rows = self.con.execute(f"SELECT id, value FROM StringIds WHERE id IN ({listed})").fetchall()
            out.update((i, _text(v)) for i, v in rows)
        return out


def _text(value: object) -> str:
    """A ``StringIds`` value as text: a BLOB (a damaged or foreign export) decoded as UTF-8 with
    replacement characters, a number or NULL as its text ("" for NULL), names cut at the limit."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = "" if value is None else str(value)
    return text if len(text) <= MAX_NAME_BYTES else text[:MAX_NAME_BYTES] + TRUNCATED_MARK


# TARGET_INFO_GPU column -> Kineto's deviceProperties key (what the roofline's device lookup reads)
_PROPS = {
    "id": "id",
    "name": "name",
    "totalMemory": "totalGlobalMem",
    "computeMajor": "computeMajor",
    "computeMinor": "computeMinor",
    "smCount": "numSms",
    "maxThreadsPerBlock": "maxThreadsPerBlock",
}


def device_properties(con: sqlite3.Connection, used: np.ndarray) -> list[dict[str, object]]:
    """The devices the events ran on, by CUDA device id, as Kineto's ``deviceProperties`` entries
    (none when ``TARGET_INFO_GPU`` cannot be read)."""
    try:
        have = [c for c in _PROPS if c in columns_of(con, "TARGET_INFO_GPU")]
    except DB_ERRORS:
        return []
    if "id" not in have or used.size == 0:
        return []
    ids = ", ".join(str(int(i)) for i in used)
    try:
        rows = con.execute(f"SELECT {', '.join(have)} FROM TARGET_INFO_GPU WHERE id IN ({ids}) ORDER BY id").fetchall()
    except DB_ERRORS:
        return []
    seen: set[object] = set()
    out = []
    for r in rows:  # one entry per device (an export lists a GPU once per VM)
        d = {_PROPS[c]: v for c, v in zip(have, r) if v is not None}
        if d.get("id") not in seen:
            seen.add(d.get("id"))
            out.append(d)
    return out
