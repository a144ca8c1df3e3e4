"""Model configs with shapes no model has are refused with one line naming the key, instead of
being truncated or planned as given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stepscope.analysis.model_flops import from_config_dict
from stepscope.cli import main
from stepscope.errors import ConfigError

BASE: dict[str, Any] = {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8, "intermediate_size": 4096,
                        "vocab_size": 32000}


@pytest.mark.parametrize(("change", "says"), [
    ({"num_hidden_layers": 4.5}, "num_hidden_layers is 4.5, not a whole number"),  # int() would plan 4 layers
    ({"hidden_size": True}, "hidden_size is True"),  # int(True) == 1
    ({"hidden_size": -1024}, "hidden_size is -1024"),
    ({"intermediate_size": float("nan")}, "intermediate_size is nan"),
    ({"num_hidden_layers": 0}, "num_hidden_layers is 0; it must be at least 1"),
    ({"num_key_value_heads": 16}, "num_key_value_heads 16 does not divide num_attention_heads 8"),
    ({"num_key_value_heads": 3}, "num_key_value_heads 3 does not divide num_attention_heads 8"),
    ({"num_attention_heads": 7}, "hidden_size 1024 is not a multiple of num_attention_heads 7"),
    ({"num_local_experts": 4, "num_experts_per_tok": 8}, "8 experts per token out of 4 experts"),
])
def test_impossible_shapes_are_refused(change: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(".", r"\.")):
        from_config_dict({**BASE, **change})


def test_shapes_that_exist_still_read() -> None:
    assert from_config_dict({**BASE, "num_attention_heads": 7, "head_dim": 128}).head_dim == 128  # stated head_dim: any hidden size
    assert from_config_dict({**BASE, "num_key_value_heads": 2}).n_kv_heads == 2
    assert from_config_dict({**BASE, "num_hidden_layers": 4.0}).n_layers == 4  # a whole number written as a float
    assert from_config_dict({**BASE, "num_local_experts": 8, "num_experts_per_tok": 8}).experts_per_token == 8


def test_plan_says_it_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({**BASE, "num_hidden_layers": 4.5}), encoding="utf-8")
    assert main(["plan", "--model", str(cfg), "--hardware", "h100", "--devices", "8", "--global-batch", "8", "--seq-len", "1024"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(cfg) in err and "num_hidden_layers is 4.5" in err
