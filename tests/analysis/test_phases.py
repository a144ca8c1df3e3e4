"""Forward / backward / recompute / optimizer attribution."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import stepscope
from stepscope.analysis.api import analyze

from .. import synth

US = 1000


def test_phases_by_hand(tmp_path: Path) -> None:
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    # forward op (has an autograd sequence number) on the main thread: kernel [300, 400)
    ev.append(synth.cpu("aten::addmm", 100, 100, **{"Sequence number": 1, "External id": 1}))
    ev += synth.launch("gemm_fwd", 150, 300, 100, ext=1)
    # backward pass on thread 2
    ev.append(synth.cpu("autograd::engine::evaluate_function: AddmmBackward0", 500, 400, tid=2))
    # ... a checkpointed forward op re-run inside it (sequence number, not a backward node): recompute
    ev.append(synth.cpu("aten::linear", 510, 90, tid=2, **{"Sequence number": 7, "External id": 2}))
    ev += synth.launch("gemm_recompute", 520, 700, 50, ext=2, tid=2)
    # ... the backward node itself (its gradient math records no sequence number): backward
    ev.append(synth.cpu("AddmmBackward0", 610, 190, tid=2, **{"Sequence number": 1}))
    ev.append(synth.cpu("aten::mm", 615, 50, tid=2, **{"External id": 3}))
    ev += synth.launch("gemm_bwd", 620, 760, 40, ext=3, tid=2)
    # optimizer step on the main thread: kernel [820, 830)
    ev.append(synth.cpu("Optimizer.step#SGD.step", 905, 40, cat="user_annotation"))
    ev += synth.launch("multi_tensor_apply_kernel", 910, 820, 10)
    r = analyze(stepscope.load(synth.write(tmp_path / "t.json", ev))).ranks[0]
    (ph,) = r.phases
    assert ph.phase_ns == {"forward": 100 * US, "backward": 40 * US, "recompute": 50 * US, "optimizer": 10 * US}
    assert ph.recompute_ns == 50 * US and ph.recompute_ops == 1


@pytest.mark.torch
@pytest.mark.parametrize("ckpt", [True, False])
def test_recompute_on_a_real_checkpointed_cpu_trace(tmp_path: Path, ckpt: bool) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "ckpt.json"
    script = Path(__file__).resolve().parents[2] / "scripts" / "gen_checkpoint_trace.py"
    cmd = [sys.executable, str(script), str(out), "--blocks", "3"] + ([] if ckpt else ["--no-checkpoint"])
    subprocess.run(cmd, check=True, timeout=600)
    r = analyze(stepscope.load(out)).ranks[0]
    assert len(r.steps) == 2
    for p, s in zip(r.phases, r.steps):
        if ckpt:
            assert p.recompute_ops == 3 * 3  # Linear, ReLU, Linear re-run in each of the 3 blocks
            assert 0 < p.recompute_ns < s.step_time_ns
        else:
            assert p.recompute_ops == 0 and p.recompute_ns == 0
        assert p.phase_ns["backward"] > 0 and p.phase_ns["forward"] > 0
