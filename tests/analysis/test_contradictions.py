"""One report does not contradict itself: the phase tables of a JAX rank agree, the FLOPs note fits
the trace's format, a straggler's named cause has non-zero evidence."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

import stepscope
from stepscope.analysis.cluster.results import Straggler
from stepscope.analysis.cluster.view import build
from stepscope.cli import main
from tests.analysis.test_cluster import _rank as _crank
from tests.analysis.test_cluster import _step as _cstep
from tests.analysis.test_xla import _tpu_space

ROOT = Path(__file__).resolve().parents[2]
JAX_TRACE = ROOT / "examples" / "traces" / "jax_gpu_te_fused_attn.xplane.pb"


def _rank(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "r.json"
    assert main(["analyze", *args, "--json", str(out), "-q"]) == 0
    return json.loads(out.read_text())["ranks"][0]


def test_hand_built_tpu_phases_agree_between_tables(tmp_path: Path) -> None:
    """Ops of ``_tpu_space`` back to back in 0-50 us: fusion.1 jvp 0-10 (forward), grads/psum
    start 10-11 and done 41-46 (outside autodiff, no optimizer name: forward), fusion.2 remat
    11-21 (recompute), fusion.3 21-41 and copy.4 46-50 under transpose (backward).
    forward = 10 + 1 + 5 = 16 us, recompute = 10 us, backward = 20 + 4 = 24 us, optimizer 0."""
    f = tmp_path / "tpu-host-0.xplane.pb"
    _tpu_space(f)
    r = _rank(tmp_path, str(f), "--hardware", "tpu-v5p")
    (step,) = r["steps"]
    assert step["phase_ns"] == {"forward": 16_000, "backward": 24_000, "recompute": 10_000, "optimizer": 0}
    xla = {s["label"]: s["time_ns"] for s in r["extras"]["xla"]["phases"]}
    assert xla == {"forward": 16_000, "backward": 24_000, "recompute": 10_000}
    assert step["recompute_ops"] == 1  # fusion.2


def test_hand_built_tpu_note_names_xla_flops_not_record_shapes(tmp_path: Path) -> None:
    """Every op of ``_tpu_space`` carries a ``flops`` stat (0 for the collectives and the copy):
    XLA's cost analysis covers 100% of the op time."""
    f = tmp_path / "tpu-host-0.xplane.pb"
    _tpu_space(f)
    note = _rank(tmp_path, str(f), "--hardware", "tpu-v5p")["roofline_note"]
    assert "record_shapes" not in note
    assert "XLA's cost analysis (100% of XLA op time)" in note


def test_real_jax_trace_phase_tables_agree(tmp_path: Path) -> None:
    """The profile's own name stacks: kernels under ``transpose(`` are backward, the rest forward
    (no remat, no optimizer scope in this loss_fn-only program). The phase table holds the union
    of each phase's kernels (the whole trace is the one window), the XLA view their summed time."""
    ev = stepscope.load(JAX_TRACE).events
    k = ev.filter(pc.and_(pc.equal(ev["kind"].cast("string"), "kernel"), pc.is_valid(ev["op"])))
    scope = np.array([s or "" for s in k["scope"].to_pylist()], dtype=object)
    ts, dur = k["ts_ns"].to_numpy(), k["dur_ns"].to_numpy()
    bwd = np.array(["transpose(" in s for s in scope])
    r = _rank(tmp_path, str(JAX_TRACE))
    (step,) = r["steps"]
    assert step["phase_ns"]["backward"] == _union(ts[bwd], dur[bwd])
    assert step["phase_ns"]["forward"] == _union(ts[~bwd], dur[~bwd])
    assert step["phase_ns"]["recompute"] == step["phase_ns"]["optimizer"] == 0
    xla = {s["label"]: s["time_ns"] for s in r["extras"]["xla"]["phases"]}
    assert xla == {"backward": int(dur[bwd].sum()), "forward": int(dur[~bwd].sum())}
    share = step["phase_ns"]["backward"] / (step["phase_ns"]["backward"] + step["phase_ns"]["forward"])
    assert 0.5 < share < 0.6  # the XLA view's 53.8%, not 0


