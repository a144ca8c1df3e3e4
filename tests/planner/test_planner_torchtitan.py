"""torchtitan's mechanisms by hand, on a small GQA model (h 1024, 16 heads of 64, 4 KV heads, f 4096,
8 layers). K and V repeated to every query head before the attention kernel (its Llama runs
repeat_kv ahead of scaled_dot_product_attention): under GQA context parallelism exchanges
n_heads-wide K and V, the no-recompute policy stores them, and the copy moves the extra heads.
Sequence parallelism that keeps its all-gathered linear inputs (its DTensor TP plan)."""

from __future__ import annotations

import json

import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.cli import main
from stepscope.planner.cost import evaluate
from stepscope.planner.frameworks import by_name
from stepscope.planner.job import Job, make_job
from stepscope.planner.rates import stored_per_token
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy
from stepscope.planner.work import memory_bound_bytes

GQA = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "head_dim": 64,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
}
H, Q, KV, L, SEQ = 1024, 16 * 64, 4 * 64, 8, 8192


def _job(**kw: object) -> Job:
    return make_job(from_config_dict(GQA), hardware("h100"), 8, 8, 8, SEQ, **kw)  # type: ignore[arg-type]


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
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--global-batch",
        "8",
        "--seq-len",
        "65536",
        "--evaluate",
        "cp=8,dp=1,mb=1,recompute=full",
        "--json",
    ]
    assert main(args) == 0
    plain = capsys.readouterr().out
    assert main([*args, "--set", "kv_repeated=true"]) == 0
    repeated = capsys.readouterr().out
    a, b = json.loads(plain), json.loads(repeated)
    assert b["settings"]["kv_repeated"] is True and a["settings"].get("kv_repeated") in (None, False)
    assert b["step_time_s"] > a["step_time_s"]


def test_sequence_parallelism_that_keeps_its_gathered_inputs_by_hand() -> None:
    """torchtitan's TP plan gathers each norm's output (PrepareModuleInput, Shard(1) -> Replicate)
    before the column-parallel linears, and autograd keeps that whole input: per token and layer,
    two h-wide bf16 inputs, of which Korthikanti's count (re-gathered in backward, as Megatron does)
    keeps 1/tp. At tp 4: 2 x 2 B x 1024 x 3/4 = 3,072 B per token and layer more."""
    extra_per_token_layer = 2 * 2 * H * (1 - 1 / 4)
    tokens = SEQ  # one micro-batch of one sequence in flight (no pipeline)
    for policy, layers in (("none", L), ("full", 1)):  # full: only the layer backward regenerates
        s = parse_strategy(f"tp=4,dp=2,mb=1,recompute={policy}")
        base, kept = evaluate(_job(), s), evaluate(_job(sp_saves_gathered=True), s)
        assert float(kept["activations_gb"][0] - base["activations_gb"][0]) == pytest.approx(
            layers * tokens * extra_per_token_layer / 1e9
        )
    # torchtitan's op policy re-gathers (it saves reduce-scatter outputs, not all-gather outputs):
    # only the regenerated layer holds them
    s = parse_strategy("tp=4,dp=2,mb=1,recompute=op")
    assert float(
        evaluate(_job(sp_saves_gathered=True), s)["activations_gb"][0] - evaluate(_job(), s)["activations_gb"][0]
    ) == pytest.approx(tokens * extra_per_token_layer / 1e9)
    # without sequence parallelism the inputs are whole anyway, and at tp 1 there is nothing to gather
    for strategy in ("tp=4,sp=0,dp=2,mb=1,recompute=none", "tp=1,dp=8,mb=1,recompute=none"):
        s = parse_strategy(strategy)
        assert evaluate(_job(sp_saves_gathered=True), s)["activations_gb"][0] == pytest.approx(
            evaluate(_job(), s)["activations_gb"][0]
        )
