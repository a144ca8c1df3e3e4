"""stepscope.frame: each table of an analysis as pandas, polars and Arrow, against the analysis's
own records (the frames are a conversion: every value must come through unchanged)."""

from __future__ import annotations

from pathlib import Path

import pytest

import stepscope
from stepscope.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def a() -> stepscope.Analysis:
    return stepscope.analyze(str(ROOT / "examples/traces/a100_nccl_rank0.json.gz"), workers=1)


def test_steps_frame_holds_each_step(a: stepscope.Analysis) -> None:
    df = stepscope.frame(a, "steps")
    steps = a.ranks[0].steps
    assert list(df["step"]) == [s.name for s in steps]
    assert list(df["step_time_ns"]) == [s.step_time_ns for s in steps]
    # the partition holds row by row
    parts = df["compute_ns"] + df["exposed_comm_ns"] + df["exposed_memcpy_ns"] + df["idle_ns"]
    assert (parts == df["step_time_ns"]).all()


def test_polars_and_arrow_give_the_same_rows(a: stepscope.Analysis) -> None:
    pl_df = stepscope.frame(a, "kernels", lib="polars")
    arrow = stepscope.frame(a, "kernels", lib="arrow")
    assert pl_df.height == arrow.num_rows == len(a.ranks[0].top_kernels)
    assert pl_df["total_ns"].to_list() == [k.total_ns for k in a.ranks[0].top_kernels]
    assert arrow.column("name").to_pylist()[0] == a.ranks[0].top_kernels[0].name


def test_findings_ranks_and_categories(a: stepscope.Analysis) -> None:
    f = stepscope.frame(a, "findings")
    assert list(f["id"]) == [x.id for x in a.findings]
    assert list(f["saving_mid_ns"]) == [x.saving.mid_ns for x in a.findings]
    r = stepscope.frame(a, "ranks")
    assert list(r["rank"]) == [0] and r["device"][0] == a.ranks[0].device
    c = stepscope.frame(a, "categories")
    s0 = a.ranks[0].steps[0]
    mine = c[c["step"] == s0.name]
    assert dict(zip(mine["category"], mine["time_ns"])) == s0.by_category_ns


def test_unknown_table_or_library_says_what_exists(a: stepscope.Analysis) -> None:
    with pytest.raises(ConfigError, match="one of: steps"):
        stepscope.frame(a, "nope")
    with pytest.raises(ConfigError, match="lib="):
        stepscope.frame(a, "steps", lib="excel")  # type: ignore[arg-type]
