"""Model configs with shapes no model has are refused with one line naming the key, instead of
being truncated or planned as given."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.cli import main
from stepscope.errors import ConfigError

BASE: dict[str, Any] = {
    "hidden_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "intermediate_size": 4096,
    "vocab_size": 32000,
}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"num_hidden_layers": 4.5}, "num_hidden_layers is 4.5, not a whole number"),  # int() would plan 4 layers
        ({"hidden_size": True}, "hidden_size is True"),  # int(True) == 1
        ({"hidden_size": -1024}, "hidden_size is -1024"),
        ({"intermediate_size": float("nan")}, "intermediate_size is nan"),
        (
            {"hidden_size": float("inf")},
            "hidden_size is inf, not a finite number",
        ),  # JSON's 1e400; int() raised OverflowError
        ({"sliding_window": float("inf")}, "sliding_window is inf"),
        ({"rope_theta": float("inf")}, "rope_theta is inf"),  # any key: nothing infinite belongs in a config
        (
            {"hidden_size": 2**40},
            "hidden_size is 1099511627776, not a whole number from 0 to 2^31",
        ),  # int64 products overflow
        ({"full_attention_interval": 2.5}, "full_attention_interval is 2.5"),
        ({"num_hidden_layers": 0}, "num_hidden_layers is 0; it must be at least 1"),
        ({"num_key_value_heads": 16}, "num_key_value_heads 16 does not divide num_attention_heads 8"),
        ({"num_key_value_heads": 3}, "num_key_value_heads 3 does not divide num_attention_heads 8"),
        ({"num_attention_heads": 7}, "hidden_size 1024 is not a multiple of num_attention_heads 7"),
        ({"num_local_experts": 4, "num_experts_per_tok": 8}, "8 experts per token out of 4 experts"),
    ],
)
def test_impossible_shapes_are_refused(change: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        from_config_dict({**BASE, **change})


def test_shapes_that_exist_still_read() -> None:
    assert (
        from_config_dict({**BASE, "num_attention_heads": 7, "head_dim": 128}).head_dim == 128
    )  # stated head_dim: any hidden size
    assert from_config_dict({**BASE, "num_key_value_heads": 2}).n_kv_heads == 2
    assert from_config_dict({**BASE, "num_hidden_layers": 4.0}).n_layers == 4  # a whole number written as a float
    assert from_config_dict({**BASE, "num_local_experts": 8, "num_experts_per_tok": 8}).experts_per_token == 8


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (json.dumps({**BASE, "num_hidden_layers": 4.5}), "num_hidden_layers is 4.5"),
        (json.dumps(BASE).replace("1024", "1e400", 1), "hidden_size is inf"),  # json reads 1e400 as infinity
    ],
)
def test_plan_says_it_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(text, encoding="utf-8")
    assert (
        main(
            [
                "plan",
                "--model",
                str(cfg),
                "--hardware",
                "h100",
                "--devices",
                "8",
                "--global-batch",
                "8",
                "--seq-len",
                "1024",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(cfg) in err and says in err
