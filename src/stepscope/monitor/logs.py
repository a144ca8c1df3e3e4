"""Import existing training logs into a monitor run directory, so the fluctuation and straggler
analysis reads jobs that never ran the monitor. One line per logged step; other lines are ignored.

- **Megatron-LM** (``training.py``'s ``training_log``): `` [2024-05-01 12:00:00] iteration 100/500000
  | ... | elapsed time per iteration (ms): 1234.5 | ... | global batch size: 512 | ...``. The time is
  the mean over the log interval (the iterations since the previous logged line): each record is an
  **interval mean**, ``step`` the logged iteration, ``dur_ns`` the mean; the rank's meta
  ``log_interval`` is the most common gap between logged iterations. ``tokens`` = global batch size
  x ``seq_length`` (from the argument dump atop the log): the whole job's per iteration (meta
  ``tokens_scope: "job"``), None without both. A timers block after a logged line (``(min, max) time
  across ranks (ms):``, then ``    name ....: (min, max)``) becomes an event ``{"kind":
  "megatron_timers", "step": it, "timers": {name: [min_ms, max_ms]}}`` (min None in the ``max time
  across ranks`` form). Megatron prints from the last rank only: a file is one rank, read from the
  file name (``rank-3``, ``rank3``), else the file's index among the inputs.
- **torchtitan** (``metrics.py``): ``[titan] 2025-01-01 12:00:00,000 - root - INFO - step: 10  loss:
  7.8934  memory: 30.12GiB(31.70%)  tps: 6,789  ...`` (``wps`` in older versions; ANSI colours are
  stripped). A torchrun ``[rankN]:`` prefix sends the line to rank N, else the file is one rank. The
  line has no duration: ``dur_ns`` is the time since the rank's previous line over the steps between
  them (an interval mean too; a rank's first line, or a restart's, gives no record).
  ``peak_mem_bytes`` is the ``memory`` GiB (torchtitan's *reserved* peak), ``tokens`` = tps x period
  (per device, ``tokens_scope: "device"``).

A line is printed at the end of its step: ``start_unix_ns`` is its timestamp (UTC; Megatron's naive
time taken as UTC) minus ``dur_ns``. Without timestamps the timeline starts at 0, each record ending
``dur_ns`` x (iterations since the previous record) after the previous. Where the steps go back (a
restarted job appending to the log) the first record of a step is kept. Unmeasured fields are None.
"""

from __future__ import annotations

import calendar
import gzip
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from ..errors import InputError
from .record import STEP_COLUMNS
from .sinks import SinkKind, open_sink
from .store import rank_files

LogFormat = Literal["auto", "megatron", "torchtitan"]
_LINES_WANTED = {
    "auto": "no Megatron-LM `elapsed time per iteration` or torchtitan `step: N ... tps` lines",
    "megatron": "no Megatron-LM `iteration N/M | ... elapsed time per iteration (ms): X` lines",
    "torchtitan": "no torchtitan `step: N ... tps: X` lines",
}

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:\s?")
_FILE_RANK = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_TS = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:[,.](\d{1,9}))?")
_MEG_ITER = re.compile(r"\biteration\s+(\d+)\s*/\s*\d+")
_MEG_ELAPSED = re.compile(r"elapsed time per iteration \(ms\):\s*(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")
_MEG_GBS = re.compile(r"global batch size:\s*(\d+)")
_MEG_SEQ = re.compile(r"^\s*seq_length \.+ (\d+)\s*$")
_MEG_TIMERS = re.compile(r"time across ranks \(ms\):\s*$")
_MEG_TIMER = re.compile(r"^\s+(\S.*?) \.*: (?:\((\d+\.?\d*), (\d+\.?\d*)\)|(\d+\.?\d*))\s*$")
_TT_STEP = re.compile(r"\bstep:\s*(\d+)\b")
_TT_TPS = re.compile(r"\b[tw]ps:\s*(\d[\d,]*(?:\.\d+)?)")
_TT_MEM = re.compile(r"\bmemory:\s*(\d+(?:\.\d+)?)\s*GiB")


@dataclass(frozen=True, kw_only=True)
class ImportResult:
    """What was written: ranks, step records, the format read, warnings about the logs."""

    ranks: int
    steps: int
    format: str
    warnings: tuple[str, ...]


