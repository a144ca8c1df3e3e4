"""Find training steps and assign device work to them.

Steps come from ``ProfilerStep#N`` host annotations (``XLAStep#N`` for JAX/XLA profiles: the
XPlane ``Steps`` line or ``StepTraceAnnotation``); else from a user-named marker (exact name,
or name followed by ``#``/digits); else the whole trace is one window. Device work belongs to
the step whose CPU span contains the runtime call that launched it (joined by correlation id);
device work with no known launch goes to the step whose window contains its start. The step
windows partition the device timeline (:func:`step_windows`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace.schema import KIND_CODE as KIND
from ..rankdata import RankData

_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
_XLA_STEP = re.compile(r"^XLAStep#\d+$")


@dataclass(frozen=True)
class StepSpans:
    names: tuple[str, ...]
    cpu_start: np.ndarray
    cpu_end: np.ndarray
    source: str  # "ProfilerStep" | "marker:NAME" | "whole-trace"
    # step annotations of another name found inside a step, so not taken as steps: (inner, outer)
    nested: tuple[tuple[str, str], ...] = ()


def find_steps(rd: RankData, marker: str | None) -> StepSpans:
    h = rd.host
    host_like = (h.kind == KIND["cpu_op"]) | (h.kind == KIND["user_annotation"])
    candidates: list[tuple[str, re.Pattern[str]]] = []
    if marker:
        candidates.append((f"marker:{marker}", re.compile(rf"^{re.escape(marker)}(?:[#_ ]?\d+)?$")))
    candidates.append(("ProfilerStep", _PROFILER_STEP))
    candidates.append(("XLA steps", _XLA_STEP))
    for source, pat in candidates:
        name_ok = np.array([bool(pat.match(n)) for n in h.names], dtype=bool)
        sel = np.flatnonzero(host_like & name_ok[h.name_idx])
        if sel.size:
            # the same step can be recorded twice (cpu_op and annotation); keep one per (name, ts)
            key = np.stack([h.name_idx[sel], h.ts[sel]], axis=1)
            _, first = np.unique(key, axis=0, return_index=True)
            sel = sel[np.sort(first)]
            o = np.argsort(h.ts[sel], kind="stable")
            sel = sel[o]
            # a marker nested inside another of the same kind (JAX records PjitFunction(f) twice per
            # call, one inside the other) is the same step: keep the outermost
            nested: tuple[tuple[str, str], ...] = ()
            if sel.size > 1:
                ends = h.end[sel]
                prev_max = np.maximum.accumulate(np.r_[np.iinfo(np.int64).min, ends[:-1]])
                keep = ends > prev_max
                outer = sel[keep][np.cumsum(keep) - 1]  # the kept step each marker lies in
                nested = tuple(
                    (h.names[h.name_idx[i]], h.names[h.name_idx[o]])
                    for i, o in zip(sel[~keep], outer[~keep])
                    if h.name_idx[i] != h.name_idx[o]
                )
                sel = sel[keep]
            return StepSpans(
                names=tuple(h.names[i] for i in h.name_idx[sel]),
                cpu_start=h.ts[sel],
                cpu_end=h.end[sel],
                source=source,
                nested=nested,
            )
    # whole trace
    starts = np.concatenate([h.ts, rd.dev.ts])
    ends = np.concatenate([h.end, rd.dev.end])
    if starts.size == 0:
        return StepSpans(names=(), cpu_start=np.empty(0, np.int64), cpu_end=np.empty(0, np.int64), source="whole-trace")
    return StepSpans(
        names=("whole trace",),
        cpu_start=np.array([starts.min()], np.int64),
        cpu_end=np.array([ends.max()], np.int64),
        source="whole-trace",
    )


_STEP_SUFFIX = re.compile(r"[#_ ]?\d+$")


def marker_candidates(rd: RankData, limit: int = 3) -> list[tuple[str, int]]:
    """Annotations that could mark steps, for the warning when none was found: names that recur
    (counting ``name``, ``name 3``, ``name#3``, ``name_3`` as one, the forms ``--step-marker NAME``
    accepts), ranked by the time their ranges cover, at most ``limit``: (name, occurrences).
    One pass per distinct name, none per row."""
    h = rd.host
    ann = np.flatnonzero(h.kind == KIND["user_annotation"])
    if ann.size == 0:
        return []
    count = np.bincount(h.name_idx[ann], minlength=len(h.names))
    dur = np.bincount(h.name_idx[ann], weights=(h.end - h.ts)[ann].astype(np.float64), minlength=len(h.names))
    by_base: dict[str, list[float]] = {}
    for i in np.flatnonzero(count):
        base = _STEP_SUFFIX.sub("", h.names[i]).strip()
        if base:
            acc = by_base.setdefault(base, [0.0, 0.0])
            acc[0] += count[i]
            acc[1] += dur[i]
    ranked = sorted(((b, int(c), d) for b, (c, d) in by_base.items() if c >= 2), key=lambda x: -x[2])
    return [(b, c) for b, c, _ in ranked[:limit]]


def _containing(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the span (sorted by start) that contains each t, else -1."""
    if starts.size == 0:
        return np.full(t.shape, -1, np.int64)
    i = np.searchsorted(starts, t, side="right") - 1
    ok = (i >= 0) & (t < ends[np.maximum(i, 0)])
    return np.where(ok, i, -1)


