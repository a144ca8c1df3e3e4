"""The top-level Python API: what README's example uses."""

from __future__ import annotations

from pathlib import Path

import pytest

import stepscope

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "traces" / "a100_nccl_rank0.json.gz"


def test_every_exported_name_resolves() -> None:
    for name in stepscope.__all__:
        assert getattr(stepscope, name) is not None
    with pytest.raises(AttributeError):
        stepscope.no_such_name  # noqa: B018


def test_analyze_from_the_top_matches_a_loaded_trace() -> None:
    from_files = stepscope.analyze(str(EXAMPLE), stepscope.AnalyzeConfig(top_k=5), workers=1)
    from_trace = stepscope.analyze(stepscope.load(str(EXAMPLE)), stepscope.AnalyzeConfig(top_k=5))
    assert isinstance(from_files, stepscope.Analysis)
    assert [s.step_time_ns for s in from_files.ranks[0].steps] == [s.step_time_ns for s in from_trace.ranks[0].steps]
    s0 = from_files.ranks[0].steps[0]
    assert s0.compute_ns + s0.exposed_comm_ns + s0.exposed_memcpy_ns + s0.idle_ns == s0.step_time_ns


def test_plan_from_the_top_agrees_with_evaluating_its_best_row() -> None:
    job = dict(model="llama3-8b", hardware="h100", devices=8, global_batch=64, seq_len=8192)
    found = stepscope.plan(**job, top=3)
    assert isinstance(found, stepscope.PlanResult) and len(found.records) == 3
    steps = [r["step_time_s"] for r in found.records]
    assert steps == sorted(steps) and all(r["fits"] for r in found.records)
    best = found.records[0]["strategy"]
    # every field, as the row states it (policies and the TP overlap mechanism by name)
    text = ",".join(f"{k}={v}" for k, v in best.items() if k != "sched")
    # the search ran under the device's default framework, which the row names
    one = stepscope.plan(**job, evaluate=text, framework=found.records[0]["framework"])
    assert one.records[0]["step_time_s"] == pytest.approx(found.records[0]["step_time_s"])


def test_plan_refuses_an_unknown_setting_with_the_fix() -> None:
    with pytest.raises(stepscope.ConfigError, match="loss"):
        stepscope.plan(
            model="llama3-8b", hardware="h100", devices=8, global_batch=64, seq_len=8192, settings={"loss": "chunked"}
        )
