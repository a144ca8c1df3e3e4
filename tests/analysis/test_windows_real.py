"""Step windows on real public traces, checked against an independent computation.

The expected figures come from the trace JSON itself (not from stepscope's reader): steps are the
``ProfilerStep#N`` ranges, a device row belongs to the step whose range holds its launch call
(runtime row with the same correlation id); step i's window runs from the first start of its rows
to step i+1's first start, the last to the last end of its own rows; idle = window minus the
union of ALL kernel/memcpy/memset intervals clipped to it; input wait = idle time covered by
the data-loader ranges (``DataLoader`` in the name).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

import stepscope
from stepscope.analysis.api import analyze

FIX = Path(__file__).parents[1] / "fixtures" / "traces"
RESNET = FIX / "kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
NEG_QUEUE = FIX / "HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz"
_DEVICE = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}


def _union_len(s: np.ndarray, e: np.ndarray) -> int:
    """Length of the union of intervals: sorted by start, a new run begins where a start passes the
    running max of the ends before it; each run ends at the running max at its last interval."""
    if s.size == 0:
        return 0
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    run = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > run[:-1]]
    heads = np.flatnonzero(new)
    tails = np.r_[heads[1:] - 1, s.size - 1]
    return int((run[tails] - s[heads]).sum())


def _clip(s: np.ndarray, e: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.maximum(s, lo), np.minimum(e, hi)
    k = b > a
    return a[k], b[k]


def _expected(path: Path) -> list[dict[str, float]]:
    ev = [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("ph") == "X"]

    def ns(x: float) -> int:
        return int(round(float(x) * 1000))

    steps = sorted(
        {(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in ev if re.match(r"^ProfilerStep#\d+$", e["name"])}
    )
    launch = {
        e["args"]["correlation"]: ns(e["ts"])
        for e in ev
        if str(e.get("cat", "")).lower() in ("runtime", "cuda_runtime") and "correlation" in e.get("args", {})
    }
    dev = [e for e in ev if str(e.get("cat", "")).lower() in _DEVICE]
    ds = np.array([ns(e["ts"]) for e in dev], np.int64)
    de = ds + np.array([ns(e["dur"]) for e in dev], np.int64)
    lt = np.array([launch.get(e["args"].get("correlation"), -1) for e in dev], np.int64)
    loader = [e for e in ev if "DataLoader" in e["name"] and str(e.get("cat", "")).lower() != "runtime"]
    ls = np.array([ns(e["ts"]) for e in loader], np.int64)
    le = ls + np.array([ns(e["dur"]) for e in loader], np.int64)
    first, last = [], []
    for c0, c1 in steps:
        mine = (lt >= c0) & (lt < c1)
        first.append(max([int(ds[mine].min()), *first[-1:]]))
        last.append(int(de[mine].max()))
    out = []
    for w0, w1 in zip(first, [*first[1:], last[-1]]):
        us, ue = _clip(ds, de, w0, w1)
        xs, xe = _clip(ls, le, w0, w1)
        busy = _union_len(us, ue)
        both = _union_len(np.r_[us, xs], np.r_[ue, xe])
        out.append({"step": w1 - w0, "idle": (w1 - w0) - busy, "input": both - busy})
    return out


@pytest.mark.parametrize("path", [RESNET, NEG_QUEUE], ids=["resnet50_num_workers_0", "negative_queue"])
def test_windows_match_an_independent_union(path: Path) -> None:
    want = _expected(path)
    got = analyze(stepscope.load(path)).ranks[0].steps
    assert len(got) == len(want)
    for s, w in zip(got, want):
        tol = 1_000 + 0.001 * w["step"]
        assert abs(s.step_time_ns - w["step"]) <= tol
        assert abs(s.idle_ns - w["idle"]) <= tol
        assert abs(s.idle_causes.input_wait_ns - w["input"]) <= tol
        assert s.compute_ns + s.exposed_comm_ns + s.exposed_memcpy_ns + s.idle_ns == s.step_time_ns
        c = s.idle_causes
        assert c.input_wait_ns + c.host_bound_ns + c.wait_ns + c.other_ns == s.idle_ns


def test_resnet50_is_input_bound() -> None:
    """num_workers=0: about 176 ms per iteration, about 43% idle, most of it waiting for input."""
    want = _expected(RESNET)[:-1]  # the last step has no next step: no gap after it
    assert all(150e6 <= w["step"] <= 200e6 for w in want)
    assert all(0.35 <= w["idle"] / w["step"] <= 0.50 for w in want)
    assert all(w["input"] > 0.5 * w["idle"] for w in want)
    r = analyze(stepscope.load(RESNET)).ranks[0]
    assert 150e6 <= r.step_stats.median_ns <= 200e6
    steady = r.steps[:-1]
    assert all(0.35 <= s.idle_ns / s.step_time_ns <= 0.50 for s in steady)
    assert all(s.idle_causes.input_wait_ns > 0.5 * s.idle_ns for s in steady)


def test_negative_queue_steps_are_the_iteration_period() -> None:
    """Windows partition time: about 216 ms steps, about 64% idle (not 373 ms overlapping windows)."""
    want = _expected(NEG_QUEUE)
    assert all(200e6 <= w["step"] <= 230e6 for w in want[1:-1])
    assert all(0.58 <= w["idle"] / w["step"] <= 0.70 for w in want)
    r = analyze(stepscope.load(NEG_QUEUE)).ranks[0]
    assert 200e6 <= r.step_stats.median_ns <= 230e6
    assert all(0.58 <= s.idle_ns / s.step_time_ns <= 0.70 for s in r.steps)
    # the windows do not overlap
    assert all(a.window_end_ns == b.window_start_ns for a, b in zip(r.steps, r.steps[1:]))
