"""Calibration by op class from the profile of one run (plan --from-analysis with --baseline):
the traced op-class times read from an analyze report, and the scales that make the model's
baseline take them. Expected values are hand-computed kernel times of a hand-built TPU profile,
hand-computed linear-attention FLOPs, and factors planted before the 'trace' was made."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.catalog.model_flops import ModelShape
from stepscope.cli import main
from stepscope.planner import whatif
from stepscope.planner.calibrate import fit
from stepscope.planner.cost import evaluate
from stepscope.planner.fit import GEMM_GRID, Run, predict_one
from stepscope.planner.from_trace import read
from stepscope.planner.job import Job, make_job
from stepscope.planner.op_profile import profile_scales
from stepscope.planner.search import hardware
from stepscope.planner.strategy import Strategy
from stepscope.planner.vocab import LINEAR_ATTN_EFF
from stepscope.trace.xspace_pb import xspace_class

# 4 layers, 3 of them gated linear attention with 4 heads of 64 x 64 (as test_planner_op_calibration)
HYBRID = ModelShape(
    d_model=256, n_layers=4, n_heads=4, n_kv_heads=4, head_dim=64, d_ff=1024, vocab=1000, gated_mlp=True,
    linear_layers=3, linear_attn=(4, 64, 4, 64),
)  # fmt: skip
# the same with 8 routed experts (top 2, 512 wide) in every layer
HYBRID_MOE = ModelShape(
    d_model=256, n_layers=4, n_heads=4, n_kv_heads=4, head_dim=64, d_ff=1024, vocab=1000, gated_mlp=True,
    linear_layers=3, linear_attn=(4, 64, 4, 64), n_experts=8, experts_per_token=2, d_ff_expert=512,
)  # fmt: skip
SEQ, BATCH = 2048, 16
# the hand-built profile's time unit: 200 us, so that its compute (70 units, 14 ms a step) is what
# the hybrid model's takes (13.8 ms on an H100, 17.4 ms on a v5p at the priors): the profile
# describes that job, as op_profile.py requires
UNIT_PS = 200_000_000
DOT_FLOPS = 1_836_000_000_000  # a dot fusion's FLOPs: 50% of a v5p's 459 TFLOP/s over its 40 units (8 ms)


def _strategy(text: str) -> Strategy:
    return Strategy.parse(text)


# ---- the traced times: a hand-built TPU profile through analyze ------------------------------
def _tpu_profile(path: Path) -> None:
    """One TPU plane, three steps marked 100, 130 and 110 units long, each a dot fusion (40 units,
    DOT_FLOPS), a Megablox grouped GEMM (custom call gmm), a chunked GLA Pallas kernel and an
    all-to-all; their times by step (units of UNIT_PS): gmm 20 / 40 / 30, GLA 10 / 20 / 15,
    all-to-all 5 / 10 / 8."""
    X = xspace_class()
    s = X()
    s.hostnames.append(b"tpu-host-0")
    p = s.planes.add(id=1, name=b"/device:TPU:0")
    for k, v in {1: b"hlo_op", 2: b"tf_op", 3: b"flops", 4: b"bytes_accessed", 5: b"hlo_category"}.items():
        p.stat_metadata[k].id, p.stat_metadata[k].name = k, v
    kinds = {
        "fusion.1": ("jit(step)/mlp/dot_general", "convolution fusion", DOT_FLOPS),
        "gmm.1": ("jit(step)/moe/gmm", "custom-call", 0),
        "chunk_gla_fwd.1": ("jit(step)/gla/pallas_call", "custom-call", 0),
        "all-to-all.1": ("jit(step)/moe/all_to_all", "all-to-all", 0),
    }
    for n, name in enumerate(kinds, 1):
        p.event_metadata[n].id, p.event_metadata[n].name = n, name.encode()
    steps = p.lines.add(id=1, name=b"Steps", timestamp_ns=1_000)
    ops = p.lines.add(id=2, name=b"XLA Ops", timestamp_ns=1_000)
    t0 = 0
    for step, (dur, gmm, gla, a2a) in enumerate(((100, 20, 10, 5), (130, 40, 20, 10), (110, 30, 15, 8))):
        p.event_metadata[90 + step].id, p.event_metadata[90 + step].name = 90 + step, str(step + 1).encode()
        steps.events.add(metadata_id=90 + step, offset_ps=t0 * UNIT_PS, duration_ps=dur * UNIT_PS)
        at = t0
        for n, (name, d) in enumerate(zip(kinds, (40, gmm, gla, a2a)), 1):
            tf_op, cat, flops = kinds[name]
            e = ops.events.add(metadata_id=n, offset_ps=at * UNIT_PS, duration_ps=d * UNIT_PS)
            for sid, val in ((1, name), (2, tf_op), (5, cat)):
                e.stats.add(metadata_id=sid).str_value = val.encode()
            e.stats.add(metadata_id=3).int64_value = flops
            e.stats.add(metadata_id=4).int64_value = 1_000_000
            at += d
        t0 += dur
    path.write_bytes(s.SerializeToString())


@pytest.fixture(scope="module")
def tpu_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tpu")
    _tpu_profile(d / "tpu-host-0.xplane.pb")
    out = d / "r.json"
    assert main(["analyze", str(d / "tpu-host-0.xplane.pb"), "--json", str(out), "-q", "--hardware", "tpu-v5p"]) == 0
    return out


def test_the_median_steps_op_classes_are_read_from_the_report(tpu_report: Path) -> None:
    """A step runs to the next step's first work: 100 and 130 units; the last to its own work's
    end, 40 + 30 + 15 + 8 = 93. The median step, the first (100 units), has gmm 20 units (4 ms),
    GLA 10 (2 ms) and the all-to-all 5 (1 ms). The dense GEMMs' efficiency, from XLA's cost
    analysis: 3 x DOT_FLOPS in 3 x 40 units over the v5p's bf16 peak (459 TFLOP/s) = 0.5, the op
    classes left out."""
    doc = json.loads(tpu_report.read_text(encoding="utf-8"))
    r = doc["ranks"][0]
    unit_s = UNIT_PS * 1e-12
    assert [s["step_time_ns"] for s in r["steps"]] == [round(n * unit_s * 1e9) for n in (100, 130, 93)]
    te = read(str(tpu_report))
    assert te.op_time_s == pytest.approx({"grouped_gemm": 4e-3, "linear_attention": 2e-3, "all_to_all": 1e-3})
    assert te.gemm_eff == pytest.approx(0.5)
    assert te.attn_eff is None


# ---- the scales: hand-computed and planted -----------------------------------------------------
def _job(model: ModelShape = HYBRID, devices: int = 1) -> Job:
    return make_job(model, hardware("h100"), devices, 8, BATCH, SEQ)


def test_linear_attention_scale_from_its_traced_time_by_hand() -> None:
    """3 layers x 4 heads x 6 x (2 x 64 x 64 + 64 x (64 + 64)) FLOPs a token x 16 x 2,048 tokens,
    no recompute, on one device at LINEAR_ATTN_EFF x the bf16 peak: the model's time. Traced 2.5x
    as long: the scale is 1 / 2.5."""
    job, s = _job(), _strategy("dp=1,mb=1")
    flops = 3 * 4 * 6 * (2 * 64 * 64 + 64 * (64 + 64)) * BATCH * SEQ
    model_s = flops / (LINEAR_ATTN_EFF * job.hw.peak_flops("bf16"))
    changes, info = profile_scales(job, s, {"linear_attention": 2.5 * model_s})
    assert changes == {"linear_attn_scale": pytest.approx(0.4, rel=1e-6)}
    assert info["op_classes"]["linear_attention"]["model_s"] == pytest.approx(model_s, rel=1e-6)


def _class_times(job: Job, s: Strategy) -> tuple[float, float]:
    """(grouped GEMM seconds, exchange seconds) by an independent route: halving the experts'
    scale adds their time once more; the exchange's exposed + hidden time."""
    a = s.arrays()
    base = float(evaluate(job, a)["compute_s"][0])
    halved = float(evaluate(job.calibrated(expert_scale=0.5 * float(job.calibration.expert_scale)), a)["compute_s"][0])
    r = evaluate(job, a)
    return halved - base, float(r["ep_s"][0] + r["hidden_ep_s"][0])


