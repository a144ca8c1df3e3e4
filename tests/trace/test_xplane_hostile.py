"""Hostile XPlane files: a plane without stat metadata; thousands of device planes (each a rank),
whose per-name work must follow each rank's rows, not the whole file's dictionary."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope.analysis.classify import Rules
from stepscope.cli import main
from stepscope.trace.xspace_pb import xspace_class


def _space(path: Path, planes: int, *, stat_metadata: bool = True) -> Path:
    s = xspace_class()()
    s.hostnames.append(b"h")
    for k in range(planes):
        p = s.planes.add(id=k + 1, name=f"/device:GPU:{k}".encode())
        if stat_metadata:
            p.stat_metadata[1].id, p.stat_metadata[1].name = 1, b"hlo_op"
        p.event_metadata[1].id, p.event_metadata[1].name = 1, f"fusion.{k}".encode()  # a name of its own
        line = p.lines.add(id=1, name=b"XLA Ops", timestamp_ns=1000)
        for j in range(3):
            e = line.events.add(metadata_id=1, offset_ps=j * 1_000_000, duration_ps=500_000)
            e.stats.add(metadata_id=1).str_value = f"fusion.{k}".encode()
    path.write_bytes(s.SerializeToString())
    return path


def test_a_plane_without_stat_metadata_reads(tmp_path: Path) -> None:
    p = _space(tmp_path / "t.xplane.pb", 2, stat_metadata=False)
    assert main(["analyze", str(p), "-q", "--json", str(tmp_path / "o.json")]) == 0


def test_per_name_work_grows_with_the_planes_not_their_square(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = Rules.category_of_kernel

    def counting(self: Rules, name: str) -> str:
        calls.append(name)
        return real(self, name)

    monkeypatch.setattr(Rules, "category_of_kernel", counting)
    planes = 300
    p = _space(tmp_path / "t.xplane.pb", planes)
    assert main(["analyze", str(p), "-q", "--json", str(tmp_path / "o.json")]) == 0
    assert len(calls) <= 2 * planes  # each rank classifies its own kernel name (it was planes x names)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"uint64_value": 2**64 - 1}, -1),
        ({"double_value": float("nan")}, -1),
        ({"double_value": float("inf")}, -1),
        ({"int64_value": -5}, -1),
        ({"double_value": 1e300}, -1),
        ({"double_value": 2.5e9}, 2_500_000_000),
        ({"int64_value": 123}, 123),
    ],
)
def test_integer_stats_out_of_range_are_unknown_in_both_readers(tmp_path: Path, value: dict, expected: int) -> None:
    from stepscope.trace.xplane import read_xplane

    s = xspace_class()()
    p = s.planes.add(id=1, name=b"/device:GPU:0")
    for k, name in {1: b"hlo_op", 2: b"flops"}.items():
        p.stat_metadata[k].id, p.stat_metadata[k].name = k, name
    p.event_metadata[1].id, p.event_metadata[1].name = 1, b"fusion.1"
    e = p.lines.add(id=1, name=b"XLA Ops", timestamp_ns=1000).events.add(metadata_id=1, duration_ps=500_000)
    e.stats.add(metadata_id=1).str_value = b"fusion.1"
    st = e.stats.add(metadata_id=2)
    for field, v in value.items():
        setattr(st, field, v)
    f = tmp_path / "t.xplane.pb"
    f.write_bytes(s.SerializeToString())
    reads = [read_xplane(f, force_portable=portable) for portable in (False, True)]
    assert [r.table["flops"].to_pylist() for r in reads] == [[expected], [expected]]