def _union(ts: np.ndarray, dur: np.ndarray) -> int:
    """Length of the union of [ts, ts + dur), by a sweep over intervals sorted by start."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(zip(ts.tolist(), (ts + dur).tolist())):
        if cur_e is None or s > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0 if cur_e is None else cur_e - cur_s)


def test_real_jax_trace_note_asks_for_hlo_not_record_shapes(tmp_path: Path) -> None:
    """This GPU profile carries no ``flops`` stats: the way to FLOPs is ``--hlo``."""
    note = _rank(tmp_path, str(JAX_TRACE))["roofline_note"]
    assert "record_shapes" not in note and "--hlo" in note


def _straggler_ranks(computes_ms: list[int], loaders_ms: list[int]) -> dict[int, Straggler]:
    """One all-reduce per rank, entered when the rank's compute ends (start = compute) and left by
    all at 105 ms (the clocks agree: every end is the same)."""
    ranks = []
    for r, (c_ms, l_ms) in enumerate(zip(computes_ms, loaders_ms)):
        comp, loader = c_ms * 1_000_000, l_ms * 1_000_000
        ranks.append(_crank(r, [comp], [105_000_000 - comp], 64 << 20, [_cstep(106_000_000, comp, loader)]))
    c = build(tuple(ranks))
    assert c is not None
    return {s.rank: s for s in c.stragglers}


def test_straggler_cause_needs_non_zero_evidence() -> None:
    """Compute 100, 100, 100, 90 ms, data loader 0 everywhere. Rank 3: compute z =
    -10 ms / (1.4826 x max(MAD 0, 2% of 100 ms, 20 us)) = -3.37; data loader z = 0 (all 0);
    arrival 10 ms early, z < 0. No figure above the median: "unexplained", not "host: data loader"
    (its data-loader time and z are 0). Ranks 0-2: every z is 0, unexplained too."""
    by_rank = _straggler_ranks([100, 100, 100, 90], [0, 0, 0, 0])
    s3 = by_rank[3]
    assert s3.z_dataloader == 0.0
    assert s3.z_compute == pytest.approx(-10 / (1.4826 * 2), rel=1e-6)
    assert s3.cause == "unexplained" and s3.excess_ns == 0 and not s3.is_straggler
    assert {by_rank[r].cause for r in (0, 1, 2)} == {"unexplained"}


def test_straggler_cause_is_the_largest_positive_figure() -> None:
    """Compute 100, 100, 100, 110 ms, data loader 0: rank 3's compute z = +10 / 2.9652 = 3.37 is
    the only positive one of its figures besides its arrival (10 ms late: z = 10 ms / (1.4826 x
    20 us) = 337, over the threshold, but compute is over it too and makes the rank late): compute."""
    s3 = _straggler_ranks([100, 100, 100, 110], [0, 0, 0, 0])[3]
    assert s3.cause == "compute" and s3.excess_ns == 10_000_000


def test_dualpipe_note_states_no_memory_figure_beside_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSeek-V3's published run (tech report 3.2: tp 1, pp 16, DualPipe, ep 64, ZeRO-1 DP 128 on
    2048 H800s): the note beside the table quotes only that run's measured fact (it fit in the
    H800's 80 GB), no model figure of its own that could differ from the table's total."""
    args = ["plan", "--model", "deepseek-v3", "--hardware", "h800", "--devices", "2048"]
    args += ["--global-batch", "15360", "--seq-len", "4096", "--precision", "fp8"]
    args += ["--evaluate", "tp=1,pp=16,sched=dualpipe,ep=64,dp=128,zero=1,mb=1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    note = " ".join(out.split("note: DualPipe rows", 1)[1].split())
    note = note.split("note:", 1)[0]
    assert re.findall(r"([\d.]+) ?GB", note) == ["80"]
