"""One report does not contradict itself: the phase tables of a JAX rank agree, the FLOPs note fits
the trace's format, a straggler's named cause has non-zero evidence."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

import stepscope
from stepscope.cli import main
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
