"""Planner: memory by hand, the strategy space's constraints, the CLI contract."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stepscope.analysis.model_flops import from_config_dict
from stepscope.cli import main
from stepscope.planner.cost import Job, evaluate, params
from stepscope.planner.search import hardware, model, parse_strategy, space

TINY = {"hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16, "intermediate_size": 4096,
        "vocab_size": 32000, "hidden_act": "silu"}


def _job(devices: int = 8, batch: int = 16, seq: int = 2048) -> Job:
    return Job(from_config_dict(TINY), hardware("h100"), devices, 8, batch, seq)


def test_memory_by_hand() -> None:
    job = _job()
    s = parse_strategy("tp=2,pp=2,dp=2,zero=1,mb=2,recompute=none")
    r = evaluate(job, s)
    h, L = 1024, 8
    dense = 4 * h * h + 3 * h * 4096  # q,k,v,o (MHA) + SwiGLU
    p_dev = (L / 2) * dense / 2 + 32000 * h / 2  # layers per stage / tp + embedding / tp
    assert params(job.model)[0] == dense
    assert r["weights_gb"][0] == pytest.approx(2 * p_dev / 1e9)
    assert r["grads_gb"][0] == pytest.approx(2 * p_dev / 1e9)
    assert r["optimizer_gb"][0] == pytest.approx(12 * p_dev / 2 / 1e9)  # ZeRO-1 over dp=2
    # activations: s*b*h*34/tp per layer, 4 layers per stage, min(pp=2, micro-batches=16/(2*2)=4) in flight
    assert r["activations_gb"][0] == pytest.approx(2048 * 2 * h * 34 / 2 * 4 * 2 / 1e9)
    full = evaluate(job, parse_strategy("tp=2,pp=2,dp=2,zero=1,mb=2,recompute=full"))
    assert full["activations_gb"][0] == pytest.approx(r["activations_gb"][0] * 2 / 34)
    assert full["compute_s"][0] == pytest.approx(r["compute_s"][0] * 4 / 3)
    z3 = evaluate(job, parse_strategy("tp=2,pp=2,dp=2,zero=3,mb=2"))
    assert z3["weights_gb"][0] == pytest.approx(r["weights_gb"][0] / 2)


def test_space_constraints() -> None:
    job = _job(devices=16, batch=32)
    s = space(job)
    assert s["tp"].size > 100
    assert np.all(s["tp"] * s["pp"] * s["cp"] * s["dp"] == 16)
    assert np.all(16 % s["tp"] == 0) and np.all(s["tp"] <= 8)
    assert np.all(8 % (s["pp"] * s["vpp"]) == 0)
    assert np.all(32 % (s["dp"] * s["mb"]) == 0)
    assert np.all((s["vpp"] == 1) | (s["pp"] > 1))
    assert np.all((s["zero"] == 0) | (s["dp"] > 1))


def test_moe_expert_parallel_space_and_memory() -> None:
    m = model("mixtral-8x7b")
    job = Job(m, hardware("h100"), 64, 8, 256, 4096)
    s = space(job)
    assert set(np.unique(s["ep"])) <= {1, 2, 4, 8} and np.all(s["dp"] % s["ep"] == 0)
    a = evaluate(job, parse_strategy("tp=2,pp=4,dp=8,ep=1,zero=1"))
    b = evaluate(job, parse_strategy("tp=2,pp=4,dp=8,ep=8,zero=1"))
    assert b["weights_gb"][0] < a["weights_gb"][0] and b["ep_s"][0] > 0 == a["ep_s"][0]


def test_plan_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "llama3-8b", "--hardware", "H100", "--devices", "8", "--global-batch", "32", "--seq-len", "4096"]
    assert main(args + ["--top", "3", "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)
    assert len(recs) == 3 and [r["step_time_s"] for r in recs] == sorted(r["step_time_s"] for r in recs)
    for k in ("step_time_s", "tokens_per_s_per_device", "mfu", "tflops_per_device", "memory_gb", "fits", "bottleneck", "time_s"):
        assert k in recs[0]
    assert "total" in recs[0]["memory_gb"]
    assert main(args + ["--evaluate", "tp=2,dp=4,zero=1,recompute=selective", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["strategy"]["tp"] == 2 and one["strategy"]["recompute"] == "selective"
    assert main(args + ["--evaluate", "tp=2,dp=2"]) == 2  # 4 devices != 8
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({"model": "llama3-8b", "hardware": "a100", "devices": 8, "global_batch": 16, "seq_len": 2048,
                                 "strategy": "dp=8,zero=3"}) + "\n" + json.dumps({"model": "nope"}) + "\n")
    assert main(["plan", "--batch", str(batch)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["strategy"]["dp"] == 8 and "error" in lines[1]
    assert main(["plan", "--model", "no-such-model", "--hardware", "h100", "--devices", "8", "--global-batch", "8", "--seq-len", "8"]) == 2


def test_calibration_recovers_known_scales_and_holds_out_groups() -> None:
    import dataclasses

    from stepscope.planner.calibrate import COMM_GRID, EFF_GRID, Run, cross_validate, fit, predict_tokens

    true_e, true_c = float(EFF_GRID[30]), float(COMM_GRID[15])  # grid points, so recoverable exactly
    runs = []
    for i, strat in enumerate(["tp=8,dp=2", "tp=2,pp=2,dp=4", "dp=16,zero=3", "tp=4,dp=4,recompute=full"]):
        job = Job(from_config_dict(TINY), hardware("a100"), 16, 8, 64, 4096)
        st = {k: int(v[0]) for k, v in parse_strategy(strat).items()}
        truth = dataclasses.replace(job, eff_scale=true_e, comm_scale=true_c)
        measured = float(predict_tokens(truth, {k: np.array([v]) for k, v in st.items()})[0])
        runs.append(Run(job, st, measured, predict_tokens, group=f"g{i % 2}"))
    e, c = fit(runs)
    assert (e, c) == (true_e, true_c)
    cv = cross_validate(runs)
    assert set(cv) == {"g0", "g1"} and all(v["mape"] < 1e-9 for v in cv.values())


def test_plan_html_and_what_if(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "llama3-8b", "--hardware", "h100", "--devices", "8", "--global-batch", "32", "--seq-len", "4096"]
    out = tmp_path / "plan.html"
    assert main(args + ["--top", "4", "--html", str(out)]) == 0
    capsys.readouterr()
    text = out.read_text()
    assert text.count("<rect") >= 8 and "Memory per device" in text and "<script" not in text
    assert main(args + ["--evaluate", "tp=2,dp=4", "--baseline", "dp=8,zero=3", "--measured-step-s", "3.0", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    w = rec["what_if"]
    assert w["predicted_step_time_s"] == pytest.approx(3.0 * rec["step_time_s"] / w["predicted_baseline_step_time_s"])
    assert main(args + ["--evaluate", "tp=2,dp=4", "--baseline", "dp=8"]) == 2  # needs the measured time too


def test_named_recompute_policies_order_memory_and_time() -> None:
    job = _job()
    res = {}
    for pol in ("none", "minimal", "save_dot_except_mlp", "save_qkv_proj", "save_out_proj", "full"):
        r = evaluate(job, parse_strategy(f"tp=2,pp=2,dp=2,mb=2,recompute={pol}"))
        res[pol] = (r["activations_gb"][0], r["compute_s"][0])
    acts = [res[p][0] for p in ("none", "minimal", "save_dot_except_mlp", "save_qkv_proj", "save_out_proj", "full")]
    assert acts == sorted(acts, reverse=True)  # each keeps less than the one before
    assert res["minimal"][1] < res["save_dot_except_mlp"][1] < res["full"][1]
    assert res["none"][0] / res["save_out_proj"][0] == pytest.approx(34 / 4)
