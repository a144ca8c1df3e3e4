"""How layers are split over pipeline stages. Megatron's account_for_embedding_in_pipeline_split +
account_for_loss_in_pipeline_split (the pipeline_split_embedding setting): the embedding and the loss count
as one layer each, so the first and the last stage hold one transformer layer fewer. nanotron's
split by cost (the pipeline_split_cost setting): blocks fill a stage until their cumulative cost passes
k/pp of the total, the output layer counted at V h against a layer's 4 n_heads d_head h + 3 d_ff h."""

from __future__ import annotations

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
        (126, 16, True, (8, 7)),  # Llama 3.1 405B in Megatron-Bridge's recipe: (126 + 2) / 16 = 8, the ends 7
        (126, 16, False, (8, 8)),  # ceil(126 / 16)
        (6, 2, True, (3, 3)),  # two stages are both end stages: (6 + 2) / 2 - 1
        (6, 4, True, (2, 1)),
        (6, 1, True, (6, 6)),  # no pipeline: nothing to split
    ],
)
def test_stage_layers(L: int, pp: int, split: bool, expected: tuple[int, int]) -> None:
    stage, first, last = stage_layers(float(L), np.array([pp]), split)
    assert (int(stage[0]), int(first[0])) == expected and last[0] == first[0]


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


def _job(split: bool, cost: bool = False) -> Job:
    return make_job(M, hardware("h100"), 4, 4, 16, 1024, pipeline_split_embedding=split, pipeline_split_cost=cost)


def test_weights_of_the_most_loaded_stage() -> None:
    """pp = 4, no sharding, bf16 weights: without the split a stage of ceil(6/4) = 2 layers is
    counted with the embedding, 2 x (2 x 49,152 + 6,400) B; with it the middle stages hold 2
    layers and the ends 1 layer + the embedding: 2 x max(98,304, 55,552) B."""
    s = parse_strategy("pp=4,mb=1")
    assert evaluate(_job(False), s)["weights_gb"][0] == pytest.approx(2 * (2 * 49_152 + 6_400) / 1e9)
    assert evaluate(_job(True), s)["weights_gb"][0] == pytest.approx(2 * 98_304 / 1e9)


def test_activations_of_the_first_and_second_stage() -> None:
    """1F1B over 4 stages and 16 micro-batches, no recompute: the first stage holds 4 micro-batches
    of its layers, the second 3. Without the split 4 x 2 layers; with it max(4 x 1, 3 x 2) = 6
    layers' worth: the ratio is 8 / 6 (the last stage, 1-2 layers and a 100-word loss, is smaller)."""
    s = parse_strategy("pp=4,mb=1")
    without, with_split = (float(evaluate(_job(x), s)["activations_gb"][0]) for x in (False, True))
    assert without / with_split == pytest.approx(8 / 6)


def test_the_pace_is_the_most_loaded_stage() -> None:
    """With A = the layers' compute of the whole model per device and B = the output layer's, the
    planner's pipeline runs at a stage's pace: pp = 1 gives A + B; pp = 4 without the split
    (2 layers of the even 1.5, and the last stage also runs the output layer for every
    micro-batch) A 2/1.5 + 4 B; with it the middle stages' A 2/1.5 or the last's A 1/1.5 + 4 B,
    whichever is longer. A and B are solved from the first two."""
    one = float(evaluate(_job(False), parse_strategy("dp=4,mb=1"))["compute_s"][0])
    four = float(evaluate(_job(False), parse_strategy("pp=4,mb=1"))["compute_s"][0])
    a = (4 * one - four) / (4 - 2 / 1.5)
    b = one - a
    assert a > 0 and b > 0
    split = float(evaluate(_job(True), parse_strategy("pp=4,mb=1"))["compute_s"][0])
    assert split == pytest.approx(max(a * 2 / 1.5, a / 1.5 + 4 * b), rel=1e-9)


def test_split_by_cost_weights_and_pace() -> None:
    """pp = 2 split by cost: a layer 65,536, the output layer 6,400, total 399,616; the first stage
    passes half (199,808) with its 4th layer, so it holds 4 layers and the embedding, the last
    2 layers and the output layer. Weights: 2 B x (4 x 49,152 + 6,400). The pace, with A and B as
    in test_the_pace_is_the_most_loaded_stage: max(A 4/3, A 2/3 + 2 B); the even split's is A + 2 B
    (3 layers each, the output layer on the last)."""
    s = parse_strategy("pp=2,dp=2,mb=1")  # all 4 devices: 8 micro-batches of a 2-stage pipeline
    r = evaluate(_job(False, cost=True), s)
    assert r["weights_gb"][0] == pytest.approx(2 * (4 * 49_152 + 6_400) / 1e9)
    one = float(evaluate(_job(False), parse_strategy("dp=4,mb=1"))["compute_s"][0])
    four = float(evaluate(_job(False), parse_strategy("pp=4,mb=1"))["compute_s"][0])
    a = (4 * one - four) / (4 - 2 / 1.5)
    b = one - a
    assert float(r["compute_s"][0]) == pytest.approx(max(a * 4 / 3, a * 2 / 3 + 2 * b), rel=1e-9)
    assert float(evaluate(_job(False), s)["compute_s"][0]) == pytest.approx(a + 2 * b, rel=1e-9)


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
        "1024",
        "--global-batch",
        "512",
        "--seq-len",
        "8192",
        "--evaluate",
        "tp=8,pp=16,vpp=2,dp=8,mb=1,zero=1",
        "--json",
    ]
    plain, split = run_json(*args), run_json(*args, "--set", "pipeline_split_embedding=true")
    assert split["settings"]["pipeline_split_embedding"] is True and "pipeline_split_embedding" not in plain["settings"]
    assert split["memory_gb"]["weights"] < plain["memory_gb"]["weights"]
    batch = tmp_path / "b.jsonl"
    rec = {
        "model": "llama3-405b",
        "hardware": "h100",
        "devices": 1024,
        "global_batch": 512,
        "seq_len": 8192,
        "strategy": "tp=8,pp=16,vpp=2,dp=8,mb=1,zero=1",
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
