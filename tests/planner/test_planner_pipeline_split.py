"""How layers are split over pipeline stages. Megatron's account_for_embedding_in_pipeline_split +
account_for_loss_in_pipeline_split (the pipeline_split_embedding setting): the embedding and the loss count
as one layer each, so the first and the last stage hold one transformer layer fewer. nanotron's
split by cost (the pipeline_split_cost setting): blocks fill a stage until their cumulative cost passes
k/pp of the total, the output layer counted at V h against a layer's 4 n_heads d_head h + 3 d_ff h."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.catalog.model_flops import ModelShape
from stepscope.cli import main
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.search import hardware
from stepscope.planner.stages import cost_split, split_costs, stage_layers
from stepscope.planner.strategy import parse_strategy

# 6 layers of h = 64, 4 MHA heads, a plain MLP of 256: 4 h^2 + 2 h 256 = 49,152 matmul weights a
# layer; a 100-word vocabulary: 6,400 embedding weights
M = ModelShape(d_model=64, n_layers=6, n_heads=4, n_kv_heads=4, head_dim=16, d_ff=256, vocab=100, gated_mlp=False)


@pytest.mark.parametrize(
    ("L", "pp", "split", "expected"),
    [
        (126, 16, True, (8, 7, 7)),  # Llama 3.1 405B in Megatron-Bridge's recipe: (126 + 2) / 16 = 8, the ends 7
        # 14 middle stages of ceil(126 / 16) = 8 leave 126 - 112 = 14 to the ends: 7 and 7
        (126, 16, False, (8, 7, 7)),
        (61, 16, False, (4, 3, 2)),  # DeepSeek-V3: 14 x 4 = 56, the ends 5: 3 first, 2 last
        (9, 4, False, (3, 2, 1)),  # 2 x 3 = 6, the ends 3
        (61, 2, False, (31, 31, 30)),  # two end stages: ceil and floor of 61 / 2
        # 2 x ceil(5 / 4) = 4 would leave the ends 1 layer, none for the last: the middle stages
        # take floor(5 / 4) = 1, the ends 3
        (5, 4, False, (2, 2, 1)),
        (61, 32, False, (16, 16, 15)),  # 30 x 2 = 60 would leave 1: 30 x 1, the ends 31
        # 14 x ceil(17 / 16) = 28 > 17: the middle stages take floor(17 / 16) = 1, the ends 3
        (17, 16, False, (2, 2, 1)),
        (96, 8, False, (12, 12, 12)),  # 8 divides 96
        (6, 2, True, (3, 3, 3)),  # two stages are both end stages: (6 + 2) / 2 - 1
        (6, 4, True, (2, 1, 1)),
        (6, 1, True, (6, 6, 6)),  # no pipeline: nothing to split
        (7, 1, False, (7, 7, 7)),
    ],
)
def test_stage_layers(L: int, pp: int, split: bool, expected: tuple[int, int, int]) -> None:
    stage, first, last = stage_layers(float(L), np.array([pp]), split)
    assert (int(stage[0]), int(first[0]), int(last[0])) == expected


@pytest.mark.parametrize(
    ("L", "pp", "layer", "head", "expected"),
    [
        # 16 layers of cost 1, an output layer of 4: total 20, the first stage closes when its
        # cumulative cost passes 10, after its 11th layer; the second holds 5 layers and the output layer
        (16, 2, 1, 4, (11, 11, 5)),
        # equal layers, no output layer: thresholds 2, 4, 6 over cumulative 1..6; a stage closes only
        # once it has passed its threshold (the crossing layer stays), so 3, 2, 1 layers
        (6, 3, 1, 0, (3, 3, 1)),
        (6, 1, 1, 4, (6, 6, 6)),  # no pipeline
    ],
)
def test_cost_split(L: int, pp: int, layer: int, head: int, expected: tuple[int, int, int]) -> None:
    assert cost_split(L, pp, layer, head) == expected
    stage, first, last = stage_layers(float(L), np.array([pp, pp]), False, (layer, head))
    assert [stage.tolist(), first.tolist(), last.tolist()] == [[float(x)] * 2 for x in expected]


def test_split_costs_follow_nanotron() -> None:
    """4 x 4 heads x 16 x 64 + 3 x 256 x 64 (nanotron's formula counts 3 d_ff h, gated or not) and 100 x 64."""
    assert split_costs(M) == (16_384 + 49_152, 6_400)


def _job(split: bool, cost: bool = False, layers: int = 6) -> Job:
    m = M if layers == 6 else dataclasses.replace(M, n_layers=layers)
    return make_job(m, hardware("h100"), 4, 4, 16, 1024, pipeline_split_embedding=split, pipeline_split_cost=cost)


@pytest.mark.parametrize(
    ("layers", "plain_b", "split_b"),
    [
        # 6 layers: the two middle stages hold ceil(6/4) = 2 layers, the ends the 2 left, 1 each +
        # the embedding; with the split the same: max(2 x 49,152, 49,152 + 6,400) weights
        (6, 2 * 98_304, 2 * 98_304),
        # 8 layers: 2 a stage, an end stage with the embedding; with the split the ends hold
        # ceil(10/4) - 1 = 2 and the middle stages the 4 left, 2 each (10 slots do not split over 4
        # stages: Megatron runs it as an explicit layout): the same max(2 x 49,152 + 6,400, 2 x 49,152)
        (8, 2 * (2 * 49_152 + 6_400), 2 * (2 * 49_152 + 6_400)),
    ],
)
def test_weights_of_the_most_loaded_stage(layers: int, plain_b: int, split_b: int) -> None:
    """pp = 4, no sharding, bf16 weights (2 B each)."""
    s = parse_strategy("pp=4,mb=1")
    assert evaluate(_job(False, layers=layers), s)["weights_gb"][0] == pytest.approx(plain_b / 1e9)
    assert evaluate(_job(True, layers=layers), s)["weights_gb"][0] == pytest.approx(split_b / 1e9)


def test_activations_of_the_first_and_second_stage() -> None:
    """1F1B over 4 stages and 16 micro-batches, no recompute: the first stage holds 4 micro-batches
    of its layers, the second 3. 8 layers: 2 a stage with or without the split (its 10 slots leave
    the ends 2 and the middle stages 2): 4 x 2 either way. 12 layers: without the split 3 a stage,
    4 x 3 = 12 layers' worth; with it 14 slots, the ends ceil(14 / 4) - 1 = 3 and the middle stages
    the 6 left, 3 each: the same (the last stage, 3 layers and a 100-word loss, is smaller)."""
    s = parse_strategy("pp=4,mb=1")
    for layers in (8, 12):
        without, with_split = (float(evaluate(_job(x, layers=layers), s)["activations_gb"][0]) for x in (False, True))
        assert without == pytest.approx(with_split)
    assert float(evaluate(_job(True, layers=12), s)["activations_gb"][0]) == pytest.approx(
        1.5 * float(evaluate(_job(True, layers=8), s)["activations_gb"][0])
    )


def _layers_and_output(layers: int) -> tuple[float, float]:
    """(A, B): the layers' compute of the whole model per device and the output layer's, from
    pp = 1 (A + B) and an even pp = 2 (3 or 4 layers a stage, the last stage also running the
    output layer for its 2 micro-batches' share: A + 2 B)."""
    one = float(evaluate(_job(False, layers=layers), parse_strategy("dp=4,mb=1"))["compute_s"][0])
    two = float(evaluate(_job(False, layers=layers), parse_strategy("pp=2,dp=2,mb=1"))["compute_s"][0])
    return 2 * one - two, two - one


def test_the_pace_is_the_most_loaded_stage() -> None:
    """The pipeline runs at its slowest stage's pace. 8 layers on 4 stages: 2 a stage, the even
    share, so A + 4 B (the last stage runs the output layer for every micro-batch); with the split
    still 2 a stage (the ends ceil(10 / 4) - 1 = 2, the middle the 4 left): A + 4 B."""
    a, b = _layers_and_output(8)
    assert a > 0 and b > 0
    plain = float(evaluate(_job(False, layers=8), parse_strategy("pp=4,mb=1"))["compute_s"][0])
    assert plain == pytest.approx(a + 4 * b, rel=1e-9)
    split = float(evaluate(_job(True, layers=8), parse_strategy("pp=4,mb=1"))["compute_s"][0])
    assert split == pytest.approx(a + 4 * b, rel=1e-9)


def test_split_by_cost_weights_and_pace() -> None:
    """pp = 2 split by cost: a layer 65,536, the output layer 6,400, total 399,616; the first stage
    passes half (199,808) with its 4th layer, so it holds 4 layers and the embedding, the last
    2 layers and the output layer. Weights: 2 B x (4 x 49,152 + 6,400). The pace, with A and B as
    in test_the_pace_is_the_most_loaded_stage: max(A 4/3, A 2/3 + 2 B)."""
    s = parse_strategy("pp=2,dp=2,mb=1")  # all 4 devices: 8 micro-batches of a 2-stage pipeline
    r = evaluate(_job(False, cost=True), s)
    assert r["weights_gb"][0] == pytest.approx(2 * (4 * 49_152 + 6_400) / 1e9)
    a, b = _layers_and_output(6)
    assert a > 0 and b > 0
    assert float(r["compute_s"][0]) == pytest.approx(max(a * 4 / 3, a * 2 / 3 + 2 * b), rel=1e-9)


def test_split_by_cost_flag_preset_and_conflict(
    run_json: Callable[..., Any], capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "16",
        "--global-batch",
        "64",
        "--seq-len",
        "4096",
        "--evaluate",
        "tp=1,pp=4,dp=4,mb=1,zero=1",
        "--json",
    ]
    plain, cost = run_json(*args), run_json(*args, "--set", "pipeline_split_cost=true")
    assert cost["settings"]["pipeline_split_cost"] is True and "pipeline_split_cost" not in plain["settings"]
    assert run_json(*args, "--framework", "nanotron")["settings"]["pipeline_split_cost"] is True
    # Megatron's split asked for wins over the preset's; both asked for is refused
    mixed = run_json(*args, "--framework", "nanotron", "--set", "pipeline_split_embedding=true")["settings"]
    assert mixed.get("pipeline_split_embedding") is True and "pipeline_split_cost" not in mixed
    assert main(list(args) + ["--set", "pipeline_split_cost=true", "--set", "pipeline_split_embedding=true"]) == 2
    assert "--set", "pipeline_split_cost=true" in capsys.readouterr().err


def test_the_flag_and_the_batch_key(tmp_path: Path, run_json: Callable[..., Any]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-405b",
        "--hardware",
        "h100",
        "--devices",
        "896",
        "--global-batch",
        "448",
        "--seq-len",
        "8192",
        "--evaluate",
        "tp=8,pp=14,dp=8,mb=1,zero=1",
        "--json",
    ]
    plain, split = run_json(*args), run_json(*args, "--set", "pipeline_split_embedding=true")
    assert split["settings"]["pipeline_split_embedding"] is True and "pipeline_split_embedding" not in plain["settings"]
    # 126 layers on 14 stages: 9 a stage, the first also the embedding; with the split the ends hold
    # ceil(128 / 14) - 1 = 9 and the 12 middle stages the 108 left, 9 each: the same weights
    assert split["memory_gb"]["weights"] == pytest.approx(plain["memory_gb"]["weights"])
    batch = tmp_path / "b.jsonl"
    rec = {
        "model": "llama3-405b",
        "hardware": "h100",
        "devices": 896,
        "global_batch": 448,
        "seq_len": 8192,
        "strategy": "tp=8,pp=14,dp=8,mb=1,zero=1",
        "pipeline_split_embedding": True,
    }
    batch.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    line = run_json("plan", "--batch", str(batch), "--json")
    assert "ignored_keys" not in line and line["memory_gb"]["weights"] == split["memory_gb"]["weights"]


def test_counted_embedding_and_loss_let_an_uneven_stack_interleave() -> None:
    """6 layers + the embedding and the loss = 8 slots: on 2 stages, 1, 2 and 4 chunks a stage
    split them (4, 2 and 1 slots a chunk); without the setting 6 layers on 2 stages take 1 and 3
    chunks (3 and 1 layers a chunk)."""
    from stepscope.planner.search import space

    def chunks(**settings: Any) -> set[int]:
        job = make_job(M, hardware("h100"), 4, 8, 16, 1024).with_settings(**settings)
        s = space(job)
        return {int(v) for v in np.unique(s["vpp"][s["pp"] == 2])}

    assert chunks() == {1, 3}
    assert chunks(pipeline_split_embedding=True) == {1, 2, 4}


def _mtp_job(devices: int) -> Job:
    return make_job(dataclasses.replace(M, mtp_layers=1), hardware("h100"), devices, 4, 48, 1024)


def test_the_mtp_module_sits_on_the_last_stage() -> None:
    """One multi-token-prediction module (a layer, 49,152 weights, and its 2h x h projection,
    8,192) on the last stage with the output layer and, as Megatron builds the MTP stage, an
    embedding of its own. Weights, pp = 2 (3 layers a stage): the last stage's 3 x 49,152 +
    2 x 6,400 + 57,344. The pace, with A = the layers' and the module's compute
    per device (spread as 7 layers) and B = one pass of the output layer and the loss per device:
    pp = 1 takes A + 2 B (the module's own prediction is a second pass); pp = 2 the last stage's
    (3 + 1) / 3.5 A + 2 x 2 B; pp = 3 (2 layers a stage) (2 + 1) / (7/3) A + 3 x 2 B."""
    s2 = parse_strategy("pp=2,dp=6,mb=1")
    assert evaluate(_mtp_job(12), s2)["weights_gb"][0] == pytest.approx(2 * (3 * 49_152 + 2 * 6_400 + 57_344) / 1e9)
    c1, c2, c3 = (
        float(evaluate(_mtp_job(12), parse_strategy(f"pp={pp},dp={12 // pp},mb=1"))["compute_s"][0]) for pp in (1, 2, 3)
    )
    b = (7 * c2 - 8 * c1) / 12
    a = c1 - 2 * b
    assert a > 0 and b > 0
    assert c3 == pytest.approx(9 * a / 7 + 6 * b, rel=1e-9)


def test_the_mtp_module_leaves_the_per_layer_transfers_alone() -> None:
    """The TP transfers of the most loaded stage come from its own layers: the same with and
    without an MTP module on the last stage."""
    s = parse_strategy("tp=2,pp=2,dp=6,mb=1")
    plain = make_job(M, hardware("h100"), 24, 8, 48, 1024)
    with_mtp = make_job(dataclasses.replace(M, mtp_layers=1), hardware("h100"), 24, 8, 48, 1024)
    assert evaluate(with_mtp, s)["tp_s"][0] == pytest.approx(evaluate(plain, s)["tp_s"][0], rel=1e-12)
    assert evaluate(plain, s)["tp_s"][0] > 0


def test_the_mtp_module_holds_its_own_logits() -> None:
    """Without a pipeline, 6 layers and an MTP module hold what 7 layers hold plus the module's own
    logits: 1,024 tokens x 100 words x 6 B (the fused loss's bf16 logits and fp32 copy)."""
    s = parse_strategy("dp=4,mb=1")
    six_mtp = make_job(dataclasses.replace(M, mtp_layers=1), hardware("h100"), 4, 4, 16, 1024)
    seven = make_job(dataclasses.replace(M, n_layers=7), hardware("h100"), 4, 4, 16, 1024)
    diff_b = (evaluate(six_mtp, s)["activations_gb"][0] - evaluate(seven, s)["activations_gb"][0]) * 1e9
    assert diff_b == pytest.approx(1024 * 100 * 6, rel=1e-9)
