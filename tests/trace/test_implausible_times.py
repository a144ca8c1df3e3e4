"""Event times no real trace holds (a duration of centuries, a start past 2116, a negative
duration in a damaged Parquet cache) are skipped and counted like other unusable events: they used
to overflow int64 sums in the analyses (numpy overflow warnings, a traceback, nonsense totals)."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from stepscope.cli import main
from stepscope.errors import TraceFormatError
from stepscope.trace.columns import MAX_DUR_NS, MAX_TS_NS
from stepscope.trace.loader import ReadJob, read_one

TRACE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "a100_nccl_rank0.json.gz"


def _doc() -> dict[str, Any]:
    with gzip.open(TRACE) as f:
        return dict(json.loads(f.read()))


def test_the_bounds() -> None:
    assert MAX_TS_NS == 2**62 and MAX_DUR_NS == 2**50  # 2116 in epoch ns; 13 days


def test_a_kernel_of_centuries_is_skipped_not_summed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc()
    kernels = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel" and e.get("ph") == "X"]
    kernels[50]["dur"] = 9.2e15  # us: 292 years, fits int64 in ns but no trace has it
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    clean = read_one(ReadJob(str(TRACE))).table.num_rows
    fr = read_one(ReadJob(str(path)))
    assert fr.table.num_rows == clean - 1 and fr.skipped_events == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # an int64 overflow in numpy is a RuntimeWarning
        assert main(["analyze", str(path), "--json", str(tmp_path / "r.json")]) == 0
    captured = capsys.readouterr()
    assert "skipped 1 unusable event" in captured.out + captured.err


def test_a_damaged_parquet_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pq"
    assert main(["convert", str(TRACE), "-o", str(out)]) == 0
    path = next(out.glob("*.parquet"))
    table = pq.read_table(path)
    n = table.num_rows
    dur = table["dur_ns"].to_pylist()
    dur[10], dur[20] = -5_404_319_552_844_543_641, 3_530_822_107_865_728_100  # bit flips seen by the fuzzer
    ts = table["ts_ns"].to_pylist()
    ts[30] = MAX_TS_NS + 1
    table = table.set_column(
        table.schema.get_field_index("dur_ns"),
        pa.field("dur_ns", pa.int64(), nullable=False),
        pa.array(dur, pa.int64()),
    )
    table = table.set_column(
        table.schema.get_field_index("ts_ns"), pa.field("ts_ns", pa.int64(), nullable=False), pa.array(ts, pa.int64())
    )
    meta = dict(table.schema.metadata or {})
    meta[b"stepscope.header"] = b"{not json"  # a damaged header loses only the rank and device facts
    pq.write_table(table.replace_schema_metadata(meta), path)
    fr = read_one(ReadJob(str(path)))
    assert fr.table.num_rows == n - 3 and fr.skipped_events == 3 and fr.header == {}
    assert int(pc.min(fr.table["dur_ns"]).as_py()) >= 0
    capsys.readouterr()
    assert main(["analyze", str(path), "-q", "--json", str(tmp_path / "r.json")]) == 0


def test_a_library_error_spanning_lines_is_one_line() -> None:
    exc = TraceFormatError(
        "not a readable Parquet file (Couldn't deserialize thrift: Invalid data\nDeserializing page header failed.\n)",
        path="x.parquet",
        fix="re-create it with\n`stepscope convert`",
    )
    assert exc.one_line() == (
        "x.parquet: not a readable Parquet file (Couldn't deserialize thrift: Invalid data Deserializing page header "
        "failed. ) (re-create it with `stepscope convert`)"
    )
