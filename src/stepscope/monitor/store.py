"""Read a run directory (every rank's database or JSON lines) into columns for the detectors.

Missing values (a field the job did not measure) are NaN in the float columns. A JSON-lines file cut
inside its last line (the job was killed while writing) is read up to the cut, with a warning.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from .record import COLLECTIVE_COLUMNS, DEVICE_COLUMNS, STEP_COLUMNS

_RANK_FILE = re.compile(r"rank-(\d+)\.(db|jsonl)$")


@dataclass(frozen=True, kw_only=True)
class RunData:
    """All ranks' records. ``steps[c]`` is one array per column of ``record.STEP_COLUMNS`` (``rank``
    and ``step`` int64, ``start_unix_ns`` int64, the others float64 with NaN for "not measured",
    ``tags`` an object array of strings), sorted by (rank, step)."""

    run_dir: str
    steps: dict[str, np.ndarray]
    collectives: dict[str, np.ndarray]
    devices: dict[str, np.ndarray]
    meta: dict[int, dict[str, Any]]
    events: list[dict[str, Any]]
    warnings: tuple[str, ...] = field(default=())

    @property
    def n_steps(self) -> int:
        return int(self.steps["rank"].size)

    @property
    def ranks(self) -> np.ndarray:
        return np.unique(self.steps["rank"])


def rank_files(run_dir: Path) -> list[tuple[int, Path]]:
    files = []
    for p in sorted(run_dir.iterdir()):
        m = _RANK_FILE.match(p.name)
        if m:
            files.append((int(m.group(1)), p))
    return files


def load_run(run_dir: str | Path, *, since_step: int | None = None, skip_unreadable: bool = False) -> RunData:
    """Every rank's records in ``run_dir``; with ``since_step``, only steps from it on (what a live
    detector needs; events and meta are read whole). ``skip_unreadable``: a rank file that cannot be
    read is left out with a warning instead of an error (the live detector, while ranks write)."""
    d = Path(run_dir)
    if not d.is_dir():
        raise InputError("not a directory", path=str(d), fix="give the run directory the job passed to Monitor(...)")
    files = rank_files(d)
    if not files:
        raise InputError(
            "no monitor records (rank-NNNNN.db or rank-NNNNN.jsonl)",
            path=str(d),
            fix="give the run directory the job passed to Monitor(...), or import a log with `stepscope monitor import`",
        )
    parts: list[dict[str, Any]] = []
    warnings: list[str] = []
    for rank, p in files:
        try:
            part = _read_sqlite(p, since_step) if p.suffix == ".db" else _read_jsonl(p, warnings, since_step)
        except (InputError, OSError) as exc:
            if not skip_unreadable:
                raise
            warnings.append(f"{p}: skipped for now ({exc})")
            continue
        part["meta"].setdefault("rank", rank)
        parts.append(part)
    parts.append(_detector_events(d, warnings))
    return _combine(str(d), parts, warnings)


def _detector_events(d: Path, warnings: list[str]) -> dict[str, Any]:
    """The anomalies the live detector process reported (``detector.jsonl``), as events."""
    out: dict[str, Any] = {"steps": [], "colls": [], "devs": [], "events": [], "meta": {"rank": -1}}
    p = d / "detector.jsonl"
    if p.is_file():
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                out["events"].append(json.loads(line))
            except json.JSONDecodeError:
                warnings.append(f"{p}: a line cut short; skipped")
    return out


def _connect(p: Path) -> sqlite3.Connection:
    """Read-only. A copied run directory without the ``-shm`` file beside a database, in a directory
    not writable, cannot be opened so; then as ``immutable`` (nothing writes it any more)."""
    try:
        db = sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=5.0)
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1")
        return db
    except sqlite3.OperationalError:
        return sqlite3.connect(f"file:{p}?immutable=1", uri=True)


def _read_sqlite(p: Path, since: int | None) -> dict[str, Any]:
    where = "" if since is None else f" WHERE step >= {int(since)}"
    try:
        db = _connect(p)
        try:
            steps = db.execute(f"SELECT {', '.join(STEP_COLUMNS)} FROM steps{where}").fetchall()
            colls = db.execute(f"SELECT {', '.join(COLLECTIVE_COLUMNS)} FROM collectives{where}").fetchall()
            devs = db.execute(f"SELECT {', '.join(DEVICE_COLUMNS)} FROM devices{where}").fetchall()
            events = [json.loads(r[0]) for r in db.execute("SELECT json FROM events")]
            meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
        finally:
            db.close()
    except (sqlite3.Error, json.JSONDecodeError) as exc:
        raise InputError(
            f"not a readable monitor database ({exc})", path=str(p), fix="remove the file or give another run directory"
        ) from None
    return {"steps": steps, "colls": colls, "devs": devs, "events": events, "meta": meta}


def _read_jsonl(p: Path, warnings: list[str], since: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"steps": [], "colls": [], "devs": [], "events": [], "meta": {}}
    text = p.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    bad = 0
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            kind = rec["t"]
        except (json.JSONDecodeError, KeyError, TypeError):
            bad += 1
            if bad == 1 and i == len(lines) - 1:
                warnings.append(f"{p}: the last line is cut short (the job was killed while writing?); read up to it")
            elif bad == 1:  # a job killed mid-line, then restarted into the same directory
                warnings.append(
                    f"{p}: line {i + 1} is not a monitor record (a job killed mid-line and restarted?); skipped"
                )
            continue
        if kind == "step":
            out["steps"].append(tuple(rec.get(c) for c in STEP_COLUMNS))
        elif kind == "coll":
            out["colls"].append(tuple(rec.get(c) for c in COLLECTIVE_COLUMNS))
        elif kind == "dev":
            out["devs"].append(tuple(rec.get(c) for c in DEVICE_COLUMNS))
        elif kind == "event":
            out["events"].append(rec["event"])
        elif kind == "meta":
            out["meta"].update(rec["meta"])
    if bad and not (out["steps"] or out["meta"] or out["events"]):
        raise InputError(
            "not monitor records (no line parses)", path=str(p), fix="remove the file from the run directory"
        )
    if since is not None:
        for key in ("steps", "colls", "devs"):
            out[key] = [r for r in out[key] if r[1] >= since]
    return out


def _columns(
    rows: list[tuple[Any, ...]], names: tuple[str, ...], ints: set[str], strs: set[str]
) -> dict[str, np.ndarray]:
    """Rows -> one array per column, converted by numpy (None -> NaN in the float columns)."""
    table = np.array(rows, dtype=object).reshape(len(rows), len(names))
    cols: dict[str, np.ndarray] = {}
    for j, c in enumerate(names):
        col = table[:, j]
        if c in strs:
            cols[c] = np.where(col == None, "", col).astype(object)  # noqa: E711 - elementwise
        elif c in ints:
            cols[c] = col.astype(np.int64)
        else:
            cols[c] = col.astype(np.float64)
    return cols


def _combine(run_dir: str, parts: list[dict[str, Any]], warnings: list[str]) -> RunData:
    steps = [r for p in parts for r in p["steps"]]
    steps.sort(key=lambda r: (r[0], r[1]))
    colls = [r for p in parts for r in p["colls"]]
    devs = [r for p in parts for r in p["devs"]]
    events = sorted((e for p in parts for e in p["events"]), key=lambda e: (e.get("time_unix_ns", 0), str(e)))
    meta = {int(p["meta"]["rank"]): p["meta"] for p in parts if int(p["meta"]["rank"]) >= 0}
    return RunData(
        run_dir=run_dir,
        steps=_columns(steps, STEP_COLUMNS, {"rank", "step", "start_unix_ns"}, {"tags"}),
        collectives=_columns(colls, COLLECTIVE_COLUMNS, {"rank", "step", "calls"}, {"op"}),
        devices=_columns(devs, DEVICE_COLUMNS, {"rank", "step"}, set()),
        meta=meta,
        events=events,
        warnings=tuple(warnings),
    )