@dataclass
class _Point:  # one logged line
    step: int
    ts_ns: int | None
    dur_ns: int | None = None
    gbs: int | None = None
    tps: float | None = None
    mem_bytes: int | None = None


@dataclass
class _Rank:  # one rank's lines, from one file
    path: Path
    points: list[_Point] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    seq_length: int | None = None


def import_logs(
    paths: Sequence[str | Path], out_dir: Path, *, fmt: LogFormat = "auto", sink: SinkKind = "sqlite"
) -> ImportResult:
    """Parse every log (all before writing anything), then write one sink per rank into ``out_dir``,
    which must hold no monitor records yet. Raises ``InputError`` for a missing or unreadable file,
    a file with no step lines of the format, formats mixed across files, a rank in two files, or
    no record at all."""
    if not paths:
        raise InputError("no log files given", fix="give one or more Megatron-LM or torchtitan training logs")
    out = Path(out_dir)
    _refuse_used_dir(out)
    parsed = [_parse_file(Path(p), i, fmt) for i, p in enumerate(paths)]
    kinds = sorted({kind for kind, _ in parsed})
    if len(kinds) > 1:
        raise InputError(
            f"the logs mix formats ({' and '.join(kinds)})", fix="import each training job's logs separately"
        )
    kind = kinds[0]
    ranks = _merge_ranks([r for _, file_ranks in parsed for r in file_ranks.items()])
    warnings: list[str] = []
    built = {rank: _rank_rows(rank, data, kind, warnings) for rank, data in sorted(ranks.items())}
    built = {rank: rows_interval for rank, rows_interval in built.items() if rows_interval[0]}
    if not built:
        raise InputError(
            "no step record could be derived from the logs",
            path=str(paths[0]) if len(paths) == 1 else None,
            fix="torchtitan lines need timestamps (the `[titan] %(asctime)s` logger prefix) and two logged steps per rank",
        )
    world = max(len(built), max(built) + 1)
    out.mkdir(parents=True, exist_ok=True)
    scope = "job" if kind == "megatron" else "device"
    for rank, (rows, interval) in built.items():
        meta: dict[str, Any] = {"rank": rank, "world_size": world, "level": 0, "source": f"{kind}-log"}
        meta |= {"log_file": str(ranks[rank].path), "log_interval": interval, "tokens_scope": scope}
        s = open_sink(sink, out, rank)
        try:
            s.write(steps=rows, events=ranks[rank].events, meta=meta)
        finally:
            s.close()
    n_steps = sum(len(rows) for rows, _ in built.values())
    return ImportResult(ranks=len(built), steps=n_steps, format=kind, warnings=tuple(warnings))


def _refuse_used_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise InputError("not a directory", path=str(out), fix="give a new or empty directory for the run")
    if out.is_dir() and rank_files(out):
        raise InputError(
            "already holds monitor records (rank-NNNNN.db / .jsonl); importing again would add every step twice",
            path=str(out),
            fix="give a new or empty directory",
        )


def _lines(path: Path) -> Iterator[str]:
    """The file's lines without line ends and ANSI escapes, one at a time (``.gz`` read through)."""
    text: dict[str, Any] = {"encoding": "utf-8", "errors": "replace"}
    try:
        with gzip.open(path, "rt", **text) if path.suffix == ".gz" else path.open(**text) as f:
            for line in f:
                line = line.rstrip("\r\n")
                yield _ANSI.sub("", line) if "\x1b" in line else line
    except (OSError, EOFError) as exc:
        raise InputError(
            f"cannot read the log ({getattr(exc, 'strerror', None) or exc})",
            path=str(path),
            fix="check the path and its permissions",
        ) from None


def _parse_file(path: Path, index: int, fmt: LogFormat) -> tuple[str, dict[int, _Rank]]:
    """The file's format and its ranks' lines. With ``fmt="auto"`` the first step line of either
    format decides and the file is read in that format from there on."""
    if not path.is_file():
        raise InputError(
            "no such file" if not path.exists() else "not a file",
            path=str(path),
            fix="give the path of a training log (the job's stdout)",
        )
    named = _FILE_RANK.search(path.name)
    rank = int(named.group(1)) if named else index
    meg, titan = _MegatronReader(path, rank), _TitanReader(path, rank)
    kind: str | None = None if fmt == "auto" else fmt
    for line in _lines(path):
        if kind == "megatron":
            meg.feed(line)
        elif kind == "torchtitan":
            titan.feed(line)
        elif meg.feed(line):
            kind = "megatron"
        elif titan.feed(line):
            kind = "torchtitan"
    ranks = meg.finish() if kind == "megatron" else titan.ranks
    if kind is None or not ranks:
        raise InputError(
            _LINES_WANTED[fmt],
            path=str(path),
            fix="give the training job's console log (Megatron-LM's pretrain_*.py or torchtitan's train.py stdout)",
        )
    return kind, ranks


