"""The interval union against a plain loop over the intervals, and a hand example."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.analysis import intervals as iv


def _loop_union(starts: list[int], ends: list[int]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(zip(starts, ends)):
        if out and s <= out[-1][1]:  # touching intervals merge
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def test_hand_example() -> None:
    # [5, 9) and [0, 3) and [3, 4) (touching) and [8, 12) and [20, 20) (empty) -> [0, 4), [5, 12), [20, 20)
    s, e = iv.union(np.array([5, 0, 3, 8, 20]), np.array([9, 3, 4, 12, 20]))
    assert list(zip(s.tolist(), e.tolist())) == [(0, 4), (5, 12), (20, 20)]
    assert iv.union_length(np.array([5, 0, 3, 8]), np.array([9, 3, 4, 12])) == 11


@pytest.mark.parametrize("seed", range(20))
def test_matches_a_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    starts = rng.integers(0, 1000, n)
    ends = starts + rng.integers(0, 30, n)  # ties, empty and touching intervals are common
    s, e = iv.union(starts, ends)
    assert list(zip(s.tolist(), e.tolist())) == _loop_union(starts.tolist(), ends.tolist())
    order = np.argsort(starts, kind="stable")  # the sorted path gives the same
    s2, e2 = iv.union(starts[order], ends[order])
    assert np.array_equal(s, s2) and np.array_equal(e, e2)


def test_host_time_per_step_by_hand() -> None:
    from stepscope.analysis.steps.breakdown import _host_time_per_step

    # ranges [0,10) [5,15) [20,20) (empty) [30,40); steps [0,12) [12,35) [50,60) [8,8) (empty)
    s, e = np.array([0, 5, 20, 30]), np.array([10, 15, 20, 40])
    busy, count = _host_time_per_step(s, e, np.array([0, 12, 50, 8]), np.array([12, 35, 60, 8]))
    assert busy.tolist() == [12, 3 + 5, 0, 0]
    assert count.tolist() == [2, 2, 0, 0]
