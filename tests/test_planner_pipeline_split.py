"""Megatron's account_for_embedding_in_pipeline_split + account_for_loss_in_pipeline_split
(Job.pipeline_split_embedding): the embedding and the loss count as one layer each when the layers
are split over the stages, so the first and the last stage hold one transformer layer fewer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.analysis.model_flops import ModelShape
from stepscope.planner.cost import Job, evaluate, stage_layers
from stepscope.planner.search import hardware, parse_strategy

# 6 layers of h = 64, 4 MHA heads, a plain MLP of 256: 4 h^2 + 2 h 256 = 49,152 matmul weights a
# layer; a 100-word vocabulary: 6,400 embedding weights
M = ModelShape(d_model=64, n_layers=6, n_heads=4, n_kv_heads=4, head_dim=16, d_ff=256, vocab=100, gated_mlp=False)


@pytest.mark.parametrize(("L", "pp", "split", "expected"), [
    (126, 16, True, (8, 7)),  # Llama 3.1 405B in Megatron-Bridge's recipe: (126 + 2) / 16 = 8, the ends 7
    (126, 16, False, (8, 8)),  # ceil(126 / 16)
    (6, 2, True, (3, 3)),  # two stages are both end stages: (6 + 2) / 2 - 1
    (6, 4, True, (2, 1)),
    (6, 1, True, (6, 6)),  # no pipeline: nothing to split
])
def test_stage_layers(L: int, pp: int, split: bool, expected: tuple[int, int]) -> None:
    stage, end = stage_layers(float(L), np.array([pp]), split)
    assert (int(stage[0]), int(end[0])) == expected


def _job(split: bool) -> Job:
    return Job(M, hardware("h100"), 4, 4, 16, 1024, pipeline_split_embedding=split)


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


def test_the_flag_and_the_batch_key(tmp_path: Path, run_json: Callable[..., Any]) -> None:
    args = ["plan", "--model", "llama3-405b", "--hardware", "h100", "--devices", "1024", "--global-batch", "512", "--seq-len", "8192",
            "--evaluate", "tp=8,pp=16,vpp=2,dp=8,mb=1,zero=1", "--json"]
    plain, split = run_json(*args), run_json(*args, "--pipeline-split-embedding")
    assert split["settings"]["pipeline_split_embedding"] is True and "pipeline_split_embedding" not in plain["settings"]
    assert split["memory_gb"]["weights"] < plain["memory_gb"]["weights"]
    batch = tmp_path / "b.jsonl"
    rec = {"model": "llama3-405b", "hardware": "h100", "devices": 1024, "global_batch": 512, "seq_len": 8192,
           "strategy": "tp=8,pp=16,vpp=2,dp=8,mb=1,zero=1", "pipeline_split_embedding": True}
    batch.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    line = run_json("plan", "--batch", str(batch), "--json")
    assert "ignored_keys" not in line and line["memory_gb"]["weights"] == split["memory_gb"]["weights"]
