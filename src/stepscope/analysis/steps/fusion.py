"""Fusion candidates: unfused operator sequences (RMSNorm, rotary embedding, SwiGLU, tanh-GELU
written out op by op) and what a fused kernel would save on the device.

The sequences (``data/fusion_patterns.yaml``) are matched on each host thread's framework operators
in order (top-level ``cpu_op`` rows, as ``dispatch.py``), by a regular expression over their names;
a run never spans two threads. A device row belongs to the top-level operator whose time range, on
the thread of its launch call, holds that call.

Per match, over its fused operators (the pattern's operators but its ``skip`` ones):
``kernel_ns`` = their kernel time, ``saving_ns`` = ``kernel_ns`` minus the longest of their
operators' kernel time: a fused kernel reads and writes the tensor once, so it costs about what the
longest step of the chain costs (the chains are memory-bound elementwise work on one tensor shape).
``ops_removed`` = fused operators - 1: the launches (and host dispatches) a fusion removes. Figures
are per steady step (matches whose first operator starts in a steady CPU step).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

from ...errors import ConfigError
from ...yamlio import safe_load
from ..context import RankContext
from ..roofline.phases import time_band


@dataclass(frozen=True, kw_only=True)
class FusionPattern:
    name: str
    ops: tuple[tuple[str, bool], ...]  # (operator name, optional)
    skip: frozenset[str]
    fused: str  # the fused kernel that replaces it

    def regex(self, code_of: dict[str, str]) -> str | None:
        """The pattern over the operators' characters; None when a required operator is absent."""
        parts = []
        for op, optional in self.ops:
            if op not in code_of:
                if optional:
                    continue
                return None
            parts.append(re.escape(code_of[op]) + ("?" if optional else ""))
        return "".join(parts)


@dataclass(frozen=True, kw_only=True)
class PatternMatches:
    name: str
    fused: str
    matches: float  # per steady step
    ops_removed: float  # per steady step
    kernel_ns: float  # per steady step: kernel time of the fused operators
    saving_ns: float  # per steady step: kernel_ns minus the longest operator's, per match


@dataclass(frozen=True, kw_only=True)
class Fusion:
    patterns: tuple[PatternMatches, ...]  # those with a match, largest saving first


@cache
def patterns() -> tuple[FusionPattern, ...]:
    doc = safe_load(resources.files("stepscope.data").joinpath("fusion_patterns.yaml").read_text())
    out = []
    try:
        for p in doc["patterns"]:
            ops = tuple((str(o).rstrip("?"), str(o).endswith("?")) for o in p["ops"])
            out.append(FusionPattern(name=str(p["name"]), ops=ops, skip=frozenset(p.get("skip", ())), fused=p["fused"]))
    except (KeyError, TypeError) as e:
        raise ConfigError(
            f"fusion_patterns.yaml: bad pattern ({e})", fix="each pattern needs name, ops, fused"
        ) from None
    return tuple(out)


def compute(ctx: RankContext) -> Fusion:
    h = ctx.data.host
    ops = h.operators
    steady_steps = [i for i, s in enumerate(ctx.steps) if not s.warmup]
    code_of = {name: chr(_BASE + i) for i, name in enumerate(h.names)}
    wanted = [(p, rx) for p in patterns() if (rx := p.regex(code_of)) is not None]
    if ops.size == 0 or not steady_steps or not wanted:
        return Fusion(patterns=())
    text = _sequence(ctx, ops)
    # character position -> operator: minus the separators before it
    seps = np.flatnonzero(np.frombuffer(text.encode("utf-32-le"), np.uint32) == ord(_THREAD))
    step_of = _step_of(ctx, h.ts[ops], steady_steps)
    hits = {p.name: [(m.start(), m.group(0)) for m in re.finditer(rx, text)] for p, rx in wanted}
    if not any(hits.values()):
        return Fusion(patterns=())
    kernel_ns = _kernel_time_per_op(ctx, ops)
    n_steps = len(steady_steps)
    out = []
    for p, _rx in wanted:
        skip = {code_of[name] for name in p.skip if name in code_of}
        matches = removed = 0
        k_ns = s_ns = 0.0
        for start, chars in hits[p.name]:
            first = start - int(np.searchsorted(seps, start, side="right"))
            if step_of[first] < 0:
                continue
            keep = np.array([c not in skip for c in chars], bool)
            k = kernel_ns[first : first + keep.size][keep]
            matches, removed = matches + 1, removed + k.size - 1
            k_ns += float(k.sum())
            s_ns += float(k.sum() - k.max()) if k.size else 0.0
        if matches:
            out.append(
                PatternMatches(
                    name=p.name,
                    fused=p.fused,
                    matches=matches / n_steps,
                    ops_removed=removed / n_steps,
                    kernel_ns=k_ns / n_steps,
                    saving_ns=s_ns / n_steps,
                )
            )
    return Fusion(patterns=tuple(sorted(out, key=lambda x: -x.saving_ns)))


def _kernel_time_per_op(ctx: RankContext, ops: np.ndarray) -> np.ndarray:
    """Kernel time of each top-level operator (``ops``, sorted by thread then start): the device rows
    whose launch call lies in its range on its thread."""
    h, d = ctx.data.host, ctx.data.dev
    out = np.zeros(ops.size, np.float64)
    if d.size == 0:
        return out
    tids = np.unique(h.tid[ops])
    lo, span = time_band(ctx.data)  # launch calls are host times: inside the band

    def key(tid: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.searchsorted(tids, tid).astype(np.int64) * span + (t - lo)

    k0, k1 = key(h.tid[ops], h.ts[ops]), key(h.tid[ops], h.end[ops])
    ok = (d.launch_ts >= 0) & np.isin(d.launch_tid, tids)
    kd = key(d.launch_tid[ok], d.launch_ts[ok])
    i = np.searchsorted(k0, kd, side="right") - 1
    inside = (i >= 0) & (kd < k1[np.maximum(i, 0)])
    dur = (d.end - d.ts)[ok][inside]
    return np.bincount(i[inside], weights=dur, minlength=ops.size).astype(np.float64)


#: operator names become characters from this code point on (past the surrogates: every code point
#: is a valid character); the thread separator is a code point below it
_BASE = 0x10000
_THREAD = "\x01"


def _sequence(ctx: RankContext, ops: np.ndarray) -> str:
    """The operators as one character each (``_BASE`` + name index), ``_THREAD`` before each
    thread's first: character ``i`` of the text (separators removed) is operator ``i``."""
    h = ctx.data.host
    codes = h.name_idx[ops].astype(np.uint32) + _BASE
    tid = h.tid[ops]
    starts = np.flatnonzero(np.r_[True, tid[1:] != tid[:-1]])
    with_sep = np.insert(codes, starts, ord(_THREAD))
    return with_sep.tobytes().decode("utf-32-le")


def _step_of(ctx: RankContext, t: np.ndarray, steady_steps: list[int]) -> np.ndarray:
    """The steady CPU step holding each time, -1 for none."""
    c0, c1 = ctx.spans.cpu_start, ctx.spans.cpu_end
    i = np.searchsorted(c0, t, side="right") - 1
    ok = (i >= 0) & (t < c1[np.maximum(i, 0)])
    steady = np.zeros(len(c0), bool)
    steady[steady_steps] = True
    return np.where(ok & steady[np.maximum(i, 0)], i, -1)
