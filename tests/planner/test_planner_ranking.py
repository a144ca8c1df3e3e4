"""The search ranks on three results and evaluates only the chosen rows in full: the same rows and
values as evaluating everything and sorting (the reference it replaced)."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.planner.cost import CHUNK, evaluate
from stepscope.planner.job import make_job
from stepscope.planner.search import hardware, model, search, smallest, space


@pytest.mark.parametrize("k", [0, 1, 3, 5, 9, 20])
def test_smallest_matches_a_stable_sort_with_ties(k: int) -> None:
    key = np.array([3.0, 1.0, np.inf, 1.0, 2.0, 1.0, np.inf, 0.5, 2.0])
    # by hand: 0.5 (7), the three 1.0s in index order (1, 3, 5), the 2.0s (4, 8), 3.0 (0), the infs (2, 6)
    expected = [7, 1, 3, 5, 4, 8, 0, 2, 6][:k]
    assert smallest(key, k).tolist() == expected


def test_smallest_with_nans_orders_them_last() -> None:
    key = np.array([np.nan, 2.0, np.nan, 1.0])
    assert smallest(key, 3).tolist() == [3, 1, 0]  # by hand: 1.0, 2.0, then the first NaN
    assert smallest(key, 1).tolist() == [3]


def test_smallest_on_many_ties() -> None:
    key = np.random.default_rng(0).integers(0, 4, 5000).astype(float)
    for k in (1, 17, 1250, 1251, 4999):
        assert smallest(key, k).tolist() == np.argsort(key, kind="stable")[:k].tolist()


@pytest.mark.parametrize("name,devices,batch", [("llama3-70b", 256, 512), ("mixtral-8x7b", 64, 256)])
def test_search_equals_full_evaluation_sorted(name: str, devices: int, batch: int) -> None:
    job = make_job(model(name), hardware("h100"), devices, 8, batch, 4096)
    s = space(job)
    assert s["tp"].size > CHUNK  # the blocked path of evaluate is used
    full = evaluate(job, s)
    # the fastest that fit, those inside the memory margin (5% of the device) after all the others
    tight = full["total_gb"] * 1e9 > job.capacity_bytes * 0.95
    order = np.lexsort((full["step_s"], tight, ~full["fits"]))[:10]
    plan = search(job, top=10)
    for k, v in s.items():
        assert np.array_equal(plan.strategies[k], v[order]), k
    for k, v in full.items():
        assert np.array_equal(plan.results[k], v[order]), k


def test_evaluate_keys_returns_only_those() -> None:
    job = make_job(model("llama3-8b"), hardware("h100"), 64, 8, 256, 4096)
    s = space(job)
    full = evaluate(job, s)
    some = evaluate(job, s, keys=("step_s", "fits"))
    assert set(some) == {"step_s", "fits"}
    assert np.array_equal(some["step_s"], full["step_s"]) and np.array_equal(some["fits"], full["fits"])
