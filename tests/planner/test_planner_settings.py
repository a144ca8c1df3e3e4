"""What a prediction assumes beyond the strategy is shown: the JSON's ``settings`` and the
terminal's ``assumed:`` line name the framework properties the cost model used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main

JOB = [
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
    "4096",
]


def _settings(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main([*JOB, *args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    return (out["rows"][0] if out.get("kind") == "search" else out)["settings"]


def test_the_torchtitan_preset_is_named_in_the_settings(capsys: pytest.CaptureFixture[str]) -> None:
    st = _settings(capsys, "--framework", "torchtitan", "--precision", "fp8", "--evaluate", "dp=8,zero=3")
    assert st["loss"] == "compiled" and st["fused_projections"] is False
    assert (st["fp8_recipe"], st["fp8_weight_cache"], st["fp8_saved_inputs"]) == ("tensorwise", False, "bf16")
    # without torch.compile the compiled loss runs eagerly: the settings say what ran
    assert (
        _settings(capsys, "--framework", "torchtitan", "--set", "fused_elementwise=false", "--evaluate", "dp=8,zero=3")[
            "loss"
        ]
        == "unfused"
    )
    defaults = _settings(capsys, "--evaluate", "dp=8")  # the planner's Megatron-like defaults, no fp8 keys
    assert defaults["loss"] == "fused" and defaults["fused_projections"] is True and "fp8_recipe" not in defaults
    assert _settings(capsys, "--top", "2")["grad_bytes"] == 4  # search rows carry them too


def test_the_terminal_says_what_it_assumed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*JOB, "--framework", "nanotron", "--evaluate", "dp=8"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert (
        "assumed: nanotron's sharded cross entropy (10 B per logit live), fused q/k/v and gate/up GEMMs, "
        "sequence parallelism re-gathers its inputs in backward, fused elementwise kernels, eager SwiGLU, flash attention (FlashAttention-2's measured speed), fp32 gradients"
    ) in out


def test_a_batch_record_carries_its_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    batch = tmp_path / "b.jsonl"
    rec = {
        "model": "llama3-8b",
        "hardware": "h100",
        "devices": 8,
        "global_batch": 16,
        "seq_len": 4096,
        "strategy": "dp=8",
    }
    batch.write_text(json.dumps({**rec, "loss": "copy"}) + "\n" + json.dumps(rec) + "\n", encoding="utf-8")
    assert main(["plan", "--batch", str(batch), "--json"]) == 0
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first["settings"]["loss"] == "copy" and second["settings"]["loss"] == "fused"
