"""Unfused chains (analysis/steps/fusion.py, compute.unfused_chains): by hand on a built trace, and
the chain counts of a real Hugging Face model against a plain scan of its JSON."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analysis.api import analyze

from .. import synth

US = 1000
N = 6
QWEN = (
    Path(__file__).resolve().parents[1]
    / "fixtures/traces/TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
)
RMS = [("aten::to", 10), ("aten::pow", 10), ("aten::mean", 20), ("aten::add", 5), ("aten::rsqrt", 5),
       ("aten::mul", 10), ("aten::to", 10), ("aten::mul", 30)]  # fmt: skip


def _steps(chain: list[tuple[str, float]], tid2_from: int | None = None) -> list[dict[str, Any]]:
    """Each 1000 us step: aten::linear launches a 500 us GEMM at t+2; then the chain's operators,
    operator j at t+10+5j (3 us long) launching its kernel (the given us) back to back from t+510.
    ``tid2_from``: operators from that index on run on another thread."""
    ev = []
    for k in range(N):
        t = 1000 * k
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 1000))
        ev.append(synth.cpu("aten::linear", t + 1, 3))
        ev += synth.launch("sm90_xmma_gemm_bf16bf16_bf16f32", t + 1.5, t + 2, 500)
        start = t + 510
        for j, (name, dur) in enumerate(chain):
            tid = 2 if tid2_from is not None and j >= tid2_from else 1
            ev.append(synth.cpu(name, t + 10 + 5 * j, 3, tid=tid))
            ev += synth.launch("vectorized_elementwise_kernel", t + 11 + 5 * j, start, dur, tid=tid)
            start += dur
    return ev


def _run(tmp_path: Path, events: list[dict[str, Any]]):
    return analyze(stepscope.load(synth.write(tmp_path / "t.json", events)))


def test_an_unfused_rms_norm_is_found_with_its_saving(tmp_path: Path) -> None:
    """One chain per step: kernels 10+10+20+5+5+10+10+30 = 100 us, the longest 30: saving 70 us;
    7 operators removed. Windows 1000 us, the last ends at the chain's end (610 us): 935 us mean,
    70/935 = 7.5% >= 3%; saving mid 0.8 x 70 us."""
    a = _run(tmp_path, _steps(RMS))
    (p,) = a.ranks[0].extras["fusion"].patterns
    assert (p.name, p.matches, p.ops_removed, p.kernel_ns, p.saving_ns) == ("rms_norm", 1, 7, 100 * US, 70 * US)
    f = {x.id: x for x in a.findings}["compute.unfused_chains"]
    assert f.saving.mid_ns == 56_000
    assert "rms_norm" in f.title


def test_no_chain_no_finding(tmp_path: Path) -> None:
    """The same operators with mean and add swapped are not the RMSNorm chain."""
    swapped = [RMS[0], RMS[1], RMS[3], RMS[2], *RMS[4:]]
    a = _run(tmp_path, _steps(swapped))
    assert a.ranks[0].extras["fusion"].patterns == ()
    assert "compute.unfused_chains" not in {x.id for x in a.findings}


def test_a_chain_split_over_two_threads_is_not_one(tmp_path: Path) -> None:
    assert _run(tmp_path, _steps(RMS, tid2_from=4)).ranks[0].extras["fusion"].patterns == ()


def _top_level_names(path: Path) -> list[str]:
    """Each thread's outermost cpu ops in order, joined per thread, from a plain json.load."""
    ev = [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    steps = [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("cat") == "user_annotation"
             and e["name"].startswith("ProfilerStep#")]  # fmt: skip
    ev.sort(key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    out, end, tid = [], -1.0, None
    for e in ev:
        if e["tid"] != tid:
            out.append("|")
            tid, end = e["tid"], -1.0
        if e["ts"] >= end and any(s["ts"] <= e["ts"] < s["ts"] + s["dur"] for s in steps):
            out.append(e["name"])
        end = max(end, e["ts"] + e["dur"]) if e["ts"] < end else e["ts"] + e["dur"]
    return out


def test_real_model_chains_match_a_plain_scan() -> None:
    """Qwen1.5-0.5B (24 layers): two RMSNorms per layer and a final one, RoPE on q and k, one SwiGLU
    per layer; counted by a plain substring scan of the op names."""
    text = ";".join(_top_level_names(QWEN)) + ";"
    want = {
        "rms_norm": text.count("aten::to;aten::pow;aten::mean;aten::add;aten::rsqrt;aten::mul;aten::to;aten::mul;"),
        "rotary_embedding": text.count("aten::mul;aten::slice;aten::slice;aten::neg;aten::cat;aten::mul;aten::add;"),
        "swiglu": text.count("aten::silu;aten::linear;aten::mul;"),
    }
    assert want == {"rms_norm": 49, "rotary_embedding": 48, "swiglu": 24}
    got = {p.name: p.matches for p in analyze(stepscope.load(QWEN)).ranks[0].extras["fusion"].patterns}
    assert got == pytest.approx(want)
