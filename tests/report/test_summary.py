"""RunSummary: the aggregates renderers show, checked against sums done by hand."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

from stepscope.analysis.steps.results import CpuStep, IdleCauses, StepBreakdown
from stepscope.analysis.summary import summarize


def _step(**values: Any) -> StepBreakdown:
    fields = {f.name: 0 for f in dataclasses.fields(StepBreakdown)}
    causes = {f.name: 0 for f in dataclasses.fields(IdleCauses)}
    cpu = {f.name: 0 for f in dataclasses.fields(CpuStep)}
    causes.update(values.pop("causes", {}))
    cpu.update(dataloader_ns=values.pop("loader_ns", 0))
    fields.update(
        name="s",
        by_category_ns={},
        kernel_time_by_category_ns={},
        collectives=(),
        idle_causes=IdleCauses(**causes),
        cpu=CpuStep(**cpu),
        window_source="device",
    )
    fields.update(values)
    return StepBreakdown(**fields)


def test_totals_means_categories_and_upper_medians() -> None:
    a = _step(
        step_time_ns=100,
        compute_ns=60,
        comm_ns=30,
        overlapped_comm_ns=10,
        exposed_comm_ns=20,
        exposed_memcpy_ns=10,
        idle_ns=10,
        cpu_step_ns=90,
        loader_ns=5,
        causes={"host_bound_ns": 4, "wait_ns": 3, "other_ns": 3},
        by_category_ns={"gemm": 40, "comm": 20},
    )
    b = _step(
        step_time_ns=300,
        compute_ns=100,
        comm_ns=150,
        overlapped_comm_ns=50,
        exposed_comm_ns=100,
        exposed_memcpy_ns=50,
        idle_ns=50,
        cpu_step_ns=250,
        loader_ns=15,
        causes={"host_bound_ns": 20, "wait_ns": 10, "other_ns": 20},
        by_category_ns={"comm": 40, "gemm": 20, "elementwise": 70},
    )
    flops = [SimpleNamespace(mfu=m, hfu=h) for m, h in ((0.3, 0.5), (None, None), (0.1, 0.4), (0.2, None))]
    run = SimpleNamespace(
        ranks=(
            SimpleNamespace(rank=3, steps=(a, b), roofline=SimpleNamespace(steps=flops)),
            SimpleNamespace(rank=5, steps=(), roofline=None),
        )
    )
    s = summarize(run)
    r = s.of(3)
    assert (r.rank, r.steps) == (3, 2)
    assert (r.total_step_time_ns, r.total_compute_ns, r.total_comm_ns, r.total_overlapped_comm_ns) == (
        400,
        160,
        180,
        60,
    )
    assert (r.total_exposed_comm_ns, r.total_exposed_memcpy_ns, r.total_idle_ns) == (120, 60, 60)
    assert (r.total_dataloader_ns, r.total_cpu_step_ns) == (20, 340)
    assert (r.total_host_bound_idle_ns, r.total_sync_wait_idle_ns, r.total_other_idle_ns) == (24, 13, 23)
    assert (r.mean_step_time_ns, r.mean_compute_ns, r.mean_exposed_comm_ns) == (200.0, 80.0, 60.0)
    assert (r.mean_exposed_memcpy_ns, r.mean_idle_ns, r.mean_dataloader_ns) == (30.0, 30.0, 10.0)
    # elementwise 70 first; gemm and comm tie at 60: in the order they first appear
    assert r.device_time_by_category_ns == (("elementwise", 70), ("gemm", 60), ("comm", 60))
    # MFU of 3 steps sorted 0.1, 0.2, 0.3: element 3 // 2 = 1; HFU 0.4, 0.5: element 1 (upper median)
    assert (r.median_mfu_ratio, r.median_hfu_ratio) == (0.2, 0.5)
    empty = s.of(5)
    assert (empty.steps, empty.total_step_time_ns, empty.mean_step_time_ns) == (0, 0, 0.0)
    assert (empty.median_mfu_ratio, empty.median_hfu_ratio, empty.device_time_by_category_ns) == (None, None, ())
    assert [x.rank for x in s.ranks] == [3, 5]
