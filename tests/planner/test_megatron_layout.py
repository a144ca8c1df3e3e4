"""Megatron's --pipeline-model-parallel-layout for splits its count switches cannot give
(planner/megatron_layout.py), read back with the string format Megatron documents
(pipeline_parallel_layer_layout.py, parse_str_to_list), and uneven interleaving in the search."""

from __future__ import annotations

import re

import numpy as np

from stepscope.planner.megatron_layout import counts_run, layout, rank_layers
from stepscope.planner.record import job_from_record
from stepscope.planner.search import space
from stepscope.planner.stages import stage_layers
from stepscope.planner.switches import switches

ROW = {
    "tp": 2, "sp": 1, "pp": 8, "vpp": 4, "dp": 16, "cp": 1, "ep": 32, "etp": 1, "zero": 1, "hsdp": 0,
    "mb": 1, "ga": 128, "offload": 0, "offload_layers": 0, "tp_overlap": "bwd", "ep_overlap": 0,
    "keep_params": 0, "recompute": "none", "sched": "1f1b",
}  # fmt: skip


def parse(text: str) -> list[str]:
    """Megatron's reading of a layout: commas dropped, ``(...)*n`` then ``x*n`` unrolled, split on
    ``|``: one string of layer characters per virtual stage."""
    text = text.replace(",", "")
    text = re.sub(r"\(([^)]+)\)\*(\d+)", lambda x: x.group(1) * int(x.group(2)), text)
    text = re.sub(r"(.)\*(\d+)", lambda x: x.group(1) * int(x.group(2)), text)
    return text.split("|")


def per_rank(stages: list[str], pp: int) -> list[int]:
    """Decoder layers of each pipeline rank: stage v x pp + r belongs to rank r."""
    return [sum(s.count("t") for s in stages[r::pp]) for r in range(pp)]


def test_qwen3_235b_at_pp8_vp4() -> None:
    # NVIDIA's recipe: 94 layers on 8 ranks of 4 virtual stages; Megatron's end-stage counts give
    # ceil(94 / 8) = 12 to each middle rank and (94 - 6 x 12) / 2 = 11 to each end, 11 % 4 != 0
    assert not counts_run(94, 8, 4, split_embedding=False)
    stages = parse(layout(94, 8, 4, split_embedding=False))
    assert len(stages) == 32
    assert per_rank(stages, 8) == [11, 12, 12, 12, 12, 12, 12, 11]
    # a rank's 11 layers as 3, 3, 3, 2 over its stages, 12 as 3 each
    assert [s.count("t") for s in stages[0::8]] == [3, 3, 3, 2]
    assert [s.count("t") for s in stages[1::8]] == [3, 3, 3, 3]
    assert stages[0].startswith("E") and stages[-1].endswith("L")
    assert "".join(stages).count("E") == 1 and "".join(stages).count("L") == 1


def test_deepseek_v3_with_its_mtp_layer() -> None:
    # 61 layers on 16 ranks: middle ranks 4, first 3, last 2 (stages.end_split); 4 % 2 == 0 but 3 % 2 != 0
    assert not counts_run(61, 16, 2, split_embedding=False)
    stages = parse(layout(61, 16, 2, split_embedding=False, mtp=1))
    assert per_rank(stages, 16) == [3] + [4] * 14 + [2]
    flat = "".join(stages)
    assert flat.count("m") == 1 and stages[-1].endswith("mL")  # after every decoder layer, before the loss


def test_embedding_and_loss_as_layers() -> None:
    # Llama 3 405B: 126 + 2 = 128 slots, 8 a rank on 16 ranks, 2 per stage at VP4: the count switches run
    assert counts_run(126, 16, 4, split_embedding=True)
    # 29 layers + 2 on 4 ranks: 31 slots do not split evenly; the ends hold ceil(31 / 4) - 1 = 7
    # layers each, the middle ones 8 and 7
    assert not counts_run(29, 4, 1, split_embedding=True)
    stages = parse(layout(29, 4, 1, split_embedding=True))
    assert per_rank(stages, 4) == [7, 8, 7, 7]
    assert stages[0] == "E" + "t" * 7 and stages[-1] == "t" * 7 + "L"


