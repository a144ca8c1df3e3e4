"""Configuration files nested thousands deep (a model config.json, a --batch line, YAML through
either loader): one error line, or one error record, never a RecursionError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from stepscope import yamlio
from stepscope.cli import main

DEEP = "[" * 5000 + "]" * 5000
JOB = {
    "model": "llama3-8b",
    "hardware": "h100",
    "devices": 8,
    "global_batch": 16,
    "seq_len": 4096,
    "strategy": "tp=1,pp=1,dp=8,mb=1",
}


def test_a_deep_batch_line_is_one_error_record_and_the_others_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "b.jsonl"
    p.write_text(json.dumps(JOB) + "\n" + '{"x": ' + DEEP + "}\n" + json.dumps(JOB) + "\n")
    assert main(["plan", "--batch", str(p)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(out) == 3
    assert "error" in out[1] and "line 2" in out[1]["error"]
    assert "error" not in out[0] and "error" not in out[2]


def test_a_deep_model_config_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "config.json"
    p.write_text('{"hidden_size": 4096, "x": ' + DEEP + "}")
    rc = main(
        ["plan", "--model", str(p), "--hardware", "h100", "--devices", "8", "--global-batch", "16", "--seq-len", "4096"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "cannot read model config" in err[0]


def test_a_model_config_with_zero_heads_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"hidden_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 0}))
    rc = main(
        ["plan", "--model", str(p), "--hardware", "h100", "--devices", "8", "--global-batch", "16", "--seq-len", "4096"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "num_attention_heads is 0" in err[0]


@pytest.mark.parametrize("loader", ["c", "python"])
def test_deep_yaml_is_a_yaml_error_with_either_loader(monkeypatch: pytest.MonkeyPatch, loader: str) -> None:
    if loader == "python":
        monkeypatch.setattr(yamlio, "_Loader", yaml.SafeLoader)
    elif not hasattr(yaml, "CSafeLoader"):
        pytest.skip("PyYAML built without libyaml")
    with pytest.raises(yaml.YAMLError):
        yamlio.safe_load("x: " + DEEP + "\n")
