"""K and V repeated to every query head before the attention kernel (torchtitan's Llama runs
repeat_kv ahead of scaled_dot_product_attention): under GQA context parallelism exchanges n_heads-wide
K and V, the no-recompute policy stores them, and the copy moves the extra heads. Values by hand on a
small GQA model (h 1024, 16 heads of 64, 4 KV heads, f 4096, 8 layers)."""

from __future__ import annotations

import json

import pytest

from stepscope.analysis.model_flops import from_config_dict
from stepscope.cli import main
from stepscope.planner.cost import Job, evaluate
from stepscope.planner.frameworks import by_name
from stepscope.planner.rates import stored_per_token
from stepscope.planner.search import hardware, parse_strategy
from stepscope.planner.work import memory_bound_bytes

GQA = {"hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
       "intermediate_size": 4096, "vocab_size": 32000, "hidden_act": "silu"}
H, Q, KV, L, SEQ = 1024, 16 * 64, 4 * 64, 8, 8192


def _job(**kw: object) -> Job:
    return Job(from_config_dict(GQA), hardware("h100"), 8, 8, 8, SEQ, **kw)  # type: ignore[arg-type]


def test_no_recompute_stores_the_repeated_heads() -> None:
    m = from_config_dict(GQA)
    plain, repeated = stored_per_token(m), stored_per_token(m, kv_repeated=True)
    # k and v grow from 256 to 1024 wide: 2 x 768 elements x 2 B per token and layer, / h
    assert repeated[0] - plain[0] == pytest.approx(2 * 2 * (Q - KV) / H)
    assert repeated[1] - plain[1] == pytest.approx(2 * 2 * (Q - KV) / H)
    # without GQA there is nothing to repeat
    mha = from_config_dict({**GQA, "num_key_value_heads": 16})
    assert stored_per_token(mha, kv_repeated=True) == stored_per_token(mha)


def test_the_copy_moves_the_extra_heads_three_times() -> None:
    s = parse_strategy("dp=8")
    tokens = 1000.0
    one = memory_bound_bytes(_job(), tokens, s["tp"], s["sp"], 0.0)
    two = memory_bound_bytes(_job(kv_repeated=True), tokens, s["tp"], s["sp"], 0.0)
    # forward writes the extra 768 elements of k and v, backward writes their gradients and reads
    # them to sum: 3 x 2 x 768 x 2 B per token and layer
    assert float(two[0] - one[0]) == pytest.approx(3 * 2 * (Q - KV) * 2 * L * tokens)


def test_context_parallel_exchanges_n_heads_wide_kv() -> None:
    s = parse_strategy("cp=8,dp=1,mb=1,recompute=full")
    plain, repeated = evaluate(_job(), s), evaluate(_job(kv_repeated=True), s)
    for r in (plain, repeated):  # a roomy window: half of the exchange hides, half is exposed
        assert r["hidden_cp_s"][0] == pytest.approx(r["cp_s"][0])
    # the kernel's K and V are 16 heads wide instead of 4: 4x the bytes over the same ring
    assert repeated["cp_s"][0] == pytest.approx(4 * plain["cp_s"][0])


def test_torchtitan_preset_and_flag_set_it() -> None:
    assert by_name("torchtitan").settings["kv_repeated"] is True
    assert "kv_repeated" not in by_name("megatron").settings


def test_flag_reaches_the_settings(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "llama3-8b", "--hardware", "h100", "--devices", "8", "--global-batch", "8", "--seq-len", "65536",
            "--evaluate", "cp=8,dp=1,mb=1,recompute=full", "--json"]
    assert main(args) == 0
    plain = capsys.readouterr().out
    assert main([*args, "--repeated-kv"]) == 0
    repeated = capsys.readouterr().out
    a, b = json.loads(plain), json.loads(repeated)
    assert b["settings"]["kv_repeated"] is True and a["settings"].get("kv_repeated") in (None, False)
    assert b["step_time_s"] > a["step_time_s"]