def test_even_splits_need_no_layout() -> None:
    assert counts_run(32, 4, 2, split_embedding=False)  # 8 a rank, 4 a stage
    assert counts_run(61, 16, 1, split_embedding=False)  # first and last counts, no interleaving
    assert counts_run(61, 1, 1, split_embedding=False)


def test_switches_print_the_layout_instead_of_the_counts() -> None:
    text = switches("megatron", ROW, layers=94, global_batch=2048, seq_len=4096, experts=128, cores=1)
    assert "--pipeline-model-parallel-layout 'Et*3|(t*3|)*23t*2|(t*3|)*6t*2L'" in text
    assert "--num-virtual-stages-per-pipeline-rank" not in text
    assert "--decoder-first-pipeline-num-layers" not in text
    even = switches("megatron", {**ROW, "vpp": 2}, layers=96, global_batch=2048, seq_len=4096, experts=128, cores=1)
    assert "--num-virtual-stages-per-pipeline-rank 2" in even and "layout" not in even


def test_search_reaches_nvidias_qwen3_recipe() -> None:
    # TP2 PP8 VP4 EP32 on 256 H100s: 94 layers do not split into 32 stages evenly, and EP 32 spans
    # the 16 data-parallel ranks x 2 tensor ranks (expert TP 1: expert data-parallel group of 1)
    job = job_from_record(
        {
            "model": "qwen3-235b-a22b",
            "hardware": "h100",
            "devices": 256,
            "global_batch": 2048,
            "seq_len": 4096,
            "precision": "fp8",
            "framework": "megatron",
        }
    )
    g = space(job)
    recipe = (g["tp"] == 2) & (g["pp"] == 8) & (g["vpp"] == 4) & (g["ep"] == 32)
    assert np.any(recipe & (g["etp"] == 1))
    # with expert TP 2 the experts would need 64 ranks of the 32 that dp x cp x tp gives
    assert not np.any(recipe & (g["etp"] == 0))
    # every interleaved row keeps at least one layer a virtual stage on average
    inter = g["vpp"] > 1
    assert np.all(g["pp"][inter] * g["vpp"][inter] <= 94)


def test_the_cost_model_paces_the_layouts_stages() -> None:
    # 96 layers + 2 on 8 ranks: 98 slots do not split; the ends hold ceil(98 / 8) - 1 = 12 layers,
    # the six middle ranks (96 - 24) / 6 = 12: no rank holds 13
    stages = parse(layout(96, 8, 1, split_embedding=True))
    assert per_rank(stages, 8) == [12] * 8
    most, first, last = stage_layers(96.0, np.array([8]), True)
    assert (most[0], first[0], last[0]) == (12, 12, 12)
    # and wherever the count switches cannot give the split, the most loaded rank is the layout's
    for L in range(4, 70):
        for pp in (2, 3, 4, 6, 8):
            for split in (False, True):
                ranks = rank_layers(L, pp, split)
                assert sum(ranks) == L
                assert stage_layers(float(L), np.array([pp]), split)[0][0] == max(ranks)


def test_a_row_with_fewer_layers_than_stages_still_gets_a_layout() -> None:
    stages = parse(layout(5, 2, 4, split_embedding=True))  # an --evaluate row: 8 stages, 5 layers
    assert len(stages) == 8 and "".join(stages).count("t") == 5
    assert stages[0].startswith("E") and stages[-1].endswith("L")


def test_expert_parallelism_stays_in_data_parallelism_where_the_framework_says() -> None:
    record = {"model": "qwen3-235b-a22b", "hardware": "h100", "devices": 256, "global_batch": 2048, "seq_len": 4096}
    g = space(job_from_record({**record, "framework": "megatron", "ep_across_tp": False}))
    assert np.all(g["dp"] % g["ep"] == 0)
    g = space(job_from_record({**record, "framework": "megatron"}))
    assert np.any(g["ep"] > g["dp"])