def test_planted_expert_exchange_and_link_scales_are_recovered() -> None:
    """A 'trace' made by the model at planted scales (grouped GEMMs at 0.3, the exchange 4x, the
    links 2x, a value of the comm grid): the op classes' times and the step's exposed
    communication give the planted scales back, each class's from its own time."""
    job, s = _job(HYBRID_MOE, devices=2), _strategy("dp=2,ep=2,mb=1")
    truth = job.calibrated(expert_scale=0.3, ep_scale=4.0, comm_scale=2.0)
    gemm_s, a2a_s = _class_times(truth, s)
    assert gemm_s > 0 and a2a_s > 0
    r = evaluate(truth, s.arrays())
    exposed = float(sum(r[k][0] for k in ("tp_s", "ep_s", "dp_s", "cp_s", "pp_p2p_s")))
    assert exposed > 0
    changes, _ = profile_scales(job, s, {"grouped_gemm": gemm_s, "all_to_all": a2a_s}, exposed)
    assert changes == pytest.approx({"expert_scale": 0.3, "ep_scale": 4.0, "comm_scale": 2.0}, rel=1e-6)


def test_a_class_the_baseline_does_not_run_is_kept_and_said() -> None:
    """Grouped GEMMs traced, but the model has no experts: no scale, and the reason."""
    changes, info = profile_scales(_job(), _strategy("dp=1,mb=1"), {"grouped_gemm": 0.01})
    assert changes == {}
    assert "grouped_gemm" in info["op_classes_kept"]


