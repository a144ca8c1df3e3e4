"""All-to-all imbalance from the recorded splits of every member (three expert-parallel ranks, by
hand; times in us)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope.analysis.api import analyze
from stepscope.analysis.cluster.results import AllToAllImbalanceFinding

from .. import synth

N = 6


def _ranks(tmp_path: Path, splits: dict[int, str]) -> Path:
    """Ranks 0-2, 6 steps of 1000 us: a 400 us GEMM at t+10, then one all-to-all of 3,000 float32
    elements (12,000 B) per rank on stream 20 from t+420 for 100 us, split as ``splits[rank]``."""
    d = tmp_path / "ranks"
    d.mkdir()
    for rank, split in splits.items():
        ev = []
        for k in range(N):
            t = 1000 * k
            args = {
                "Collective name": "all_to_all",
                "In msg nelems": 3000,
                "Out msg nelems": 3000,
                "Group size": 3,
                "dtype": "Float",
                "Process Group Name": "ep",
                "Process Group Ranks": "[0, 1, 2]",
                "In split size": split,
                "Out split size": "[]",
            }
            ev.append(synth.step(f"ProfilerStep#{k + 1}", t, 1000))
            ev += synth.launch("sm90_xmma_gemm_bf16bf16_bf16f32", t + 1, t + 10, 400)
            ev += synth.launch("ncclDevKernel_SendRecv", t + 405, t + 420, 100, stream=20, **args)
        synth.write(d / f"rank{rank}.json", ev, rank=rank)
    return d


def _finding(a) -> AllToAllImbalanceFinding | None:
    assert a.cluster is not None
    return next((f for f in a.cluster.findings if isinstance(f, AllToAllImbalanceFinding)), None)


def test_tokens_routed_to_one_rank_are_found(tmp_path: Path) -> None:
    """Every rank sends its 12,000 B as splits (4, 1, 1): rank 0 receives 3 x 8,000 = 24,000 B,
    ranks 1 and 2 3 x 2,000 = 6,000 B; mean 12,000 B: ratio 2.0, rank 0 the busiest."""
    a = analyze([str(_ranks(tmp_path, dict.fromkeys(range(3), "[4, 1, 1]")))], workers=1)
    f = _finding(a)
    assert f is not None
    assert (f.instances, f.total, f.busiest_rank) == (N, N, 0) and f.median_ratio == pytest.approx(2.0)
    card = {x.id: x for x in a.findings}["communication.all_to_all_imbalance"]
    assert "2.00x" in card.title
    # all ranks start together: no wait, 100 us of transfer per step; the ceiling x (1 - 1/2)
    assert f.transfer_ns == pytest.approx(100_000)
    assert card.saving.high_ns == 50_000


def test_even_routing_is_not_imbalanced(tmp_path: Path) -> None:
    a = analyze([str(_ranks(tmp_path, dict.fromkeys(range(3), "[1, 1, 1]")))], workers=1)
    assert _finding(a) is None
    assert "communication.all_to_all_imbalance" not in {x.id for x in a.findings}
