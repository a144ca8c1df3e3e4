"""Link ids are int32 in the event table; a file whose ids do not fit is renumbered in order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

import stepscope
from stepscope.trace import schema
from stepscope.trace.columns import narrow_ids

from .. import synth


def _table(ids: list[int]) -> pa.Table:
    n = len(ids)
    cols = {f.name: pa.nulls(n, f.type) if f.nullable else pa.array(np.full(n, -1), f.type) for f in schema.READ_SCHEMA}
    cols["correlation"] = pa.array(ids, pa.int64())
    return pa.Table.from_pydict(cols, schema=schema.READ_SCHEMA)


def test_ids_that_fit_are_cast() -> None:
    t = narrow_ids(_table([5, -1, 2_000_000_000, 5]))
    assert t.schema.remove_metadata() == schema.EVENT_SCHEMA.remove_metadata()
    assert t["correlation"].to_pylist() == [5, -1, 2_000_000_000, 5]


def test_ids_that_do_not_fit_are_renumbered_in_order() -> None:
    # distinct ids >= 0 in order: 5, 7, 3e9 -> 0, 1, 2; -1 stays -1
    t = narrow_ids(_table([5, -1, 3_000_000_000, 5, 7]))
    assert t["correlation"].type == pa.int32()
    assert t["correlation"].to_pylist() == [0, -1, 2, 0, 1]


def test_a_launch_with_a_uint32_correlation_still_finds_its_kernel(tmp_path: Path) -> None:
    """CUPTI correlation ids are unsigned 32-bit: past 2^31 the runtime call and its kernel keep
    one id, so the kernel's launch delay is still measured (kernel at 150 us, launch at 100 us)."""
    events = [synth.step("ProfilerStep#1", 90, 200)]
    for e in synth.launch("gemm_kernel", 100, 150, 30):
        e["args"]["correlation"] = 4_000_000_000
        events.append(e)
    events += synth.launch("relu_kernel", 120, 185, 5)
    res = stepscope.analyze(synth.write(tmp_path / "t.json", events))
    launch = res.ranks[0].launch
    assert launch.kernels == 2 and launch.matched == 2
    # delays 50 us (gemm) and 65 us (relu): nearest-rank p50 of two is the smaller
    assert launch.delay_p50_ns == 50_000
