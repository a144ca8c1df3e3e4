"""TPUs issue vector and matrix work in the same VLIW bundles: the planner takes GEMMs at their
measured ceiling for all of the compute time there, and at 0.75 of it on GPUs."""

from __future__ import annotations

import pytest

from stepscope.catalog.hardware import load_catalog
from stepscope.planner.job import make_job
from stepscope.planner.rates import efficiencies
from stepscope.planner.search import hardware, model


def test_tpus_take_their_whole_matmul_ceiling_gpus_three_quarters() -> None:
    tpu = make_job(model("llama3-8b"), hardware("tpu-v5e"), 256, 256, 256, 2048)
    gemm, attn, factor = efficiencies(tpu)
    assert (
        gemm == pytest.approx(0.923) and attn == pytest.approx(0.6 * 0.923) and factor == 1.0
    )  # v5e's measured ceiling
    gpu = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 2048)
    gemm, attn, _ = efficiencies(gpu)
    assert gemm == pytest.approx(0.75 * 0.803) and attn == pytest.approx(0.6 * 0.75 * 0.803)
    # an unmeasured TPU: the 0.7 prior, whole
    assert efficiencies(make_job(model("llama3-8b"), hardware("tpu-v5p"), 64, 64, 64, 2048))[0] == pytest.approx(0.7)


def test_every_tpu_in_the_catalog_and_its_per_core_variant_say_so() -> None:
    devices = load_catalog()
    tpus = [d for d in devices if d.name.startswith("TPU")]
    assert tpus and all(d.elementwise_overlaps_matmul for d in tpus)  # chips and their -core entries
    assert not any(d.elementwise_overlaps_matmul for d in devices if not d.name.startswith("TPU"))