def test_exposure_is_not_matched_when_the_compute_is_not_comparable() -> None:
    """A traced compute a third of the model's: the exposure is kept (what hides depends on it)."""
    job, s = _job(HYBRID_MOE, devices=2), _strategy("dp=2,ep=2,mb=1")
    compute = float(evaluate(job, s.arrays())["compute_s"][0])
    changes, info = profile_scales(job, s, {}, 0.01, compute / 3)
    assert "comm_scale" not in changes and "exposed_comm" in info["op_classes_kept"]


def test_from_analysis_sets_the_scales_only_with_the_traced_strategy(tpu_report: Path) -> None:
    """Without --baseline the trace's op classes are named, not used; with it, the linear
    attention's scale is the model's time over the traced 2 ms."""
    job = _job()
    _, info = whatif.from_analysis(job, str(tpu_report), None, False)
    assert info["trace_op_classes_unused"] == ["all_to_all", "grouped_gemm", "linear_attention"]
    s = _strategy("dp=1,mb=1")
    calibrated, info = whatif.from_analysis(job, str(tpu_report), None, False, s)
    model_s = info["op_classes"]["linear_attention"]["model_s"]
    assert info["measured_linear_attn_scale"] == pytest.approx(model_s / 2e-3)
    assert float(calibrated.calibration.linear_attn_scale) == pytest.approx(model_s / 2e-3)
    assert "grouped_gemm" in info["op_classes_kept"]  # the dense model runs no grouped GEMM


