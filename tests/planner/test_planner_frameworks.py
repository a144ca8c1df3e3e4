"""`plan --framework NAME`: a framework's defaults (data/frameworks.yaml), explicit flags winning,
and only its recompute policies and pipeline schedules searched or accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main
from stepscope.errors import ConfigError
from stepscope.planner import frameworks

JOB = [
    "plan",
    "--model",
    "llama3-8b",
    "--hardware",
    "h100",
    "--devices",
    "8",
    "--global-batch",
    "64",
    "--seq-len",
    "4096",
]


def _step(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[float, float]:
    """(step time, memory per device) of one --evaluate."""
    assert main([*JOB, *args, "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    return float(rec["step_time_s"]), float(rec["memory_gb"]["total"])


def test_a_preset_is_its_flags_and_an_explicit_flag_wins(capsys: pytest.CaptureFixture[str]) -> None:
    ev = ["--precision", "fp8", "--evaluate", "tp=1,dp=8,zero=3,mb=1"]
    titan = _step(capsys, "--framework", "torchtitan", *ev)
    assert titan == _step(
        capsys,
        "--set",
        "fused_projections=false",
        "--set",
        "kv_repeated=true",
        "--set",
        "zero3_prefetch=true",
        "--set",
        "sp_saves_gathered=true",
        "--set",
        "loss=compiled",
        "--set",
        "fp8_weight_cache=false",
        "--set",
        "fp8_saved_inputs=bf16",
        "--set",
        "attention_kernel=fa2",
        *ev,
    )
    assert titan != _step(capsys, *ev)  # the defaults are Megatron's
    # --loss fused given: the preset's other settings stay, its loss does not
    assert _step(capsys, "--framework", "torchtitan", "--set", "loss=fused", *ev) == _step(
        capsys,
        "--set",
        "fused_projections=false",
        "--set",
        "kv_repeated=true",
        "--set",
        "zero3_prefetch=true",
        "--set",
        "fp8_weight_cache=false",
        "--set",
        "fp8_saved_inputs=bf16",
        "--set",
        "attention_kernel=fa2",
        *ev,
    )
    # Megatron's are the planner's defaults, with Transformer Engine's cuDNN attention
    assert _step(capsys, "--framework", "megatron", *ev) == _step(capsys, "--set", "attention_kernel=cudnn", *ev)


def test_only_the_frameworks_recompute_policies_and_schedules(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*JOB, "--framework", "torchtitan", "--evaluate", "dp=8,zero=3,recompute=selective"]) == 2
    assert "torchtitan has no recompute policy 'selective' (its policies: none, op, full)" in capsys.readouterr().err
    big = [
        "plan",
        "--model",
        "llama3-70b",
        "--hardware",
        "h100",
        "--devices",
        "64",
        "--global-batch",
        "64",
        "--seq-len",
        "4096",
    ]
    assert main([*big, "--framework", "megatron", "--evaluate", "tp=8,pp=4,dp=2,vpp=2,sched=zb-v"]) == 2
    assert "megatron has no pipeline schedule 'zb-v'" in capsys.readouterr().err
    assert main([*big, "--framework", "megatron", "--top", "50", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows and all(
        r["strategy"]["recompute"] in ("none", "selective", "full", "layernorm") for r in rows
    )  # dense: layernorm
    assert all(r["strategy"]["sched"] == "1f1b" for r in rows)
    # Megatron-core with sequence parallelism: the backward reduce-scatter under the wgrad GEMM
    assert all(r["strategy"]["tp_overlap"] == "bwd" for r in rows if r["strategy"]["tp"] > 1)
    assert main([*big, "--framework", "megatron", "--top", "1"]) == 0
    assert (
        "framework: megatron, only its recompute policies, pipeline schedules and ZeRO stages"
        in capsys.readouterr().out
    )
    # --tp-overlap given explicitly wins over the preset's, in --evaluate too
    ev = ["--evaluate", "tp=8,pp=4,dp=2,vpp=2", "--json"]
    assert main([*big, "--framework", "megatron", "--set", "tp_overlap=none", *ev]) == 0
    assert json.loads(capsys.readouterr().out)["strategy"]["tp_overlap"] == "none"
    assert main([*big, "--framework", "megatron", *ev]) == 0
    assert json.loads(capsys.readouterr().out)["strategy"]["tp_overlap"] == "bwd"
    assert main([*big, "--framework", "megatron", "--set", "tp_overlap=full", "--top", "5", "--json"]) == 0
    assert all(
        r["strategy"]["tp_overlap"] == "full"
        for r in json.loads(capsys.readouterr().out)["rows"]
        if r["strategy"]["tp"] > 1
    )


def test_a_batch_record_names_its_framework(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = {
        "model": "llama3-8b",
        "hardware": "h100",
        "devices": 8,
        "global_batch": 64,
        "seq_len": 4096,
        "strategy": "tp=2,dp=4",
    }
    path = tmp_path / "b.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(r)
            for r in (
                {**rec, "framework": "nanotron"},
                {
                    **rec,
                    "loss": "copy",
                    "eager_swiglu": True,
                    "attention_kernel": "fa2",
                    "grad_accum_bytes": 10,
                    "pipeline_split_cost": True,
                    "sp_regather": True,
                },
                {**rec, "framework": "nanotron", "strategy": "tp=2,dp=4,recompute=selective"},
            )
        ),
        encoding="utf-8",
    )
    assert main(["plan", "--batch", str(path), "--json"]) == 0
    a, b, c = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert a["step_time_s"] == b["step_time_s"] and "ignored_keys" not in a
    assert "nanotron has no recompute policy 'selective'" in c["error"]
    # --framework on the command line applies to records that name none of their own
    path.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "framework": "megatron"}), encoding="utf-8")
    assert main(["plan", "--batch", str(path), "--json", "--framework", "nanotron"]) == 0
    d, e = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert d["step_time_s"] == a["step_time_s"] != e["step_time_s"]


def test_unknown_framework_and_bad_catalog_entries(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*JOB, "--framework", "pytorch", "--top", "1"]) == 2
    assert (
        "unknown framework 'pytorch' (one of megatron, torchtitan, maxtext, mindspeed, nanotron"
        in capsys.readouterr().err
    )
    ok = {"recompute": ["none"], "settings": {"loss": "fused"}}
    assert frameworks._parse("x", ok).settings == {"loss": "fused"}
    for bad, words in (
        ({**ok, "recompte": ["full"]}, "unknown key recompte"),
        (
            {**ok, "settings": {"loss": "fast"}},
            "framework x: loss must be one of fused, unfused, copy, compiled, te, not 'fast'",
        ),
        (
            {**ok, "settings": {"fused_projections": "yes"}},
            "framework x: fused_projections must be true or false, not 'yes'",
        ),
        ({**ok, "recompute": ["sometimes"]}, "recompute must list policies"),
        ({**ok, "schedules": ["chimera"]}, "schedules must be of"),
    ):
        with pytest.raises(ConfigError, match=words):
            frameworks._parse("x", bad)
    assert set(frameworks.catalog()) == {"megatron", "mindspeed", "torchtitan", "maxtext", "nanotron", "deepspeed"}


def test_megatrons_backward_overlap_applies_without_sequence_parallelism_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The megatron preset's TP overlap (bwd: the input-gradient collective under the weight-gradient
    GEMM) works with or without sequence parallelism, so --no-sequence-parallel keeps it, in
    --evaluate and in the search, as if --tp-overlap bwd had been given."""
    big = [
        "plan",
        "--model",
        "llama3-70b",
        "--hardware",
        "h100",
        "--devices",
        "64",
        "--global-batch",
        "64",
        "--seq-len",
        "4096",
        "--set",
        "sequence_parallel=false",
    ]
    ev = ["--evaluate", "tp=8,pp=4,dp=2", "--json"]
    assert main([*big, "--framework", "megatron", *ev]) == 0
    preset = json.loads(capsys.readouterr().out)
    assert main([*big, "--set", "tp_overlap=bwd", "--set", "attention_kernel=cudnn", *ev]) == 0
    explicit = json.loads(capsys.readouterr().out)
    assert preset["strategy"]["tp_overlap"] == explicit["strategy"]["tp_overlap"] == "bwd"
    assert preset["step_time_s"] == explicit["step_time_s"]
    assert main([*big, "--framework", "megatron", "--top", "5", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert all(
        r["strategy"]["tp_overlap"] == "bwd" and r["strategy"]["sp"] == 0 for r in rows if r["strategy"]["tp"] > 1
    )


def test_only_the_frameworks_zero_stages_and_pipeline_interleaving(capsys: pytest.CaptureFixture[str]) -> None:
    """nanotron has ZeRO-0/1 and no interleaved stages; torchtitan plain DP or FSDP. The search
    keeps to them and --evaluate refuses the others in one line."""
    big = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "64",
        "--global-batch",
        "256",
        "--seq-len",
        "4096",
    ]
    assert main([*big, "--framework", "nanotron", "--top", "200", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows and {r["strategy"]["zero"] for r in rows} <= {0, 1} and {r["strategy"]["vpp"] for r in rows} == {1}
    # without the preset the same search does use the others (the restriction is the preset's)
    assert main([*big, "--top", "200", "--json"]) == 0
    free = json.loads(capsys.readouterr().out)["rows"]
    assert {r["strategy"]["zero"] for r in free} - {0, 1} or {r["strategy"]["vpp"] for r in free} - {1}
    assert main([*big, "--framework", "torchtitan", "--top", "200", "--json"]) == 0
    assert {r["strategy"]["zero"] for r in json.loads(capsys.readouterr().out)["rows"]} <= {0, 3}
    assert main([*big, "--framework", "nanotron", "--evaluate", "dp=64,zero=3"]) == 2
    err = capsys.readouterr().err
    assert "nanotron has no ZeRO stage 3 (its stages: zero=0|1)" in err and len(err.strip().splitlines()) == 1
    assert main([*big, "--framework", "nanotron", "--evaluate", "pp=4,vpp=2,dp=16,zero=1"]) == 2
    assert "nanotron has no interleaved pipeline stages (vpp=2)" in capsys.readouterr().err
    # an explicit --where on the field wins over the preset's restriction
    assert main([*big, "--framework", "nanotron", "--where", "zero=3", "--top", "3", "--json"]) == 0
    assert {r["strategy"]["zero"] for r in json.loads(capsys.readouterr().out)["rows"]} == {3}


def test_bad_zero_or_interleaving_entries_are_refused() -> None:
    ok = {"recompute": ["none"]}
    for bad, words in (
        ({**ok, "zero": [4]}, "zero must list ZeRO stages"),
        ({**ok, "zero": [True]}, "zero must list ZeRO stages"),
        ({**ok, "zero": 1}, "zero must list ZeRO stages"),
        ({**ok, "virtual_stages": "no"}, "virtual_stages cannot be 'no'"),
    ):
        with pytest.raises(ConfigError, match=words):
            frameworks._parse("x", bad)
    assert frameworks._parse("x", {**ok, "zero": [0, 1], "virtual_stages": False}).zero == (0, 1)


def test_maxtext_gathers_fsdp_weights_tensor_by_tensor(capsys: pytest.CaptureFixture[str]) -> None:
    # GPT-3 175B: a layer 1.81e9 parameters, the largest tensor the embedding (50257 x 12288, 6.18e8)
    tpu = [
        "plan",
        "--model",
        "gpt3-175b",
        "--hardware",
        "tpu-v5p",
        "--devices",
        "64",
        "--global-batch",
        "64",
        "--seq-len",
        "2048",
        "--evaluate",
        "dp=64,zero=3,mb=1,recompute=full",
        "--json",
    ]
    assert main([*tpu, "--framework", "maxtext"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["settings"]["zero3_gather"] == "tensor" and rec["settings"]["reserve_gb"] == 0.0
    # the same as the flag; the default (PyTorch FSDP, a block at once) holds more
    assert main([*tpu, "--set", "fused_projections=false", "--set", "zero3_gather=tensor"]) == 0
    assert json.loads(capsys.readouterr().out)["memory_gb"]["buffers"] == pytest.approx(rec["memory_gb"]["buffers"])
    assert main([*tpu, "--set", "fused_projections=false"]) == 0
    assert rec["memory_gb"]["buffers"] == pytest.approx(10 * 50257 * 12288 / 1e9, rel=1e-3)
    layer = json.loads(capsys.readouterr().out)["memory_gb"]["buffers"]
    assert layer == pytest.approx(10 * 12 * 12288**2 / 1e9, rel=1e-3)


def test_deepspeed_sets_only_its_engines_properties(capsys: pytest.CaptureFixture[str]) -> None:
    big = [
        "plan",
        "--model",
        "gpt3-175b",
        "--hardware",
        "a100",
        "--devices",
        "64",
        "--global-batch",
        "64",
        "--seq-len",
        "2048",
    ]
    assert main([*big, "--framework", "deepspeed", "--evaluate", "dp=64,zero=3,mb=1,recompute=full", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)["settings"]
    # ZeRO-3 fetched module by module; the model code's choices stay the planner's defaults
    assert st["zero3_gather"] == "tensor" and st["loss"] == "fused" and st["fused_projections"] is True
    assert main([*big, "--framework", "deepspeed", "--evaluate", "tp=8,pp=4,vpp=2,dp=2"]) == 2
    assert "deepspeed has no interleaved pipeline stages" in capsys.readouterr().err
    assert main([*big, "--framework", "deepspeed", "--evaluate", "dp=64,zero=3,recompute=op"]) == 2
    assert "deepspeed has no recompute policy 'op'" in capsys.readouterr().err
