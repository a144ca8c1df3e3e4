"""The host wait a calibration may fit (Job.layer_overhead_s): its time by hand, and its selection
by leave-one-out on runs the model itself generated with and without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.planner.calibrate import Run, at_grid_edge, fit, predict_tokens
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy

TINY = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
}


def job(**kw: object) -> Job:
    return make_job(from_config_dict(TINY), hardware("h100"), 8, 8, 32, 2048, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("strategy", "layers_times_micro", "recompute_factor"),
    [
        ("dp=8,mb=1,recompute=none", 8 * 4, 1.0),  # 8 layers, 32 / 8 = 4 micro-batches
        ("dp=4,pp=2,mb=2,recompute=none", 4 * 4, 1.0),  # a stage of 4 layers, 32 / (4 x 2) = 4 micro-batches
        ("dp=8,mb=2,recompute=full", 8 * 2, 4 / 3),  # full recompute replays the forward: x 4/3
    ],
)
def test_the_wait_by_hand(strategy: str, layers_times_micro: int, recompute_factor: float) -> None:
    s = parse_strategy(strategy)
    base, waited = evaluate(job(), s), evaluate(job(layer_overhead_s=1e-3), s)
    host_s = 1e-3 * layers_times_micro * recompute_factor
    assert float(base["host_s"][0]) == 0.0
    assert float(waited["host_s"][0]) == pytest.approx(host_s)
    assert float(waited["compute_s"][0]) == float(base["compute_s"][0])
    # the step: the wait itself, and with pp 2 the bubble of one micro-batch's share of it
    bubble = (1 if "pp=2" in strategy else 0) * host_s / 4
    assert float(waited["step_s"][0] - base["step_s"][0]) == pytest.approx(host_s + bubble)


STRATEGIES = ("dp=8,mb=1", "dp=8,mb=2", "dp=8,mb=4", "dp=4,tp=2,mb=1", "dp=4,tp=2,mb=4", "dp=2,tp=4,mb=2")


def _runs(truth: Job) -> list[Run]:
    out = []
    for n, text in enumerate(STRATEGIES):
        s = parse_strategy(text + ",recompute=none")
        measured = float(predict_tokens(truth, s)[0])
        out.append(Run(job(), {k: int(v[0]) for k, v in s.items()}, measured, predict_tokens, group=str(n)))
    return out


def test_runs_made_with_a_wait_are_fitted_with_it() -> None:
    f = fit(_runs(job(layer_overhead_s=400e-6)))
    assert (f.layer_overhead_s, f.gemm_scale, f.attn_scale, f.comm_scale) == (pytest.approx(400e-6), 1.0, 1.0, 1.0)
    assert at_grid_edge(f) == []


def test_runs_made_without_one_keep_the_prior() -> None:
    # both fits predict them exactly: no improvement left one out, so no wait
    assert fit(_runs(job())).layer_overhead_s == 0.0


def test_two_runs_cannot_select_it() -> None:
    assert fit(_runs(job(layer_overhead_s=400e-6))[:2]).layer_overhead_s == 0.0


def test_a_fitted_wait_reaches_the_plan() -> None:
    f = fit(_runs(job(layer_overhead_s=400e-6)))
    s = parse_strategy("dp=8,mb=1,recompute=none")
    assert float(evaluate(f.apply(job()), s)["step_s"][0]) == pytest.approx(
        float(evaluate(job().replaced(layer_overhead_s=400e-6), s)["step_s"][0])
    )


def test_the_calibration_line_names_it() -> None:
    from stepscope.report.plan_lines import what_if_lines

    cal = {
        "runs": 6,
        "gemm_scale": 1.0,
        "attn_scale": 1.0,
        "comm_scale": 1.0,
        "inter_scale": 1.0,
        "mape_before": 0.2,
        "mape_after_leave_one_out": 0.05,
    }
    assert "host wait" not in what_if_lines({"calibration": {**cal, "layer_overhead_s": 0.0}})[0]
    assert (
        "host wait 400 us per layer and micro-batch"
        in what_if_lines({"calibration": {**cal, "layer_overhead_s": 4e-4}})[0]
    )


def test_a_known_wait_is_given_by_flag_or_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from stepscope.cli import main

    job = ["--model", "llama3-8b", "--hardware", "h100", "--devices", "8", "--global-batch", "16", "--seq-len", "4096"]
    assert main(["plan", *job, "--evaluate", "dp=8,mb=1,zero=1", "--set", "host_wait_us=250", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    # 32 layers x 16 / (8 x 1) = 2 micro-batches x 250 us
    assert rec["time_s"]["host"] == pytest.approx(250e-6 * 32 * 2) and rec["settings"]["host_wait_us"] == pytest.approx(
        250
    )
    batch = tmp_path / "b.jsonl"
    batch.write_text(
        json.dumps(
            {
                "model": "llama3-8b",
                "hardware": "h100",
                "devices": 8,
                "global_batch": 16,
                "seq_len": 4096,
                "strategy": "dp=8,mb=1,zero=1",
                "host_wait_us": 250,
            }
        )
        + "\n",
        encoding="utf-8",
    )
    assert main(["plan", "--batch", str(batch), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "ignored_keys" not in out and out["time_s"]["host"] == pytest.approx(rec["time_s"]["host"])
    for bad in ("-5", "nan", "2e6"):
        assert main(["plan", *job, "--evaluate", "dp=8,mb=1", "--set", f"host_wait_us={bad}"]) == 2
        assert "host_wait_us must be a number >= 0 and < 1e+06" in capsys.readouterr().err


def test_a_wait_that_only_fits_noise_is_not_selected() -> None:
    """Runs the model predicts up to +-10% noise (fixed seed): in-sample a wait lowers the total
    error, but leaving runs out it does not predict them better, so the fit keeps none."""
    import random

    import numpy as np

    from stepscope.planner.calibrate import _grid, errors

    rng = random.Random(4)
    runs = []
    for n, text in enumerate(STRATEGIES):
        s = parse_strategy(text + ",recompute=none")
        noisy = float(predict_tokens(job(), s)[0]) * (1 + rng.uniform(-0.1, 0.1))
        runs.append(Run(job(), {k: int(v[0]) for k, v in s.items()}, noisy, predict_tokens, group=str(n)))
    e = errors(runs)
    total, with_wait = e.sum(axis=0), _grid()[4] > 0
    assert float(np.min(total)) < float(np.min(total[~with_wait])) - 1e-6  # in-sample, a wait would help
    assert fit(runs, e).layer_overhead_s == 0.0
