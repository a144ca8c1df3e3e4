"""stepscope diff: verdicts, deltas that add up, the CI gate, reports as inputs (times in us)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from stepscope.cli import main
from stepscope.diff.compare import mann_whitney_p

from .. import synth

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"


def _trace(path: Path, gemm_us: list[float], gap_us: float = 20) -> Path:
    """One GEMM per step, each launched ahead of its start; a ``gap_us`` host-bound gap after it
    (the next GEMM is launched 1 us before it starts)."""
    ev, t = [], 0.0
    for k, g in enumerate(gemm_us):
        ev.append(synth.step(f"ProfilerStep#{k + 1}", t, g + gap_us))
        ev += synth.launch(GEMM, t + gap_us - 1, t + gap_us, g)
        t += g + gap_us
    return synth.write(path, ev)


def test_mann_whitney_by_hand() -> None:
    """x = 1,2,3 and y = 4,5,6: U = 0, mean 4.5, variance 3*3*7/12 = 5.25; with the continuity
    correction z = 4/sqrt(5.25) = 1.7457, two-sided p = erfc(z/sqrt 2) = 0.0809."""
    p = mann_whitney_p(np.array([1.0, 2, 3]), np.array([4.0, 5, 6]))
    assert p == pytest.approx(math.erfc(4 / math.sqrt(5.25) / math.sqrt(2)))
    assert p == pytest.approx(0.0809, abs=1e-4)
    assert mann_whitney_p(np.array([2.0, 2, 2]), np.array([2.0, 2, 2])) == 1.0


def test_a_run_diffed_with_itself_is_same_and_passes_the_gate(tmp_path: Path) -> None:
    a = _trace(tmp_path / "a.json", [100, 101, 99, 100, 102, 98, 100, 101])
    out = tmp_path / "d.json"
    assert main(["diff", str(a), str(a), "--json", str(out), "--fail-if-slower", "1"]) == 0
    d = json.loads(out.read_text())
    assert d["verdict"] == "same" and d["step_time"]["p_value"] == 1.0
    assert all(v["delta_ns"] == 0 for v in d["breakdown"].values())


def test_slower_gemm_is_slower_with_deltas_that_add_up_and_fails_the_gate(tmp_path: Path) -> None:
    """B's GEMM is 30 us longer in every step (130 vs 100 us; steps 150 vs 120 us but the last,
    which ends at its GEMM): the compute delta is the whole step delta."""
    base = [100, 101, 99, 100, 102, 98, 100, 101]
    a = _trace(tmp_path / "a.json", base)
    b = _trace(tmp_path / "b.json", [g + 30 for g in base])
    out = tmp_path / "d.json"
    assert main(["diff", str(a), str(b), "--json", str(out), "--fail-if-slower", "5"]) == 1
    d = json.loads(out.read_text())
    assert d["verdict"] == "slower" and d["step_time"]["delta_ratio"] > 0.2
    step_delta = d["step_time"]["b_mean_ns"] - d["step_time"]["a_mean_ns"]
    assert sum(v["delta_ns"] for v in d["breakdown"].values()) == pytest.approx(step_delta)
    assert d["breakdown"]["compute_ns"]["delta_ns"] == pytest.approx(30_000)
    (k,) = [k for k in d["kernels"] if k["name"] == GEMM]
    assert k["kind"] == "slower" and k["delta_ns"] == pytest.approx(30_000)
    # a limit above the change passes; the reverse direction is faster and passes
    assert main(["diff", str(a), str(b), "--json", str(tmp_path / "e.json"), "--fail-if-slower", "50"]) == 0
    assert main(["diff", str(b), str(a), "--json", str(tmp_path / "f.json"), "--fail-if-slower", "5"]) == 0
    assert json.loads((tmp_path / "f.json").read_text())["verdict"] == "faster"


def test_noise_is_not_a_regression(tmp_path: Path) -> None:
    """B's steps are A's in another order: same distribution, verdict same."""
    base = [100, 104, 96, 100, 103, 97, 101, 99]
    a = _trace(tmp_path / "a.json", base)
    b = _trace(tmp_path / "b.json", base[::-1])
    out = tmp_path / "d.json"
    assert main(["diff", str(a), str(b), "--json", str(out), "--fail-if-slower", "1"]) == 0
    assert json.loads(out.read_text())["verdict"] == "same"


def test_too_few_steps_is_inconclusive(tmp_path: Path) -> None:
    a = _trace(tmp_path / "a.json", [100, 100])
    b = _trace(tmp_path / "b.json", [200, 200])
    out = tmp_path / "d.json"
    assert main(["diff", str(a), str(b), "--json", str(out), "--fail-if-slower", "5"]) == 0
    assert json.loads(out.read_text())["verdict"] == "inconclusive"


def test_an_analyze_report_is_an_input(tmp_path: Path) -> None:
    base = [100, 101, 99, 100, 102, 98, 100, 101]
    a = _trace(tmp_path / "a.json", base)
    b = _trace(tmp_path / "b.json", [g + 30 for g in base])
    rep = tmp_path / "a_report.json"
    assert main(["analyze", str(a), "--json", str(rep), "-q"]) == 0
    out1, out2 = tmp_path / "d1.json", tmp_path / "d2.json"
    assert main(["diff", str(rep), str(b), "--json", str(out1)]) == 0
    assert main(["diff", str(a), str(b), "--json", str(out2)]) == 0
    d1, d2 = json.loads(out1.read_text()), json.loads(out2.read_text())
    assert d1["step_time"] | {"p_value": 0} == d2["step_time"] | {"p_value": 0}
    assert d1["verdict"] == d2["verdict"] == "slower"


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _trace(tmp_path / "a.json", [100, 100, 100])
    assert main(["diff", str(a), str(tmp_path / "missing.json")]) == 2
    bad = tmp_path / "r.json"
    bad.write_text('{"schema_version": "9.0", "tool": "stepscope", "ranks": []}')
    assert main(["diff", str(bad), str(a)]) == 2
    assert "schema" in capsys.readouterr().err


def test_one_model_on_two_vendors_is_matched_by_op_and_category(tmp_path: Path) -> None:
    """TraceLens's Qwen1.5-0.5B traces, H100 and MI300: no GEMM kernel name is shared (cuBLAS
    against hipBLASLt), but the framework ops and their shapes are, and so are the categories."""
    base = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "TraceLens" / "tests" / "traces"
    name = "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    out = tmp_path / "d.json"
    assert main(["diff", str(base / "h100" / name), str(base / "mi300" / name), "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    ops = {c["name"]: c for c in d["ops"]}
    mm = ops["aten::mm[[8944,1024],[1024,2816]] bf16"]
    assert mm["a_ns"] > 0 and mm["b_ns"] > 0 and mm["kind"] in ("slower", "faster")
    gemm = {c["name"]: c for c in d["categories"]}["gemm"]
    assert gemm["a_ns"] > 0 and gemm["b_ns"] > 0
    gemms = [k for k in d["kernels"] if k["category"] == "gemm"]
    assert gemms and all(k["kind"] in ("added", "removed") for k in gemms)


def test_ranks_in_lockstep_are_one_sample_per_step() -> None:
    """Two ranks of 4 steps each: the samples are the 4 per-step medians over the ranks, not 8."""
    from stepscope.diff.compare import _samples
    from stepscope.diff.profile import RankProfile, RunProfile, StepRow

    def rank(r: int, times: list[int]) -> RankProfile:
        return RankProfile(
            rank=r, steps=tuple(StepRow(step_ns=t, parts={}) for t in times), kernels={}, kernel_categories={}
        )

    p = RunProfile(source="x", ranks=(rank(0, [10, 20, 30, 40]), rank(1, [12, 22, 32, 42])))
    assert _samples(p).tolist() == [11, 21, 31, 41]
    assert mann_whitney_p(np.array([]), np.array([1.0])) == 1.0
