"""Interleaving multiplies the pipeline's point-to-point hops by vpp (Narayanan et al. 2021, section
2.2.2): by hand on a tiny model (8 layers, pp 2, 4 micro-batches), 2 x ((pp vpp - 1) + m vpp x 0.2)
hops of one micro-batch's activations, the 0.2 being the steady-state share left exposed."""

from __future__ import annotations

import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.planner.cost import evaluate
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy
from stepscope.planner.vocab import PP_P2P_HIDDEN

TINY = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
}


def _p2p(vpp: int) -> float:
    job = make_job(from_config_dict(TINY), hardware("h100"), 8, 8, 16, 2048)
    return float(evaluate(job, parse_strategy(f"pp=2,vpp={vpp},dp=4,mb=1,recompute=none"))["pp_p2p_s"][0])


def test_interleaving_multiplies_the_hops() -> None:
    m, pp, exposed = 4, 2, 1 - PP_P2P_HIDDEN
    hops = {v: 2 * ((pp * v - 1) + m * v * exposed) for v in (1, 2, 4)}
    assert _p2p(2) / _p2p(1) == pytest.approx(hops[2] / hops[1])  # 4.6 / 1.8
    assert _p2p(4) / _p2p(1) == pytest.approx(hops[4] / hops[1])


def test_one_hop_by_hand() -> None:
    # one micro-batch's activations: 2048 tokens x 1024 x 2 B over the node's link, plus a step latency
    from stepscope.planner.links import INTRA_STEP_S

    hw = hardware("h100")
    hop = 2048 * 1024 * 2 / (hw.intra_node_gbps * 1e9) + INTRA_STEP_S
    assert _p2p(1) == pytest.approx(2 * ((2 - 1) + 4 * (1 - PP_P2P_HIDDEN)) * hop)
