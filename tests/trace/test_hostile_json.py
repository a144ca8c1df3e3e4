"""Hostile Kineto JSON: nesting, compression bombs and framing, oversized events, keys that look
like ``traceEvents``. Each gives a result (with a warning where something was left out) or one
error line, never a traceback or an unbounded allocation; both readers give the same table."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest

from stepscope.cli import main
from stepscope.trace import kineto
from stepscope.trace.columns import FileRead
from stepscope.trace.jsontext import max_depth
from stepscope.trace.kineto import read_kineto
from stepscope.trace.limits import MAX_EVENT_BYTES, MAX_INFLATED_ENV, MAX_JSON_DEPTH, MAX_NAME_BYTES, TRUNCATED_MARK

from .. import synth

DEEP = "[" * 5000 + "]" * 5000


def _events() -> list[dict]:
    ev = [synth.step("ProfilerStep#1", 0, 1000), synth.step("ProfilerStep#2", 1000, 1000)]
    ev += synth.launch("gemm", 10, 100, 200) + synth.launch("gemm", 1010, 1100, 200)
    return ev


def _text(ev: list[dict] | None = None, **header: object) -> str:
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}
    doc.update(header)
    doc["traceEvents"] = _events() if ev is None else ev
    return json.dumps(doc)


def _both(p: Path) -> tuple[FileRead, FileRead]:
    """(C scanner, portable reader) reads of ``p``."""
    fast = read_kineto(p, workers=1)
    saved = kineto._fast
    kineto._fast = None
    try:
        portable = read_kineto(p, workers=1)
    finally:
        kineto._fast = saved
    return fast, portable


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    rc = main(args)
    return rc, capsys.readouterr().err.strip().splitlines()


def test_max_depth_counts_brackets_outside_strings() -> None:
    assert max_depth(b'{"a": [[1], {"b": "]]]]"}], "c": "\\"[[["}') == 3
    assert max_depth(b'"no structure"') == 0


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_header_key_nested_too_deep_is_left_out_with_a_warning(tmp_path: Path, where: str) -> None:
    text = _text(distributedInfo={"rank": 3, "world_size": 4})
    if where == "before":
        text = '{"x": ' + DEEP + ", " + text[1:]
    else:
        text = text[:-1] + ', "x": ' + DEEP + "}"
    p = tmp_path / "t.json"
    p.write_text(text)
    for fr in _both(p):
        assert fr.table.num_rows == 6
        assert fr.header["distributedInfo"]["rank"] == 3  # the other keys survive
        assert "'x'" in fr.warnings[0] and str(MAX_JSON_DEPTH) in fr.warnings[0]


@pytest.mark.parametrize("field", ["args", "Input Dims"])
def test_an_event_nested_too_deep_is_dropped_by_both_readers(tmp_path: Path, field: str) -> None:
    ev = _events()
    ev.append(synth.cpu("aten::mm", 20, 5, **{"External id": 7}))
    ok = MAX_JSON_DEPTH - 3  # event (1) + args (2) + the list's own levels: just inside the limit
    value_ok, value_deep = "[" * ok + "]" * ok, DEEP
    text = _text(ev)
    p_ok, p_deep = tmp_path / "ok.json", tmp_path / "deep.json"
    key = '"External id": 7'
    marker = key + (', "Input Dims": ' if field == "Input Dims" else ', "deep": ')
    p_ok.write_text(text.replace(key, marker + value_ok))
    p_deep.write_text(text.replace(key, marker + value_deep))
    for fr in _both(p_ok):
        assert (fr.table.num_rows, fr.skipped_events) == (7, 0)
    fast, portable = _both(p_deep)
    assert (fast.table.num_rows, fast.skipped_events) == (6, 1)
    assert fast.table.equals(portable.table) and portable.skipped_events == 1


def test_traceevents_inside_a_nested_object_or_a_string_is_not_the_event_list(tmp_path: Path) -> None:
    fake = {"ph": "X", "cat": "kernel", "name": "FAKE", "pid": 0, "tid": 7, "ts": 5, "dur": 1}
    text = '{"note": "traceEvents", "meta": {"traceEvents": [' + json.dumps(fake) + "]}, " + _text()[1:]
    p = tmp_path / "t.json"
    p.write_text(text)
    for fr in _both(p):
        assert fr.table.num_rows == 6
        assert "FAKE" not in fr.table["name"].to_pylist()
        assert fr.header["note"] == "traceEvents"


def _bomb(path: Path, inflated_mb: int) -> None:
    """A valid trace whose event array holds ``inflated_mb`` MB of spaces (about 1000:1)."""
    head, tail = _text().rsplit("]", 1)
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [z.compress(head.encode())]
    spaces = b" " * (1 << 20)
    parts += [z.compress(spaces) for _ in range(inflated_mb)]
    parts += [z.compress(("]" + tail).encode()), z.flush()]
    path.write_bytes(b"".join(parts))


def test_a_compression_bomb_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "bomb.json.gz"
    _bomb(p, 100)
    assert p.stat().st_size < 200_000  # 100 MB of spaces
    rc, err = _cli(["analyze", str(p), "--json", str(tmp_path / "o.json"), "-q"], capsys)
    assert rc == 2 and len(err) == 1
    assert err[0].startswith(f"stepscope: error: {p}: inflates more than")


def test_the_inflation_cap_reads_up_to_it_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ev = _events()
    for i in range(2000):
        ev.append(synth.cpu(f"op{i}", 1500 + i * 0.1, 0.05))
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(_text(ev).encode()))
    whole = read_kineto(p)
    monkeypatch.setenv(MAX_INFLATED_ENV, str(60_000 / 2**30))  # 60 kB: cut inside the event list
    cut = read_kineto(p, block=4096)
    assert cut.truncated and "cap" in cut.note
    assert 0 < cut.table.num_rows < whole.table.num_rows


def test_zero_padding_after_the_gzip_member_is_ignored(tmp_path: Path) -> None:
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(_text().encode()) + b"\0" * 5000)
    fr = read_kineto(p)
    assert fr.table.num_rows == 6 and not fr.truncated and not fr.warnings


def test_concatenated_gzip_members_are_all_read(tmp_path: Path) -> None:
    text = _text().encode()
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(text[:100]) + gzip.compress(text[100:]))
    assert read_kineto(p).table.num_rows == 6


@pytest.mark.parametrize("where", [3, "last"])
def test_an_event_longer_than_the_limit_is_dropped_and_counted_by_both_readers(
    tmp_path: Path, where: int | str
) -> None:
    big = {"ph": "X", "cat": "kernel", "name": "a" * (2 * MAX_EVENT_BYTES), "pid": 0, "tid": 7, "ts": 5, "dur": 1}
    ev = _events()
    ev.insert(len(ev) if where == "last" else int(where), big)
    p = tmp_path / "t.json"
    p.write_text(_text(ev, distributedInfo={"rank": 2}))
    reads = [read_kineto(p, block=1 << 20, workers=1, force_portable=portable) for portable in (False, True)]
    for fr in reads:
        assert (fr.table.num_rows, fr.skipped_events, fr.truncated) == (6, 1, False)
        assert fr.header["distributedInfo"]["rank"] == 2
    assert reads[0].table.equals(reads[1].table)


@pytest.mark.skipif(kineto._fast is None, reason="C scanner not built")
def test_a_trailer_longer_than_the_limit_is_cut_with_a_warning(tmp_path: Path) -> None:
    text = _text()[:-1] + ', "junk": "' + "b" * (MAX_EVENT_BYTES + 10) + '"}'
    p = tmp_path / "t.json"
    p.write_text(text)
    fr = read_kineto(p, block=1 << 20, workers=1)
    assert fr.table.num_rows == 6 and "only its start was read" in fr.warnings[0]


def test_a_damaged_last_event_costs_only_itself(tmp_path: Path) -> None:
    text = _text(distributedInfo={"rank": 5, "world_size": 8})
    i = text.rindex('{"ph"')
    j = text.index("}", text.index('"args"', i)) + 1  # end of the last event's args
    p = tmp_path / "t.json"
    p.write_text(text[:i] + '{"ph": "X", @@@' + text[j:])  # the last event is no longer JSON
    for fr in _both(p):
        assert (fr.table.num_rows, fr.skipped_events, fr.truncated) == (5, 1, False)
        assert fr.header["distributedInfo"]["rank"] == 5  # the keys after the list are read


def test_max_inflated_gb_sets_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ev = _events() + [synth.cpu(f"op{i}", 1500 + i * 0.1, 0.05) for i in range(2000)]
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(_text(ev).encode()))
    monkeypatch.setenv(MAX_INFLATED_ENV, "")  # restored after the test: the CLI sets it
    rc, err = _cli(["analyze", str(p), "--max-inflated-gb", str(60_000 / 2**30), "-q", "--json", "-"], capsys)
    assert rc == 0
    assert any("reached the" in line and "cap" in line for line in err)


@pytest.mark.parametrize(
    ("ts", "ns"),
    [('"12.5"', 12_500), ('"1.5E2"', 150_000), ("1e3", 1_000_000), ('"12."', 12_000)]
    + [
        (bad, None)
        for bad in (
            '"0x10"',
            '"0X1A"',
            '"inf"',
            '"nan"',
            '" 12"',
            "1e300",
            '"-0x1p3"',
            "1" * 23,
            '"-' + "9" * 20 + '.5"',
        )
    ],
)
def test_a_timestamp_is_a_json_number_or_unusable(tmp_path: Path, ts: str, ns: int | None) -> None:
    p = tmp_path / "t.json"
    p.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ' + ts + ', "dur": 1}]}'
    )
    for fr in _both(p):
        assert fr.table["ts_ns"].to_pylist() == ([] if ns is None else [ns])
        assert fr.skipped_events == (ns is None)


@pytest.mark.parametrize("rank", [2**31, 2**40, -1, True])
def test_a_rank_beyond_int32_is_not_believed(tmp_path: Path, rank: object, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "t.json"
    p.write_text(_text(distributedInfo={"rank": rank, "world_size": 2**40}))
    q = tmp_path / f"rank{2**40}.json"
    q.write_text(_text())
    for path in (p, q):
        out = tmp_path / "o.json"
        rc, _err = _cli(["analyze", str(path), "-q", "--json", str(out)], capsys)
        assert rc == 0
        assert json.loads(out.read_text())["ranks"][0]["rank"] == 0  # by order


def test_a_name_longer_than_the_limit_is_cut_and_marked(tmp_path: Path) -> None:
    ev = _events()
    long_name = "void gemm<" + "é" * 300_000 + ">"  # two bytes a character: the cut must not split one
    ev += synth.launch(long_name, 1200, 1300, 10)
    p = tmp_path / "t.json"
    p.write_text(_text(ev))
    for fr in _both(p):
        names = [n for n in fr.table["name"].to_pylist() if n.startswith("void gemm<")]
        assert len(names) == 1 and names[0].endswith(TRUNCATED_MARK)
        kept = names[0][: -len(TRUNCATED_MARK)].encode()
        assert MAX_NAME_BYTES - 1 <= len(kept) <= MAX_NAME_BYTES
        assert "1 name longer than 16 KiB cut short" in fr.warnings[0]


def test_a_whole_event_followed_by_damaged_text_is_kept_by_both_readers(tmp_path: Path) -> None:
    text = _text()
    i = text.index("}", text.index('"args"', text.index('"name": "gemm"'))) + 1  # end of the kernel's args
    j = text.index("}", i) + 1  # end of the kernel event
    p = tmp_path / "t.json"
    p.write_text(text[:j] + ' ternal id": 7, "x": 1 }' + text[j:])  # a cut copy of text after a whole event
    fast, portable = _both(p)
    assert (fast.table.num_rows, fast.skipped_events) == (6, 1)
    assert fast.table.equals(portable.table) and portable.skipped_events == 1


def test_parquet_metadata_nested_too_deep_loses_only_itself(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from stepscope.trace.parquet import read_parquet, write_parquet

    fr = read_kineto(_write(tmp_path, _text(distributedInfo={"rank": 3})))
    write_parquet(fr, tmp_path / "t.parquet")
    t = pq.read_table(tmp_path / "t.parquet")
    meta = {k: (DEEP.encode() if k.startswith(b"stepscope") else v) for k, v in t.schema.metadata.items()}
    pq.write_table(t.replace_schema_metadata(meta), tmp_path / "deep.parquet")
    back = read_parquet(tmp_path / "deep.parquet")
    assert back.table.num_rows == 6 and back.header == {}


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "t.json"
    p.write_text(text)
    return p


@pytest.mark.skipif(kineto._fast is None, reason="C scanner not built")
def test_a_bracket_inside_a_damaged_event_does_not_end_the_event_list() -> None:
    """The block ends inside a damaged event whose args hold ``}]``: that is not the array's end,
    so the events of the next block are read."""
    from stepscope.trace.kineto_scan import BlockScanner

    good = json.dumps({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1})
    damaged = '{"ph": "X", @@ "args": {"shapes": [{"a": 1}]'
    s = BlockScanner(0, False, 1 << 20)
    s.feed((good + ", " + damaged).encode())
    s.feed(('}, "x": 2}, ' + good.replace('"ts": 1', '"ts": 2') + "]}").encode())
    s.finish()
    assert s.closed and s.skipped == 1
    rows = sum(t.num_rows for t, _ in s.tables)
    assert rows == 2


@pytest.mark.parametrize(
    ("damage", "kept"),
    [
        ('"args": {"External id": 1, "bad\\e key": 2}', False),  # an invalid escape in a key
        ('"args": {"External id": 1,}', False),  # a trailing comma
        ('"args": {"External id": 1 "x": 2}', False),  # a missing comma
        ('"args": {"External id": 1, "note": "a\\u0000b"}', True),  # an escaped NUL: valid JSON
    ],
)
def test_both_readers_hold_events_to_the_same_json_rules(tmp_path: Path, damage: str, kept: bool) -> None:
    ev = _events()
    ev.append(synth.cpu("aten::mm", 20, 5))
    text = _text(ev).replace('"args": {}', damage, 1)
    p = tmp_path / "t.json"
    p.write_text(text)
    fast, portable = _both(p)
    assert (fast.table.num_rows, fast.skipped_events) == ((7, 0) if kept else (6, 1))
    assert fast.table.equals(portable.table) and portable.skipped_events == fast.skipped_events


def test_a_raw_control_character_in_a_string_is_kept_by_both_readers(tmp_path: Path) -> None:
    ev = _events()
    ev.append(synth.cpu("aten::mm\x01", 20, 5))
    p = tmp_path / "t.json"
    p.write_bytes(_text(ev).replace("\\u0001", "\x01").encode())  # unescaped, as some writers leave it
    fast, portable = _both(p)
    assert "aten::mm\x01" in fast.table["name"].to_pylist()
    assert fast.table.equals(portable.table)


def test_invalid_utf8_reads_alike_in_both_readers(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(
        b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k\xff\xfe\xc3x", "pid": 0, "tid": 7, "ts": 1, '
        b'"dur": 1}, {"ph": "X", "cat": "cpu_op", "name": "op\xe2\x82", "pid": 1, "tid": 1, "ts": 2, "dur": 1}]}'
    )
    fast, portable = _both(p)
    assert fast.table["name"].to_pylist() == ["k\ufffd\ufffd\ufffdx", "op\ufffd"]
    assert fast.table.equals(portable.table)


def test_a_user_annotation_without_a_name_is_analyzed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = _events()
    ev.append({"ph": "X", "cat": "user_annotation", "name": None, "pid": 1, "tid": 1, "ts": 5, "dur": 500})
    ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": None, "pid": 0, "tid": 7, "ts": 90, "dur": 300})
    p = tmp_path / "t.json"
    p.write_text(_text(ev))
    rc, err = _cli(["analyze", str(p), "-q", "--json", str(tmp_path / "o.json")], capsys)
    assert rc == 0 and not any("Traceback" in line for line in err)
