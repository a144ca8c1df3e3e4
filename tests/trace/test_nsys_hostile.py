"""An Nsight export whose ``StringIds`` values are BLOBs (a damaged or foreign writer): names are
decoded as UTF-8 with replacement characters, never a TypeError."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from stepscope.trace.nsys_sqlite import read_nsys_sqlite

ROOT = Path(__file__).resolve().parents[2]


def test_blob_string_values_are_decoded(tmp_path: Path) -> None:
    p = tmp_path / "t.sqlite"
    shutil.copy(ROOT / "tests/fixtures/nsys_concurrent_profile4.sqlite", p)
    clean = read_nsys_sqlite(ROOT / "tests/fixtures/nsys_concurrent_profile4.sqlite")
    with sqlite3.connect(p) as con:
        con.execute("UPDATE StringIds SET value = CAST(value AS BLOB) WHERE id % 3 = 0")
        con.execute("UPDATE StringIds SET value = X'FF00FE' WHERE id % 7 = 1")
    fr = read_nsys_sqlite(p)
    assert fr.table.num_rows == clean.table.num_rows
    names = set(fr.table["name"].to_pylist())
    assert "\ufffd\x00\ufffd" in names  # X'FF00FE': two bytes that are not UTF-8 around a NUL