@dataclass(frozen=True, kw_only=True)
class StepWindows:
    """The device step windows: ``[start[i], end[i])``, a partition of ``[start[0], end[-1])``.

    ``own[i]``: step i launched device work (else its window falls back to its CPU span)."""

    start: np.ndarray
    end: np.ndarray
    own: np.ndarray


def _launched(rd: RankData, spans: StepSpans) -> np.ndarray:
    """Per device row: the step whose CPU span contains its launch call, else -1."""
    dev = rd.dev
    step = _containing(spans.cpu_start, spans.cpu_end, dev.launch_ts)
    return np.where(dev.launch_ts >= 0, step, -1)


def step_windows(rd: RankData, spans: StepSpans, launched: np.ndarray) -> StepWindows:
    """Windows that partition the timeline: step i starts at the first start of the device work it
    launched and ends where step i+1 starts; the last step ends at the last end of its own work.
    A step that launched nothing starts at its CPU start. Starts are made non-decreasing (a step
    never starts before the one before it), so the windows never overlap."""
    n = spans.cpu_start.size
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.full(n, np.iinfo(np.int64).min)
    k = launched >= 0
    np.minimum.at(first, launched[k], rd.dev.ts[k])
    np.maximum.at(last, launched[k], rd.dev.end[k])
    own = first <= last
    start = np.maximum.accumulate(np.where(own, first, spans.cpu_start)) if n else first
    end = np.empty(n, np.int64)
    if n:
        end[:-1] = start[1:]
        end[-1] = max(int(last[-1] if own[-1] else spans.cpu_end[-1]), int(start[-1]))
    return StepWindows(start=start, end=end, own=own)


def assign_device_work(rd: RankData, spans: StepSpans) -> tuple[np.ndarray, StepWindows]:
    """Step index per device event (-1: none) and the step windows. A row belongs to the step that
    launched it (its launch call inside the step's CPU span); a row whose launch is not known goes
    to the window that contains its start. The windows are placed by the launched rows and, for
    rows whose launch is not known (XLA), by the rows that start inside the step's CPU span."""
    step = _launched(rd, spans)
    unknown = rd.dev.launch_ts < 0
    if not unknown.any():
        return step, step_windows(rd, spans, step)
    # the windows' first and last work: launched rows, else unknown rows starting in the CPU span
    # (only for steps that launched nothing known)
    tentative = step.copy()
    guess = _containing(spans.cpu_start, spans.cpu_end, rd.dev.ts[unknown])
    known = np.r_[np.bincount(step[step >= 0], minlength=spans.cpu_start.size) > 0, True]
    tentative[unknown] = np.where(known[guess], -1, guess)
    win = step_windows(rd, spans, tentative)
    step[unknown] = _containing(win.start, win.end, rd.dev.ts[unknown])
    return step, win
