"""Expert parallelism's token exchange (planner/dispatch.py): DeepEP's node-deduplicated dispatch
and group-limited routing, by hand."""

from __future__ import annotations

import dataclasses
from math import comb

import numpy as np
import pytest

from stepscope.catalog.model_flops import ModelShape
from stepscope.catalog.models import resolve
from stepscope.planner.cost import evaluate
from stepscope.planner.dispatch import exchange_seconds, remote_nodes
from stepscope.planner.record import job_from_record
from stepscope.planner.strategy import parse_strategy


def _moe(experts: int, k: int, groups: int = 0, chosen: int = 0) -> ModelShape:
    return ModelShape(
        d_model=1024,
        n_layers=2,
        n_heads=8,
        n_kv_heads=8,
        head_dim=128,
        d_ff=1024,
        vocab=1000,
        gated_mlp=True,
        n_experts=experts,
        experts_per_token=k,
        d_ff_expert=512,
        routing_groups=groups,
        routing_group_topk=chosen,
    )


def test_remote_nodes_without_group_limits() -> None:
    """8 experts on 2 nodes (4 each), 2 per token: the other node gets none of them with
    probability C(4, 2) / C(8, 2) = 6/28, so a token reaches 1 - 6/28 = 22/28 other nodes."""
    assert float(remote_nodes(_moe(8, 2), np.array([2.0]))[0]) == pytest.approx(22 / 28, rel=1e-12)
    assert float(remote_nodes(_moe(8, 2), np.array([1.0]))[0]) == 0.0


def test_remote_nodes_with_deepseek_group_limits() -> None:
    """DeepSeek-V3 (256 experts, 8 per token, 8 groups, 4 per token) with EP over 8 nodes, one group
    a node: a node is reached when its group is among the 4 of 8 chosen, 1 - C(7, 4)/C(8, 4) = 1/2:
    4 nodes, 3.5 of them remote. Over 16 nodes each group spans 2 and the 8 experts fall on the 8
    nodes of the chosen groups (128 experts, 16 a node): 8 x (1 - C(112, 8)/C(128, 8)) x 15/16."""
    m = resolve("deepseek-v3")
    assert (m.routing_groups, m.routing_group_topk) == (8, 4)  # from its config's n_group / topk_group
    assert float(remote_nodes(m, np.array([8.0]))[0]) == pytest.approx(3.5, rel=1e-12)
    expected = 8 * (1 - comb(112, 8) / comb(128, 8)) * 15 / 16
    assert float(remote_nodes(m, np.array([16.0]))[0]) == pytest.approx(expected, rel=1e-12)
    unlimited = dataclasses.replace(m, routing_groups=0, routing_group_topk=0)
    assert float(remote_nodes(unlimited, np.array([8.0]))[0]) == pytest.approx(
        8 * (1 - comb(224, 8) / comb(256, 8)) * 7 / 8, rel=1e-12
    )


def test_exchange_by_hand() -> None:
    """1,000 tokens of h 1,024 on the rank, 4 transfers of 2 B: 8.192 MB a copy. All-to-all, EP 16
    over 2 nodes of 8: the 2 copies go to the other node 8/16 of the time, at 50 GB/s (0.1638 ms),
    and to the 7 other ranks of this node 7/16 of the time, at 400 GB/s (0.0358 ms), at once: the
    longer. DeepEP: 22/28 remote copies at 50 GB/s (0.1287 ms) against the forwarding in the node,
    2 x 7/8 copies at 400 GB/s (0.0358 ms): the longer. Inside one node both are the all-to-all:
    2 x 7/8 copies at 400 GB/s."""
    m = _moe(8, 2)

    def link(span: np.ndarray, ranks: np.ndarray | None = None) -> np.ndarray:  # 50 GB/s beyond a node of 8, 400 within
        return np.where(np.asarray(span) > 8, 50e9, 400e9)

    args = dict(
        tokens=np.array([1000.0]),
        h=1024.0,
        imbalance=1.0,
        ep=np.array([16.0]),
        span=np.array([16.0]),
        node=8.0,
        link=link,
    )
    copy_b = 4 * 1000 * 1024 * 2
    assert float(exchange_seconds(m, dispatch="all_to_all", **args)[0]) == pytest.approx(
        copy_b * 2 * 8 / 16 / 50e9, rel=1e-12
    )
    assert float(exchange_seconds(m, dispatch="deepep", **args)[0]) == pytest.approx(copy_b * 22 / 28 / 50e9, rel=1e-12)
    inside = {**args, "ep": np.array([8.0]), "span": np.array([8.0])}
    assert float(exchange_seconds(m, dispatch="deepep", **inside)[0]) == float(
        exchange_seconds(m, dispatch="all_to_all", **inside)[0]
    )
    assert float(exchange_seconds(m, dispatch="all_to_all", **inside)[0]) == pytest.approx(
        copy_b * 2 * 7 / 8 / 400e9, rel=1e-12
    )
    # EP 2 with expert TP 16 spans 32 ranks of 4 nodes, but its other rank is the only peer: half
    # of the 2 copies leave the rank, over the network
    wide = {**args, "ep": np.array([2.0]), "span": np.array([32.0])}
    assert float(exchange_seconds(m, dispatch="all_to_all", **wide)[0]) == pytest.approx(
        copy_b * 2 * 1 / 2 / 50e9, rel=1e-12
    )
    # when NVLink is the longer: the all-to-all's 2 x 7/16 copies in the node at 20 GB/s
    slow = {**args, "link": lambda span, ranks=None: np.where(np.asarray(span) > 8, 50e9, 20e9)}
    assert float(exchange_seconds(m, dispatch="all_to_all", **slow)[0]) == pytest.approx(
        copy_b * 2 * 7 / 16 / 20e9, rel=1e-12
    )
    # DeepEP, when the NVLink forwarding is the longer: 2 x 7/8 copies at 20 GB/s
    assert float(exchange_seconds(m, dispatch="deepep", **slow)[0]) == pytest.approx(
        copy_b * 2 * 7 / 8 / 20e9, rel=1e-12
    )