def _merge_ranks(items: list[tuple[int, _Rank]]) -> dict[int, _Rank]:
    ranks: dict[int, _Rank] = {}
    for rank, data in items:
        if rank in ranks:
            raise InputError(
                f"rank {rank} is in two logs: {ranks[rank].path} and {data.path}",
                fix="give each rank's log once; name per-rank files `...rank-N...` so each has its own rank",
            )
        ranks[rank] = data
    return ranks


def _timestamp_ns(text: str) -> int | None:
    """The first ``YYYY-MM-DD HH:MM:SS[,fff]`` in ``text`` as unix ns, taken as UTC."""
    m = _TS.search(text)
    if not m:
        return None
    try:
        dt = datetime.strptime(f"{m.group(1)} {m.group(2)}", "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    frac = int((m.group(3) or "0").ljust(9, "0"))
    return calendar.timegm(dt.timetuple()) * 1_000_000_000 + frac


class _MegatronReader:
    """One Megatron-LM log: its logged iterations, timers blocks and ``seq_length``."""

    def __init__(self, path: Path, rank: int) -> None:
        self.data = _Rank(path)
        self.rank = rank
        self._prefix_rank: int | None = None
        self._block: dict[str, list[float | None]] | None = None

    def feed(self, line: str) -> bool:
        """Read one line; True when it is a logged iteration."""
        m = _RANK_PREFIX.match(line)
        if m:
            line = line[m.end() :]
        if self._block is not None:
            t = _MEG_TIMER.match(line)
            if t:
                lo, hi = (None, t.group(4)) if t.group(4) else (t.group(2), t.group(3))
                self._block[t.group(1)] = [None if lo is None else float(lo), float(hi)]
                return False
            self._end_block()
        if "elapsed time per iteration" in line:
            point = _megatron_point(line)
            if point is not None:
                self.data.points.append(point)
                if m and self._prefix_rank is None:
                    self._prefix_rank = int(m.group(1))
            return point is not None
        if "time across ranks (ms):" in line:
            if _MEG_TIMERS.search(line):
                self._block = {}
        elif self.data.seq_length is None and "seq_length" in line:
            s = _MEG_SEQ.match(line)
            self.data.seq_length = int(s.group(1)) if s else None
        return False

    def _end_block(self) -> None:
        """A timers block belongs to the iteration logged just before it (blocks printed before
        training, such as model setup or checkpoint loading, are left out)."""
        block, self._block = self._block, None
        if not block or not self.data.points:
            return
        last = self.data.points[-1]
        events = self.data.events
        if events and events[-1]["step"] == last.step:
            events[-1]["timers"].update(block)
            return
        event: dict[str, Any] = {"kind": "megatron_timers", "step": last.step, "timers": block}
        if last.ts_ns is not None:
            event["time_unix_ns"] = last.ts_ns
        events.append(event)

    def finish(self) -> dict[int, _Rank]:
        """The end of the file: its rank and lines (none when it had no logged iteration)."""
        self._end_block()
        if not self.data.points:
            return {}
        return {self._prefix_rank if self._prefix_rank is not None else self.rank: self.data}


def _megatron_point(line: str) -> _Point | None:
    it = _MEG_ITER.search(line)
    ms = _MEG_ELAPSED.search(line)
    if not it or not ms:
        return None
    gbs = _MEG_GBS.search(line)
    return _Point(
        step=int(it.group(1)),
        ts_ns=_timestamp_ns(line[: it.start()]),
        dur_ns=round(float(ms.group(1)) * 1e6),
        gbs=int(gbs.group(1)) if gbs else None,
    )


class _TitanReader:
    """One torchtitan log: its logged steps, grouped by the ``[rankN]:`` prefix."""

    def __init__(self, path: Path, rank: int) -> None:
        self.path = path
        self.rank = rank
        self.ranks: dict[int, _Rank] = {}

    def feed(self, line: str) -> bool:
        """Read one line; True when it is a logged training step (``validate step:`` and
        ``evaluation: step:`` lines are not)."""
        if "step:" not in line or ("tps:" not in line and "wps:" not in line):
            return False
        rank = self.rank
        m = _RANK_PREFIX.match(line)
        if m:
            rank, line = int(m.group(1)), line[m.end() :]
        s = _TT_STEP.search(line)
        tps = _TT_TPS.search(line)
        if not s or not tps or tps.start() < s.start():
            return False
        head = line[: s.start()]
        if any(c.isalpha() for c in head.rsplit(" - ", 1)[-1]):
            return False
        mem = _TT_MEM.search(line)
        point = _Point(
            step=int(s.group(1)),
            ts_ns=_timestamp_ns(head),
            tps=float(tps.group(1).replace(",", "")),
            mem_bytes=int(float(mem.group(1)) * 2**30) if mem else None,
        )
        self.ranks.setdefault(rank, _Rank(self.path)).points.append(point)
        return True


@dataclass
class _Rec:  # a step record, before its start time is placed
    step: int
    end_ns: int | None
    dur_ns: int
    gap: int
    tokens: int | None = None
    mem_bytes: int | None = None


def _log_interval(points: list[_Point]) -> int | None:
    """The most common positive gap between consecutive logged steps (the smaller on a tie)."""
    gaps = Counter(b.step - a.step for a, b in zip(points, points[1:]) if b.step > a.step)
    return min(gaps, key=lambda g: (-gaps[g], g)) if gaps else None


def _megatron_recs(data: _Rank, interval: int | None) -> list[_Rec]:
    recs = []
    prev: int | None = None
    for p in data.points:
        gap = p.step - prev if prev is not None and p.step > prev else (interval or 1)
        tokens = p.gbs * data.seq_length if p.gbs and data.seq_length else None
        recs.append(_Rec(step=p.step, end_ns=p.ts_ns, dur_ns=p.dur_ns or 0, gap=gap, tokens=tokens))
        prev = p.step
    return recs


def _titan_recs(data: _Rank) -> list[_Rec]:
    """A record per line that follows a line of the same rank at an earlier step and time."""
    recs = []
    for a, b in zip(data.points, data.points[1:]):
        if a.ts_ns is None or b.ts_ns is None or b.step <= a.step or b.ts_ns <= a.ts_ns:
            continue
        gap = b.step - a.step
        dur = round((b.ts_ns - a.ts_ns) / gap)
        tokens = round(b.tps * dur / 1e9) if b.tps is not None else None
        recs.append(_Rec(step=b.step, end_ns=b.ts_ns, dur_ns=dur, gap=gap, tokens=tokens, mem_bytes=b.mem_bytes))
    return recs


def _rank_rows(rank: int, data: _Rank, kind: str, warnings: list[str]) -> tuple[list[tuple[Any, ...]], int | None]:
    """The rank's step rows in ``STEP_COLUMNS`` order and its log interval."""
    interval = _log_interval(data.points)
    recs = _megatron_recs(data, interval) if kind == "megatron" else _titan_recs(data)
    if kind == "torchtitan" and not recs:
        why = "only one step line" if len(data.points) == 1 else "no two lines with timestamps and increasing steps"
        warnings.append(f"{data.path}: rank {rank}: {why}, so no step period to derive: no records")
    rows: list[tuple[Any, ...]] = []
    end = 0
    last: int | None = None
    for r in recs:
        end = r.end_ns if r.end_ns is not None else end + r.dur_ns * r.gap
        if last is not None and r.step <= last:
            continue
        last = r.step
        values: dict[str, Any] = {"rank": rank, "step": r.step, "start_unix_ns": end - r.dur_ns, "dur_ns": r.dur_ns}
        values |= {"tokens": r.tokens, "peak_mem_bytes": r.mem_bytes}
        rows.append(tuple(values.get(c) for c in STEP_COLUMNS))
    if len(rows) < len(recs):
        warnings.append(
            f"{data.path}: rank {rank}: the steps go back (a restarted job appended to the log?): "
            f"{len(recs) - len(rows)} repeated step(s) left out, the first record of each kept"
        )
    if kind == "megatron" and data.seq_length is None and any(p.gbs for p in data.points):
        warnings.append(f"{data.path}: no `seq_length` in the log's argument dump: tokens left unknown")
    return rows, interval
