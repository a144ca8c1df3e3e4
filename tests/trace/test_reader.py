"""Reading: exact ns, chunked decode, truncation recovery, bad input, ranks, Parquet."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

import stepscope
from stepscope.cli import main
from stepscope.notices import Notice
from stepscope.trace.kineto import read_kineto
from stepscope.trace.numparse import raw_lines_to_ns

from .. import synth


@pytest.fixture(params=["c_scanner", "portable"], autouse=True)
def reader_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every reading test runs on both readers: the C scanner and the msgspec path."""
    from stepscope.trace import kineto

    if request.param == "portable":
        monkeypatch.setattr(kineto, "_fast", None)
    elif kineto._fast is None:
        pytest.skip("C scanner not built")
    return str(request.param)


def test_decimal_microseconds_to_exact_ns() -> None:
    text = b"1712195495519695.8\n3\n0.001\n12.34567\n\n-0.5\n1e3"
    got = raw_lines_to_ns(text, 7).tolist()
    assert got == [1712195495519695800, 3000, 1, 12345, -1, -500, 1_000_000]
    # float64 cannot hold this one exactly: the naive conversion is off
    assert int(round(1712195495519695.8 * 1000)) != 1712195495519695800


def _many_events(n: int) -> list[dict]:
    ev = [synth.step("ProfilerStep#1", 0, n * 10 + 100)]
    for i in range(n):
        ev += synth.launch(f"k{i % 7}", 5 + i * 10, 10 + i * 10, 5, **{"grid": [1, 2, 3], "note": "}, {"})
    return ev


@pytest.mark.parametrize("block", [256, 4096, 1 << 20])
def test_chunked_decode_matches_whole(tmp_path: Path, block: int) -> None:
    ev = _many_events(300)
    p = synth.write(tmp_path / "t.json", ev)
    fr = read_kineto(p, block=block)
    assert fr.table.num_rows == len(ev)
    assert not fr.truncated
    assert fr.header["traceName"] == str(p)  # the trailer after the event list is kept
    ts = sorted(int(round(e["ts"] * 1000)) for e in ev)
    assert sorted(fr.table["ts_ns"].to_pylist()) == ts


