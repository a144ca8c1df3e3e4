"""The framework settings declared once (planner/config.py): every key reachable through --set,
--config and a --framework preset; one error naming the key and its values; the generated knob
table up to date; the job built frozen, with its defaults resolved before it exists."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from stepscope.cli import main
from stepscope.errors import ConfigError
from stepscope.planner import frameworks
from stepscope.planner.args import cli_settings
from stepscope.planner.config import BY_KEY, SETTINGS, FrameworkConfig
from stepscope.planner.job import Job, make_job
from stepscope.planner.knobs import Setting
from stepscope.planner.record import job_from_record
from stepscope.planner.search import hardware, model
from stepscope.planner.settings import job_settings
from stepscope.planner.settings_doc import settings_table
from stepscope.planner.strategy import Strategy

ROOT = Path(__file__).resolve().parents[2]
JOB = {"model": "llama3-8b", "hardware": "h100", "devices": 8, "global_batch": 16, "seq_len": 4096}
ARGS = ["plan", "--model", "llama3-8b", "--hardware", "h100", "--devices", "8", "--global-batch", "16"]
ARGS += ["--seq-len", "4096"]


def _other(s: Setting) -> tuple[str, Any]:
    """A value other than the default, as text (the way --set gives it) and in the field's unit."""
    if s.kind == "bool":
        return str(not s.default).lower(), not s.default
    if s.kind == "choice":
        pick = next(c for c in s.choices if c != s.default and c)
        return pick, pick
    if s.kind == "int":
        return "21", 21
    if s.meta.le == 1.0:  # a share
        return "0.25", 0.25
    if s.meta.ge == 1.0:  # an imbalance
        return "1.5", 1.5
    return "7", 7.0 * s.meta.scale


def _ns(**kw: Any) -> Any:
    return type("NS", (), {"config": None, "settings": [], "precision": None, "framework": None, **kw})()


@pytest.mark.parametrize("key", sorted(BY_KEY))
def test_every_setting_is_reachable_by_set_config_and_preset(key: str, tmp_path: Path) -> None:
    text, value = _other(BY_KEY[key])
    by_set = cli_settings(_ns(settings=[f"{key}={text}"]))
    assert by_set.values == {key: text}
    got = job_from_record({**JOB, **by_set.values}).framework.value(key)
    assert got == (pytest.approx(value) if isinstance(value, float) else value)
    config = tmp_path / "c.yaml"
    config.write_text(f"{key}: {json.dumps(text)}\n", encoding="utf-8")
    assert cli_settings(_ns(config=str(config))).values == {key: text}
    preset = frameworks.Framework(
        name="x", description="", settings={key: text}, recompute=("none",), schedules=(), source=""
    )
    assert FrameworkConfig.from_keys(frameworks.apply(dict(JOB), preset)).value(key) == got


def test_a_bad_value_is_one_error_naming_the_key_and_its_values(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGS, "--set", "loss=chunked", "--top", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "stepscope: error: loss must be one of fused, unfused, copy, compiled, te, not 'chunked' (e.g. --set loss=unfused)"
    )
    assert main([*ARGS, "--set", "los=te", "--top", "1"]) == 2
    assert "--set 'los=te': unknown setting 'los'" in capsys.readouterr().err
    assert main([*ARGS, "--set", "loss=te", "--set", "loss=copy", "--top", "1"]) == 2
    assert "--set loss given twice (te, copy)" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"deepep_sms must be a whole number >= 0 and < 1024 \(SMs\), not '2.5'"):
        FrameworkConfig.from_keys({"deepep_sms": "2.5"})
    with pytest.raises(ConfigError, match="flash_attention must be true or false, not 'no'"):
        FrameworkConfig.from_keys({"flash_attention": "no"})  # not Python's truthiness
    with pytest.raises(ConfigError, match="optimizer_bytes must be a number > 0 and <= 64"):
        dataclasses.replace(FrameworkConfig().memory, optimizer_bytes=0.0)  # checked when built in Python too


def test_set_wins_over_the_config_file_which_wins_over_the_preset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "team.yaml"
    config.write_text("framework: torchtitan\nloss: te\nmoe_imbalance: 1.5\n", encoding="utf-8")

    def settings(*extra: str) -> dict[str, Any]:
        assert main([*ARGS, "--config", str(config), *extra, "--evaluate", "dp=8,zero=3", "--json"]) == 0
        return json.loads(capsys.readouterr().out)["settings"]

    st = settings()
    # the file's loss over torchtitan's compiled one; the preset's other settings stay
    assert st["loss"] == "te" and st["fused_projections"] is False
    assert settings("--set", "loss=copy")["loss"] == "copy"
    assert settings("--framework", "megatron")["fused_projections"] is True  # --framework names the preset


