"""Grouped-GEMM tile padding (work.tile_padding, ``moe_tile_rows``): the rows Megablox computes per
row of tokens, by hand and against an independent count of the tiles its group metadata visits."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.planner.job import Job, make_job
from stepscope.planner.search import hardware
from stepscope.planner.work import gemm_seconds_at_peak, tile_padding

from .test_planner_moe_permutation import TINY_MOE as PERMUTATION_MOE

# 256 experts, top-8, as the seed model routes (test_planner_moe_permutation's tiny model otherwise)
TINY_MOE = {**PERMUTATION_MOE, "num_local_experts": 256, "num_experts_per_tok": 8}


def job(device: str = "tpu-v7x", **kw: object) -> Job:
    return make_job(from_config_dict(TINY_MOE), hardware(device), 64, 8, 512, 4096, **kw)  # type: ignore[arg-type]


def _pad(j: Job, m_expert: float, local: float) -> float:
    return float(tile_padding(j, np.array([m_expert]), np.array([local]))[0])


def test_padding_by_hand() -> None:
    # a v7x chip's 2560 rows per expert are 1280 on each TensorCore; 255 of 256 experts pay 512 rows
    assert _pad(job(moe_tile_rows=512), 2560.0, 256.0) == pytest.approx(1 + 512 * 255 / 256 / 1280)
    # a TPU v5p chip runs its two TensorCores as one device (megacore): 2560 rows on one kernel
    assert _pad(job("tpu-v5p", moe_tile_rows=512), 2560.0, 256.0) == pytest.approx(1 + 512 * 255 / 256 / 2560)
    # one local expert starts at row 0: no tile is visited twice
    assert _pad(job(moe_tile_rows=512), 2560.0, 1.0) == pytest.approx(1.0)
    # an H100 is one device: 128-row tiles over 1024 rows per expert, 32 experts
    assert _pad(job("h100", moe_tile_rows=128), 1024.0, 32.0) == pytest.approx(1 + 128 * 31 / 32 / 1024)
    assert _pad(job(moe_tile_rows=0), 2560.0, 256.0) == 1.0


def _megablox_rows(sizes: np.ndarray, tm: int) -> int:
    """Rows computed for groups of ``sizes`` laid end to end, counted as Megablox's
    make_group_metadata does: each non-empty group spans the tiles from its first row's tile to its
    last row's, and a tile two groups share is computed once for each."""
    ends = np.cumsum(sizes)
    starts = ends - sizes
    full = sizes > 0
    tiles = (ends[full] + tm - 1) // tm - starts[full] // tm
    return int(tiles.sum()) * tm


def test_padding_matches_a_count_of_megablox_tiles() -> None:
    # 256 experts, top-8 routing of 40,960 tokens (one TensorCore's micro-batch), drawn at random
    rng = np.random.default_rng(7)
    tokens, experts, tm = 40960 * 8, 256, 512
    ratios = [_megablox_rows(rng.multinomial(tokens, np.full(experts, 1 / experts)), tm) / tokens for _ in range(50)]
    expected = _pad(job(moe_tile_rows=tm), 2 * tokens / experts, float(experts))
    assert float(np.mean(ratios)) == pytest.approx(expected, rel=0.01)


def test_padding_slows_the_expert_gemms_by_at_most_its_rows() -> None:
    j0, j1 = job(moe_tile_rows=0), job(moe_tile_rows=512)
    one = np.array([1.0])
    m_tok = np.array([4096.0 * 4])
    args = (1e15, 1e6, m_tok, one, one, one)
    base, _, _ = gemm_seconds_at_peak(j0, *args)
    padded, _, _ = gemm_seconds_at_peak(j1, *args)
    experts0, _, _ = gemm_seconds_at_peak(job(moe_tile_rows=0, expert_scale=1e12), *args)
    pad = _pad(j1, 4096.0 * 4 * 8 / 256, 256.0)
    expert_s = float(base[0] - experts0[0])
    # taller padded GEMMs run at least as efficiently, so the extra time is at most (pad - 1) x
    assert 0 < float(padded[0] - base[0]) <= (pad - 1) * expert_s * (1 + 1e-9)


def test_maxtext_preset_pads_by_its_default_tile() -> None:
    from stepscope.planner.plans import framework_of

    assert framework_of("maxtext").settings["moe_tile_rows"] == 512


def _expert_s(j: Job, m_tok: float, tp: float, etp: float, ep: float) -> float:
    """The experts' share of gemm_seconds_at_peak: the total less the total with experts made free."""
    args = (1e15, 1e6, np.array([m_tok]), np.array([tp]), np.array([ep]), np.array([etp]))
    free = job("h100", expert_scale=1e12)
    return float(gemm_seconds_at_peak(j, *args)[0][0] - gemm_seconds_at_peak(free, *args)[0][0])


def test_expert_rows_under_tensor_parallelism_without_expert_tp() -> None:
    # TP 2 with expert TP 1: each tensor rank dispatches its half of the micro-batch (sequence
    # parallelism), so a rank's expert GEMMs are those of TP 1 with half the tokens
    j = job("h100")
    assert _expert_s(j, 8192.0, 2.0, 1.0, 8.0) == pytest.approx(_expert_s(j, 4096.0, 1.0, 1.0, 8.0), rel=1e-12)
    # expert TP 2 gathers both halves and splits the experts' width instead: not the same GEMMs
    assert _expert_s(j, 8192.0, 2.0, 2.0, 8.0) != pytest.approx(_expert_s(j, 4096.0, 1.0, 1.0, 8.0), rel=1e-3)