def test_deepseek_ep64_exchange_by_hand() -> None:
    """DeepSeek-V3 with EP 64 over 8 nodes of H100s, nothing hidden: DeepEP moves 3.5 remote copies of
    a token where the all-to-all moves 8 x 56/64 (the copies for the other 7 nodes), over the same
    network rate: 3.5 / 7 of the time."""
    rec = {"model": "deepseek-v3", "hardware": "h100", "devices": 512, "global_batch": 1024, "seq_len": 4096}
    s = parse_strategy("tp=1,pp=8,dp=64,ep=64,zero=1,mb=1")
    plain = evaluate(job_from_record(rec), s)
    deep = evaluate(job_from_record({**rec, "ep_dispatch": "deepep"}), s)
    assert float(deep["ep_s"][0] / plain["ep_s"][0]) == pytest.approx(3.5 / (8 * 56 / 64), rel=1e-9)


def test_unknown_dispatch_is_refused() -> None:
    from stepscope.errors import ConfigError

    with pytest.raises(ConfigError, match="ep_dispatch must be one of all_to_all, deepep"):
        job_from_record(
            {
                "model": "deepseek-v3",
                "hardware": "h100",
                "devices": 8,
                "global_batch": 8,
                "seq_len": 4096,
                "ep_dispatch": "nvshmem",
            }
        )


def test_deepep_sms_slow_the_compute_they_hide_under() -> None:
    """DeepEP's 20 SMs of an H100's 132: an exchange hidden under compute leaves the compute 112 SMs,
    20/112 of the hidden time longer. DeepSeek-V3, EP 64 over 8 nodes with EP overlap: all of the
    exchange hides, and what the step pays for it is 20/112 of it. The all-to-all, and devices
    without an SM count, pay nothing for it; a record may set another SM count."""
    from stepscope.planner.dispatch import sm_contention_s

    assert float(sm_contention_s("deepep", np.array([10.0]), 20, 132)[0]) == pytest.approx(10 * 20 / 112, rel=1e-12)
    assert (
        sm_contention_s("all_to_all", np.array([10.0]), 20, 132) == 0.0
        and sm_contention_s("deepep", np.array([10.0]), 20, None) == 0.0
    )
    rec = {
        "model": "deepseek-v3",
        "hardware": "h100",
        "devices": 512,
        "global_batch": 1024,
        "seq_len": 4096,
        "ep_dispatch": "deepep",
    }
    s = parse_strategy("tp=1,pp=8,dp=64,ep=64,zero=1,mb=1,ep_overlap=1")
    r = evaluate(job_from_record(rec), s)
    assert float(r["hidden_ep_s"][0]) > 0 and float(r["ep_s"][0]) == pytest.approx(
        float(r["hidden_ep_s"][0]) * 20 / 112, rel=1e-9
    )
    r24 = evaluate(job_from_record({**rec, "deepep_sms": 24}), s)
    assert float(r24["ep_s"][0]) == pytest.approx(float(r24["hidden_ep_s"][0]) * 24 / 108, rel=1e-9)