def test_the_plan_command_says_what_the_profile_set(tpu_report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A dense 8B model's what-if on the hybrid model's trace: its compute is far from the traced,
    so nothing is set, and the table says so beside the traced and modeled times."""
    args = ["plan", "--model", "llama3-8b", "--hardware", "tpu-v5p", "--devices", "8", "--global-batch", "8"]
    args += ["--seq-len", "2048", "--evaluate", "dp=8,mb=1", "--from-analysis", str(tpu_report)]
    assert main([*args, "--baseline", "dp=8,mb=1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "op classes of the traced step vs the model's baseline before: linear attention 0.002 vs 0 s" in out
    # every class is kept for the one reason, said once
    assert "grouped GEMMs" in out and "kept at their scales: the model's baseline computes" in out
    assert out.count("does not describe the traced run") == 1


# ---- a profile and measured runs together: the fit holds what the profile measured -------------
def _planted_runs(truth: dict[str, float]) -> list[Run]:
    """Runs of the hybrid model whose 'measured' step is the model's own at the planted factors."""
    out = []
    for batch, text in ((16, "dp=1,mb=1"), (16, "dp=1,mb=2,recompute=full"), (32, "dp=1,mb=4"), (8, "dp=1,mb=8")):
        j = make_job(HYBRID, hardware("h100"), 1, 8, batch, SEQ)
        s = {k: int(v[0]) for k, v in Strategy.parse(text).arrays().items()}
        measured = float(evaluate(j.calibrated(**truth), {k: np.array([v]) for k, v in s.items()})["step_s"][0])
        out.append(Run(j, s, measured, lambda jj, ss: evaluate(jj, ss, keys=("step_s",))["step_s"], "g"))
    return out


def test_a_fit_holds_the_profiles_scale_and_fits_the_rest() -> None:
    """Planted: linear attention 4x slow (which the profile measured) and the GEMMs at 2^(-3/12)
    of their prior (a value of the grid). The runs take the profile's scale; the fit holds it (x1
    on top) and finds the planted GEMM scale; every run is then predicted exactly."""
    gemm = float(GEMM_GRID[13])  # 2^(-3/12)
    runs = _planted_runs({"linear_attn_scale": 0.25, "gemm_scale": gemm})
    held = [dataclasses.replace(r, job=r.job.calibrated(linear_attn_scale=0.25)) for r in runs]
    f = fit(held, pinned=frozenset({"linear_attn_scale"}))
    assert f.linear_attn_scale == 1.0 and f.gemm_scale == pytest.approx(gemm)
    assert all(predict_one(r, f) == pytest.approx(r.measured, rel=1e-6) for r in held)
    assert float(f.apply(held[0].job).calibration.linear_attn_scale) == 0.25


def test_from_csv_gives_the_traced_fields_to_runs_of_the_same_model(tmp_path: Path) -> None:
    """whatif.from_csv after a trace (the CLI's order: the job carries the trace's fields): the
    runs of the job's model and device take them (so the planted runs are met before any fit) and
    the fit holds them; the calibrated job keeps the trace's value."""
    runs = _planted_runs({"linear_attn_scale": 0.25})
    csv_path = tmp_path / "runs.csv"
    lines = ["global_batch,strategy,step_time_s"]
    texts = ("dp=1,mb=1", "dp=1,mb=2,recompute=full", "dp=1,mb=4", "dp=1,mb=8")
    lines += [f'{r.job.global_batch},"{t}",{r.measured!r}' for r, t in zip(runs, texts, strict=True)]
    csv_path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def make(rec: dict[str, Any]) -> Job:
        return make_job(HYBRID, hardware("h100"), 1, 8, int(rec["global_batch"]), SEQ)

    job = make({"global_batch": 16}).calibrated(linear_attn_scale=0.25)
    out, info = whatif.from_csv(job, str(csv_path), make, frozenset(), traced={"linear_attn_scale": 0.25})
    assert info["linear_attn_scale"] == 1.0 and info["mape_before"] == pytest.approx(0.0, abs=1e-9)
    assert float(out.calibration.linear_attn_scale) == 0.25


def test_an_exposure_no_link_speed_reaches_is_not_matched() -> None:
    """A traced exposure of 1 ns: no link 16x faster gets the model there, so the links keep their
    scale and the reason is given (a 1/16 scale would speed every transfer of a what-if)."""
    job, s = _job(HYBRID_MOE, devices=2), _strategy("dp=2,ep=2,mb=1")
    compute = float(evaluate(job, s.arrays())["compute_s"][0])
    changes, info = profile_scales(job, s, {}, 1e-9, compute)
    assert "comm_scale" not in changes
    assert "no link speed" in info["op_classes_kept"]["exposed_comm"]


def _runs_csv(path: Path, runs: list[Run], texts: tuple[str, ...]) -> None:
    lines = ["global_batch,strategy,step_time_s"]
    lines += [f'{r.job.global_batch},"{t}",{r.measured!r}' for r, t in zip(runs, texts, strict=True)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_runs_of_another_model_do_not_hold_the_trace(tmp_path: Path) -> None:
    """One run of another model (8 layers): the trace's field is not held and the fit's factor
    for it is dropped; the job keeps the trace's value, and the report says why."""
    runs = _planted_runs({"linear_attn_scale": 0.25})
    texts = ("dp=1,mb=1", "dp=1,mb=2,recompute=full", "dp=1,mb=4", "dp=1,mb=8")
    _runs_csv(tmp_path / "runs.csv", runs, texts)
    other = dataclasses.replace(HYBRID, n_layers=8, linear_layers=6)

    def make(rec: dict[str, Any]) -> Job:
        model = other if int(rec["global_batch"]) == 8 else HYBRID
        return make_job(model, hardware("h100"), 1, 8, int(rec["global_batch"]), SEQ)

    job = make({"global_batch": 16}).calibrated(linear_attn_scale=0.25)
    out, info = whatif.from_csv(job, str(tmp_path / "runs.csv"), make, frozenset(), traced={"linear_attn_scale": 0.25})
    assert "held_from_trace" not in info and "not all of the traced model" in info["trace_not_held"]
    assert float(out.calibration.linear_attn_scale) == 0.25


def test_plan_holds_what_the_profile_measured_in_a_calibration(
    tpu_report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """plan --calibrate with --from-analysis and --baseline on a hybrid model (a config.json):
    the profile sets the linear attention's scale and the GEMMs' efficiency (XLA's FLOPs), the
    runs' fit holds both (its own factors x1) and fits the rest."""
    cfg = {
        "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4,
        "intermediate_size": 1024, "vocab_size": 1000, "hidden_act": "silu",
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "linear_num_key_heads": 4, "linear_key_head_dim": 64, "linear_num_value_heads": 4, "linear_value_head_dim": 64,
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    job = ["--model", str(tmp_path / "config.json"), "--hardware", "tpu-v5p", "--devices", "1", "--seq-len", "2048"]
    rows = ["model,hardware,devices,seq_len,global_batch,strategy,step_time_s"]
    rows += [f"{tmp_path / 'config.json'},tpu-v5p,1,2048,{b},dp=1,{t}" for b, t in ((16, 0.5), (32, 1.1), (8, 0.3))]
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    args = ["plan", *job, "--global-batch", "16", "--evaluate", "dp=1,mb=1", "--baseline", "dp=1,mb=1"]
    args += ["--from-analysis", str(tpu_report), "--calibrate", str(tmp_path / "runs.csv"), "--json"]
    assert main(args) == 0
    cal = json.loads(capsys.readouterr().out)["calibration"]
    assert cal["runs"] == 3 and cal["trace"] == str(tpu_report)
    assert cal["held_from_trace"] == ["gemm_scale", "linear_attn_scale"]
    assert cal["gemm_scale"] == 1.0 and cal["linear_attn_scale"] == 1.0
    assert cal["measured_gemm_eff"] == pytest.approx(0.5)
