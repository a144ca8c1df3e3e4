"""The loss's kernels by name (job.LOSS_BYTES): nanotron's sharded cross entropy on an fp32 copy
with the max subtracted out of place, against a fused in-place one, by hand."""

from __future__ import annotations

import json

import pytest

from stepscope.cli import main
from stepscope.errors import ConfigError
from stepscope.planner.cost import evaluate
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware, model
from stepscope.planner.strategy import parse_strategy


def test_copy_loss_holds_10_bytes_per_logit_and_moves_52() -> None:
    """10 - 6 = 4 more bytes per logit live, 52 - 24 = 28 more moved: llama3-8b (vocab 128256) on
    8 H100s, dp=8, mb=2 of 8192 tokens: 4 x 16384 x 128256 B more on every device; 28 x 128256 x
    131072 tokens / 3.35 TB/s / 8 devices more time."""
    s = parse_strategy("dp=8,zero=3,mb=2")
    fused = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 8192)
    a, b = evaluate(fused, s), evaluate(fused.replaced(loss="copy"), s)
    assert b["activations_gb"][0] - a["activations_gb"][0] == pytest.approx(4 * 16384 * 128256 / 1e9)
    assert b["compute_s"][0] - a["compute_s"][0] == pytest.approx(28 * 128256 * 16 * 8192 / 3350e9 / 8)


def test_loss_names_and_the_unread_old_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.planner.record import ignored_keys, job_from_record

    record = {"model": "llama3-8b", "hardware": "h100", "devices": 8, "global_batch": 16, "seq_len": 8192}
    assert job_from_record(record).framework.loss.kind == "fused"
    assert job_from_record({**record, "loss": "unfused"}).framework.loss.kind == "unfused"
    old = {**record, "fused_loss": False}  # not a setting: reported, not read
    assert job_from_record(old).framework.loss.kind == "fused" and ignored_keys(old) == ["fused_loss"]
    job = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 8192)
    with pytest.raises(ConfigError, match="loss must be one of fused, unfused, copy, compiled, te"):
        job.replaced(loss="chunked")
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--global-batch",
        "16",
        "--seq-len",
        "8192",
        "--evaluate",
        "dp=8,zero=3,mb=2",
        "--json",
    ]
    times = []
    for extra in (["--set", "loss=unfused"], ["--set", "loss=unfused"], ["--set", "loss=copy"]):
        assert main(args + extra) == 0
        times.append(json.loads(capsys.readouterr().out)["step_time_s"])
    assert times[0] == times[1] != times[2]


def test_compiled_loss_holds_4_bytes_per_logit_and_moves_8() -> None:
    """torch.compile'd F.cross_entropy (torchtitan since 2025-04): bf16 logits + their bf16
    gradient, 4 B per logit live, against the eager unfused loss's 12: 8 B x 16384 x 128256 less on
    every device; moved 8 B against 44: 36 x 128256 x 131072 tokens / 3.35 TB/s / 8 devices less
    time. An eager job (no torch.compile) runs the compiled loss unfused."""
    s = parse_strategy("dp=8,zero=3,mb=2")
    unfused = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 8192, loss="unfused")
    a, b = evaluate(unfused, s), evaluate(unfused.replaced(loss="compiled"), s)
    assert a["activations_gb"][0] - b["activations_gb"][0] == pytest.approx(8 * 16384 * 128256 / 1e9)
    assert a["compute_s"][0] - b["compute_s"][0] == pytest.approx(36 * 128256 * 16 * 8192 / 3350e9 / 8)
    eager_u = evaluate(unfused.replaced(fused_elementwise=False), s)
    eager_c = evaluate(unfused.replaced(fused_elementwise=False, loss="compiled"), s)
    assert eager_c["activations_gb"][0] == eager_u["activations_gb"][0] and eager_c["step_s"][0] == eager_u["step_s"][0]


def test_torchtitan_preset_compiles_its_loss() -> None:
    from stepscope.planner.record import job_from_record

    record = {"model": "llama3-8b", "hardware": "h100", "devices": 8, "global_batch": 16, "seq_len": 8192}
    assert job_from_record({**record, "framework": "torchtitan"}).framework.loss.kind == "compiled"
    assert (
        job_from_record({**record, "framework": "torchtitan", "loss": "unfused"}).framework.loss.kind == "unfused"
    )  # before 2025-04


def test_te_loss_holds_2_bytes_per_logit_and_moves_6() -> None:
    """Transformer Engine's cross entropy (Megatron's cross_entropy_fusion_impl=te): the bf16 logits
    only, the gradient written into them, 2 B per logit live against the native fused loss's 6:
    4 B x 16384 x 128256 less on every device; moved 6 B (forward read, backward read and write)
    against 24: 18 x 128256 x 131072 tokens / 3.35 TB/s / 8 devices less time."""
    s = parse_strategy("dp=8,zero=3,mb=2")
    fused = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 8192)
    a, b = evaluate(fused, s), evaluate(fused.replaced(loss="te"), s)
    assert a["activations_gb"][0] - b["activations_gb"][0] == pytest.approx(4 * 16384 * 128256 / 1e9)
    assert a["compute_s"][0] - b["compute_s"][0] == pytest.approx(18 * 128256 * 16 * 8192 / 3350e9 / 8)