def test_the_settings_report_of_a_default_job_by_hand() -> None:
    st = job_settings(job_from_record(dict(JOB)))
    assert list(st.items()) == [
        ("precision", "bf16"),
        ("loss", "fused"),
        ("fused_projections", True),
        ("fused_elementwise", True),
        ("eager_swiglu", False),
        ("flash_attention", True),
        ("grad_bytes", 4),
        ("reserve_gb", 3.0),
        ("memory_margin", 0.05),  # resolved for a CUDA device, as the reserve is
    ]
    # microseconds in, microseconds out: 10 us of nanotron's gather, 200 us of host wait
    st = job_settings(job_from_record({**JOB, "zero_gather_copy_us": 10, "host_wait_us": 200}))
    assert st["zero_gather_copy_us"] == pytest.approx(10) and st["host_wait_us"] == pytest.approx(200)


def test_the_knob_table_in_the_docs_is_the_generated_one() -> None:
    committed = (ROOT / "docs" / "plan-settings.md").read_text(encoding="utf-8")
    assert committed == settings_table(), "run python -m stepscope.planner.settings_doc"
    assert all(f"`{s.key}`" in committed for s in SETTINGS)


def test_help_is_short(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    assert len(capsys.readouterr().out.splitlines()) <= 100


def test_the_job_resolves_its_defaults_before_it_is_built() -> None:
    m = model("llama3-8b")
    assert make_job(m, hardware("h100"), 8, 8, 16, 2048).reserve_gb == 3.0  # CUDA context and allocator slack
    assert make_job(m, hardware("tpu-v5p"), 8, 8, 16, 2048).reserve_gb == 0.0  # XLA assigns memory statically
    assert make_job(m, hardware("h100"), 8, 8, 16, 2048, precision="fp16").grad_bytes == 2
    assert make_job(m, hardware("h100"), 8, 8, 16, 2048, precision="fp8").grad_bytes == 4
    job = make_job(m, hardware("h100"), 8, 8, 16, 2048)
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.batch = job.batch  # type: ignore[misc]
    with pytest.raises(ConfigError, match="not resolved"):
        Job(model=m, hw=job.hw, cluster=job.cluster, batch=job.batch)
    with pytest.raises(ConfigError, match="global batch must be a whole number >= 1, not 0"):
        job.replaced(global_batch=0)


def test_a_strategy_states_its_own_overlap_or_takes_the_frameworks() -> None:
    fw = FrameworkConfig.from_keys({"tp_overlap": "full", "ep_overlap": True})
    assert Strategy.parse("tp=8").under(fw).tp_overlap == 1  # full
    assert Strategy.parse("tp=8,tp_overlap=bwd").under(fw).tp_overlap == 2  # the strategy's own
    assert Strategy.parse("tp=8").under(fw).ep_overlap == 1
    assert Strategy.parse("tp=8").under(FrameworkConfig.from_keys({"sequence_parallel": "false"})).sp == 0
    with pytest.raises(ConfigError, match="needs sequence parallelism"):
        Strategy.parse("tp=8,sp=0").under(fw)
    assert math.isclose(FrameworkConfig.from_keys({"host_wait_us": 200}).host.wait_s, 200e-6)


def test_every_printed_object_carries_the_schema_version_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*ARGS, "--evaluate", "dp=8", "--json"]) == 0
    assert next(iter(json.loads(capsys.readouterr().out))) == "schema_version"
    assert main([*ARGS, "--top", "2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 2 and all(list(r)[:2] == ["schema_version", "strategy"] for r in rows)
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({**JOB, "strategy": "dp=8"}) + "\n[1]\n", encoding="utf-8")
    assert main(["plan", "--batch", str(batch)]) == 0
    ok, error = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert ok["schema_version"] == error["schema_version"] == 3 and list(error) == ["schema_version", "error"]


def test_a_blank_value_is_the_blank_choice_or_none() -> None:
    assert (
        make_job(
            model("llama3-8b"), hardware("h100"), 8, 8, 16, 2048, attention_kernel=""
        ).framework.kernels.attention_kernel
        == ""
    )
    assert FrameworkConfig().with_keys({"grad_dtype": ""}).precision.grads is None
    with pytest.raises(ConfigError, match="loss must be one of"):
        FrameworkConfig().with_keys({"loss": ""})