@pytest.mark.parametrize("gz", [False, True])
def test_truncated_file_recovers_complete_events(tmp_path: Path, gz: bool) -> None:
    ev = _many_events(200)
    full = synth.write(tmp_path / "full.json", ev)
    text = full.read_bytes()
    cut = len(text) * 2 // 3
    # expected: events that end before the cut, counted with the stdlib on the prefix
    prefix = text[:cut].decode()
    body = prefix[prefix.index('"traceEvents": [') + len('"traceEvents": [') :]
    expected, pos, dec = 0, 0, json.JSONDecoder()
    while True:  # stdlib raw_decode, one event at a time, until the cut
        while pos < len(body) and body[pos] in " \n,":
            pos += 1
        try:
            _, pos = dec.raw_decode(body, pos)
        except json.JSONDecodeError:
            break
        expected += 1
    assert 0 < expected < len(ev)
    p = tmp_path / ("cut.json.gz" if gz else "cut.json")
    if gz:
        p.write_bytes(gzip.compress(text)[: len(gzip.compress(text)) * 2 // 3])
    else:
        p.write_bytes(text[:cut])
    fr = read_kineto(p, block=4096)
    assert fr.truncated
    if gz:
        assert 0 < fr.table.num_rows < len(ev)
    else:
        assert fr.table.num_rows == expected
    t = stepscope.load(p)
    assert any("truncated" in w and f"recovered {fr.table.num_rows}" in w for w in t.warnings)


@pytest.mark.parametrize(
    "content, msg",
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b"hello world", "not JSON"),
        (b"SQLite format 3\x00" + bytes(100), "not a readable SQLite database"),  # sniffed: read as an Nsight export
        (b'{"foo": 1}', "no 'traceEvents'"),
        (b"\x1f\x8b\x08\x00garbage", "gzip"),
        (b'{"traceEvents": []}', "no events to analyze (the event list is empty)"),  # not an empty report, exit 0
        (
            b'{"traceEvents": [{"ph": "X", "name": "k", "ts": "soon", "dur": 1}]}',
            "none of its 1 entries is a usable trace event",
        ),
    ],
)
def test_bad_input_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, msg: str
) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    assert main(["analyze", str(p), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(p) in err and msg in err


def test_missing_path_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "/nonexistent/trace.json", "-q"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_ranks_from_header_filename_and_order(tmp_path: Path) -> None:
    d = tmp_path / "run"
    d.mkdir()
    ev = synth.basic_events()
    synth.write(d / "a.json", ev, rank=5)
    synth.write(d / "worker_rank-3.json", ev, rank=None)
    synth.write(d / "trace_r7.json.gz", ev, rank=None, gz=True)
    synth.write(d / "zzz.json", ev, rank=None)
    t = stepscope.load(d, workers=2)
    got = {Path(r.path).name: (r.rank, r.rank_source) for r in t.ranks}
    assert got["a.json"] == (5, "distributedInfo")
    assert got["worker_rank-3.json"] == (3, "filename")
    assert got["trace_r7.json.gz"] == (7, "filename")
    assert got["zzz.json"] == (0, "order")
    assert any("zzz.json" in w and "by file order" in w for w in t.warnings)
    assert sorted(set(t.events["rank"].to_pylist())) == [0, 3, 5, 7]


def test_python_functions_skipped_unless_asked(tmp_path: Path) -> None:
    ev = synth.basic_events() + [synth.cpu("train.py(10): step", 0, 5, cat="python_function")]
    p = synth.write(tmp_path / "t.json", ev)
    kinds = lambda t: set(t.events["kind"].cast("string").to_pylist())  # noqa: E731
    assert "python_function" not in kinds(stepscope.load(p))
    assert "python_function" in kinds(stepscope.load(p, include_python=True))


def test_parquet_convert_roundtrip_and_cache(tmp_path: Path) -> None:
    p = synth.write(tmp_path / "rank-1.json", synth.basic_events(), rank=1)
    out = tmp_path / "pq"
    assert main(["convert", str(p), "-o", str(out)]) == 0
    pq_file = out / "rank-1.parquet"
    a = stepscope.load(p)
    b = stepscope.load(pq_file)
    assert b.events.equals(a.events)
    assert b.ranks[0].rank == 1 and b.ranks[0].device_name == "NVIDIA H100 80GB HBM3"
    cache = tmp_path / "cache"
    c1 = stepscope.load(p, cache_dir=str(cache))
    assert len(list(cache.glob("*.parquet"))) == 1
    c2 = stepscope.load(p, cache_dir=str(cache))
    assert c2.events.equals(c1.events) and c2.events.equals(a.events)


def test_old_schema_string_tids_and_operator_category(tmp_path: Path) -> None:
    # torch 1.9 layout: integer us, "Operator"/"Kernel"/"Runtime" categories, "external id"
    ev = [
        {
            "ph": "X",
            "cat": "Operator",
            "name": "ProfilerStep#5",
            "pid": 9,
            "tid": "9",
            "ts": 1000,
            "dur": 500,
            "args": {},
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaLaunchKernel",
            "pid": 9,
            "tid": "9",
            "ts": 1010,
            "dur": 5,
            "args": {"correlation": 3, "external id": 2},
        },
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "volta_sgemm_128x64_nn",
            "pid": 0,
            "tid": "stream 7",
            "ts": 1100,
            "dur": 40,
            "args": {"device": 0, "stream": 7, "correlation": 3, "external id": 2},
        },
    ]
    p = synth.write(tmp_path / "old.json", ev)
    t = stepscope.load(p)
    k = t.events.filter(pc.equal(t.events["kind"].cast("string"), "kernel"))
    assert k["stream"].to_pylist() == [7] and k["external_id"].to_pylist() == [2]
    from stepscope.analysis.api import analyze

    (s,) = analyze(t).ranks[0].steps
    assert s.compute_ns == 40_000 and s.by_category_ns == {"gemm": 40_000}


def test_events_usable_as_polars(tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    t = stepscope.load(synth.write(tmp_path / "t.json", synth.basic_events()))
    df = t.to_polars()
    assert isinstance(df, pl.DataFrame) and df.height == t.num_events
    assert np.issubdtype(df["ts_ns"].to_numpy().dtype, np.integer)


def test_collective_side_args_survive_parquet(tmp_path: Path) -> None:
    """Process-group ranks and split sizes travel beside the table, through Parquet too."""
    from stepscope.trace.kineto import read_kineto
    from stepscope.trace.parquet import read_parquet, write_parquet

    src = Path(__file__).resolve().parents[2] / "examples" / "traces" / "a100_nccl_rank0.json.gz"
    fr = read_kineto(src)
    assert fr.comm_args is not None and fr.comm_args.num_rows > 0
    # independently: the file's events that record a collective, counted with the json module
    with gzip.open(src) as f:
        raw = [e for e in json.load(f)["traceEvents"] if "Collective name" in (e.get("args") or {})]
    assert fr.comm_args["collective"].null_count == 0 and fr.comm_args.num_rows == len(raw)
    rows = fr.comm_args["row"].to_pylist()
    assert [fr.table["name"][r].as_py() for r in rows] == [e["name"] for e in raw]  # each row points at its event
    assert "[0, 1]" in set(fr.comm_args["pg_ranks"].to_pylist())  # rank 0 of 2 in the default group
    out = tmp_path / "t.parquet"
    write_parquet(fr, out)
    back = read_parquet(out)
    assert back.comm_args is not None and back.comm_args.to_pylist() == fr.comm_args.to_pylist()


def test_events_without_usable_time_are_dropped_counted_and_side_rows_renumbered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Untimed events and complete events without a usable duration are dropped and counted (kept
    at ts -1, one kernel whose ts is not a number would stretch the whole-trace window to decades,
    1.7e9 ms here); the collective after them keeps its side args."""
    t0 = 1_700_000_000_000  # us
    k = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "args": {"device": 0, "stream": 7}}
    events = [
        {**k, "name": "gemm", "ts": t0, "dur": 300},
        {**k, "name": "bad_ts", "ts": "abc", "dur": 300},
        {**k, "name": "no_ts", "dur": 300},
        {**k, "name": "bad_dur", "ts": t0 + 100, "dur": "x"},
        {**k, "name": "negative_dur", "ts": t0 + 100, "dur": -50},
        {
            **k,
            "name": "ncclDevKernel_AllReduce",
            "ts": t0 + 400,
            "dur": 300,
            "args": {"device": 0, "stream": 7, "Collective name": "allreduce", "Process Group Ranks": "[0, 1]"},
        },
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    fr = read_kineto(path)
    assert fr.table["name"].to_pylist() == ["gemm", "ncclDevKernel_AllReduce"]
    assert fr.skipped_events == 4
    assert fr.comm_args is not None and fr.comm_args["row"].to_pylist() == [1]  # row 5 of the file, row 1 of the table
    assert fr.comm_args["pg_ranks"].to_pylist() == ["[0, 1]"]
    assert main(["analyze", str(path), "--json", str(tmp_path / "r.json")]) == 0
    captured = capsys.readouterr()
    assert "skipped 4 unusable events" in captured.out + captured.err
    step = json.loads((tmp_path / "r.json").read_text())["ranks"][0]["steps"][0]
    assert step["step_time_ns"] == 700_000  # the two kernels: t0 .. t0 + 700 us


@pytest.mark.parametrize("block", [256, 4096, 1 << 20])
@pytest.mark.parametrize("cut", [False, True])
def test_a_corrupt_event_costs_only_itself(tmp_path: Path, block: int, cut: bool) -> None:
    """A flipped byte inside one event (its ts not a number) drops and counts that event only, not
    every event of the file (where no cut decodes), in small blocks (the streaming window) and
    large, with the array closed (trailer read) or cut."""
    names = [f"k{i}" for i in range(40)]
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": n,
            "ts": 1000 + 10 * i,
            "dur": 5,
            "pid": 0,
            "tid": 7,
            "args": {"device": 0, "stream": 7, "note": "}, {"},
        }
        for i, n in enumerate(names)
    ]  # a boundary inside a string
    text = json.dumps({"traceEvents": events, "traceName": "mine"}, indent=None)
    bad = text.index('"ts": 1170')  # event k17
    text = text[:bad] + '"ts": 11Q0' + text[bad + len('"ts": 1170') :]
    if cut:
        text = text[: text.index('"name": "k39"')]  # killed while writing the last event
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    fr = read_kineto(path, block=block)
    kept = [n for n in names if n != "k17" and not (cut and n == "k39")]
    assert fr.table["name"].to_pylist() == kept
    assert fr.skipped_events == 1
    assert fr.truncated is cut
    assert (fr.header.get("traceName") == "mine") is not cut


def test_a_directory_skips_json_that_is_not_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run's config.json (or a report written beside the traces) does not fail the whole
    directory: it is named and skipped. Alone, or named as a file, it is an error."""
    run = tmp_path / "run"
    run.mkdir()
    synth.write(run / "rank0.json", synth.basic_events(), rank=0)
    (run / "config.json").write_text('{"hidden_size": 4096}', encoding="utf-8")
    assert main(["analyze", str(run), "-q", "--json", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert [r["rank"] for r in report["ranks"]] == [0]
    assert f"{run / 'config.json'}: not a Chrome trace (no traceEvents near its start); skipped" in report["warnings"]
    (run / "rank0.json").unlink()
    assert main(["analyze", str(run), "-q"]) == 2
    assert "directory holds no trace files" in capsys.readouterr().err
    assert main(["analyze", str(run / "config.json"), "-q"]) == 2
    assert "no 'traceEvents' list found" in capsys.readouterr().err


def test_a_directory_skips_the_critical_path_trace_stepscope_wrote_into_it(tmp_path: Path) -> None:
    """`cluster DIR --critical-path-trace DIR/cp.json` writes a Chrome trace beside the ranks';
    reading DIR again must not take it for one more rank."""
    from stepscope.report.perfetto import perfetto

    run = tmp_path / "run"
    run.mkdir()
    synth.write(run / "rank0.json", synth.basic_events(), rank=0)
    (run / "cp.json").write_text(json.dumps(perfetto((), [], [0, 1])), encoding="utf-8")
    assert main(["analyze", str(run), "-q", "--json", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert [r["rank"] for r in report["ranks"]] == [0]
    assert (
        f"{run / 'cp.json'}: a trace stepscope wrote (--critical-path-trace), not a rank's; skipped"
        in report["warnings"]
    )


def test_the_c_scanner_skips_a_corrupt_event_itself(
    tmp_path: Path, reader_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A corrupt event mid-file is skipped by the C scanner at the next boundary, not by sending
    the whole file to the portable reader (for 520 MB: 3.1 s instead of 28.9 s)."""
    if reader_path == "portable":
        pytest.skip("the C scanner's own path")
    from stepscope.trace import kineto

    def no_fallback(*_: object, **__: object) -> None:
        raise AssertionError("fell back to the portable reader")

    monkeypatch.setattr(kineto, "read_portable", no_fallback)
    events = [
        {"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": 1000 + 10 * i, "dur": 5, "pid": 0, "tid": 7}
        for i in range(6)
    ]
    text = json.dumps({"traceEvents": events}).replace('"ts": 1020', '"ts": 10Q0')
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    fr = read_kineto(path)
    assert (
        fr.table["name"].to_pylist() == ["k0", "k1", "k3", "k4", "k5"] and fr.skipped_events == 1 and not fr.truncated
    )


def test_load_keeps_the_files_it_left_out_as_notices(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    synth.write(run / "rank0.json", synth.basic_events(), rank=0)
    (run / "config.json").write_text('{"hidden_size": 4096}', encoding="utf-8")
    trace = stepscope.load(run, workers=1)
    skipped = Notice("not a Chrome trace (no traceEvents near its start); skipped", path=str(run / "config.json"))
    assert trace.notices[0] == skipped


_TOKENS = ["1", "-0", "0.5", "1.5E-3", "2e+7", "01", "1.", ".5", "+1", "-", "1e", "1e+", "1.5e", "12x", "0x10", "1..2"]
_TOKENS += ["--1", "1e5.2", "true", "false", "null", "nul", "truex", "-a"]


@pytest.mark.parametrize("where", ["top", "args"])
@pytest.mark.parametrize("block", [1 << 20, 97])
def test_scalar_tokens_follow_json(where: str, block: int, tmp_path: Path) -> None:
    """An event holding a scalar token is kept exactly when Python's own JSON parser accepts the
    token (the C scanner checks numbers in one pass; with a 97-byte block tokens are also cut by
    block ends). Expected values from ``json.loads``, not from either reader."""

    def valid(tok: str) -> bool:
        try:
            json.loads(tok)
        except ValueError:
            return False
        return True

    for tok in _TOKENS:
        val = f'"x": {tok}' if where == "top" else f'"args": {{"Ev Idx": {tok}, "External id": 7}}'
        events = [
            '{"ph": "X", "cat": "kernel", "name": "k0", "pid": 0, "tid": 7, "ts": 10, "dur": 5}',
            '{"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 20, "dur": 5, ' + val + "}",
            '{"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 30, "dur": 5}',
        ]
        path = tmp_path / "t.json"
        path.write_text('{"traceEvents": [\n' + ",\n".join(events) + "\n]}", encoding="utf-8")
        fr = read_kineto(path, block=block)
        names = fr.table["name"].to_pylist()
        assert names == (["k0", "k1", "k2"] if valid(tok) else ["k0", "k2"]), tok
        assert fr.skipped_events == (0 if valid(tok) else 1), tok
