"""HCCL operators' own args (``count``, ``data_type``, ``rank_size``) and their communicator lane:
message bytes for the cluster view's bandwidth, and one group name on every rank, so collectives
match across ranks whatever thread id each rank's profiler gave the lane."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analysis.api import analyze

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
US = 1000


def _rank_timeline(lane_tid: int, op_start_us: float, count: int) -> list[dict[str, Any]]:
    """One step: a matmul [100, 300) us on stream 3, and an all-reduce of ``count`` bf16 elements
    on the communicator lane from ``op_start_us`` to 300 us."""
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_labels", "pid": 2, "tid": 0, "args": {"labels": "NPU 0"}},
        {"ph": "M", "name": "process_name", "pid": 3, "tid": 0, "args": {"name": "Communication"}},
        {
            "ph": "M",
            "name": "thread_name",
            "pid": 3,
            "tid": lane_tid,
            "args": {"name": "Group 7788%enp_0_1 Communication"},
        },
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": "0.0", "dur": 400},
        {"ph": "X", "name": "MatMul1", "pid": 2, "tid": 3, "ts": "100.0", "dur": 200, "args": {"Task Type": "AI_CORE"}},
    ]
    args = {"connection_id": 1, "model id": 4294967295, "data_type": "BFP16", "alg_type": "RING", "count": count}
    args["rank_size"] = 2
    dur = 300 - op_start_us
    ev.append(
        {
            "ph": "X",
            "name": "hcom_allReduce__1_0_1",
            "pid": 3,
            "tid": lane_tid,
            "ts": f"{op_start_us}",
            "dur": dur,
            "args": args,
        }
    )
    return ev


def _profiles(root: Path, count: int) -> Path:
    for rank, (tid, start) in enumerate(((7, 150.0), (12, 220.0))):
        out = root / f"host_{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        out.mkdir(parents=True)
        (out.parent / f"profiler_info_{rank}.json").write_text("{}")
        (out / "trace_view.json").write_text(json.dumps(_rank_timeline(tid, start, count)))
    return root


def test_collectives_match_by_communicator_and_carry_their_bytes(tmp_path: Path) -> None:
    """4,194,304 bf16 elements = 8,388,608 bytes. Rank 0's operator runs [150, 300) us, rank 1's
    [220, 300): they end together, rank 1 arrived last and did not wait, so the transfer is its
    80 us: algbw 8,388,608 B / 80 us = 104.86 GB/s; all-reduce over 2 ranks: busbw = algbw x
    2 (2 - 1) / 2 = the same. The lanes have different thread ids on the two ranks."""
    res = analyze(stepscope.load(_profiles(tmp_path, 4_194_304)))
    assert res.cluster is not None
    (inst,) = res.cluster.collectives
    assert inst.group == "7788%enp_0_1" and inst.type == "all_reduce"
    assert inst.bytes == 8_388_608 and inst.transfer_ns == 80 * US and inst.last_rank == 1
    assert inst.algbw_gbps == pytest.approx(8_388_608 / 80e-6 / 1e9)
    assert inst.busbw_gbps == pytest.approx(8_388_608 / 80e-6 / 1e9)


def test_the_old_hccl_sample_gets_its_message_sizes() -> None:
    """msprof-analyze's byte-alignment timeline: three broadcasts of 256 elements, INT64, INT64 and
    FP32: 2,048, 2,048 and 1,024 bytes."""
    tr = stepscope.load(FIXTURES / "ascend/trace_view.hccl_byte_alignment.json")
    ce = analyze(tr).ranks[0].comm_events
    assert ce is not None and sorted(ce.bytes.tolist()) == [1024, 2048, 2048]
