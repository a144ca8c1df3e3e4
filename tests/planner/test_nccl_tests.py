"""stepscope network: a cluster's network profile from nccl-tests logs (written here in nccl-tests'
output format, with hand-chosen bandwidths)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stepscope.cli import main
from stepscope.errors import InputError
from stepscope.planner import nccl_tests, network


def _log(
    test: str, nodes: int, per_node: int, busbw: dict[int, float], *, mpi: bool = False, header: bool = True
) -> str:
    pre = "[1,0]<stdout>:" if mpi else ""
    out = [f"{pre}# nccl-tests version 2.18.3 nccl-headers=23003 nccl-library=23003"]
    if header:
        out.append(f"{pre}# Collective test starting: {test}")
    out += [
        f"{pre}# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20",
        f"{pre}#",
        f"{pre}# Using devices",
    ]
    for r in range(nodes * per_node):
        out.append(
            f"{pre}#  Rank {r:2d} Group  0 Pid  {1000 + r} on node{r // per_node} device  {r % per_node} [0x19] NVIDIA H100 80GB HBM3"
        )
    out += [
        f"{pre}#                                                              out-of-place                       in-place",
        f"{pre}#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong",
        f"{pre}#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)",
    ]
    for size, bw in busbw.items():
        # the in-place columns carry a different (wrong, if read) bandwidth
        out.append(
            f"{pre}{size:12d} {size // 4:13d}     float     sum      -1   1000.0   1.00  {bw:6.2f}       0   1000.0   1.00   1.23       0"
        )
    out.append(f"{pre}# Avg bus bandwidth    : 99.9")
    return "\n".join(out) + "\n"


def _write_set(tmp_path: Path, counts: dict[int, dict[str, float]]) -> list[str]:
    paths = []
    for nodes, by_kind in counts.items():
        for kind, bw in by_kind.items():
            p = tmp_path / f"{kind}_{nodes}n.log"
            p.write_text(
                _log(f"{kind}_perf", nodes, 8, {128 << 20: bw / 2, 256 << 20: bw, 512 << 20: bw * 1.1}, mpi=nodes > 1)
            )
            paths.append(str(p))
    return paths


def test_a_log_gives_its_collective_nodes_and_out_of_place_bus_bandwidth(tmp_path: Path) -> None:
    p = tmp_path / "run.log"
    p.write_text(_log("reduce_scatter_perf", 2, 8, {256 << 20: 181.6, 1 << 30: 190.0}, mpi=True))
    kind, nodes, per_node, rows = nccl_tests.parse_log(str(p))
    assert (kind, nodes, per_node) == ("reduce_scatter", 2, 8)
    assert rows == {256 << 20: 181.6, 1 << 30: 190.0}
    q = tmp_path / "all_gather_4nodes.log"  # an old log without the header line: the file name says it
    q.write_text(_log("x", 4, 8, {256 << 20: 119.0}, header=False))
    assert nccl_tests.parse_log(str(q))[:2] == ("all_gather", 4)


def test_profile_from_logs_reads_each_collective_and_node_count_at_the_size_asked(tmp_path: Path) -> None:
    counts = {
        1: {"all_reduce": 436.0, "all_gather": 249.8, "reduce_scatter": 249.7},
        2: {"all_reduce": 361.7, "all_gather": 184.6, "reduce_scatter": 181.6},
    }
    entry = nccl_tests.profile_from_logs(_write_set(tmp_path, counts), name="mine", device="H100-SXM")
    assert entry["nodes"] == [1, 2] and entry["devices_per_node"] == 8 and entry["message_bytes"] == 256 << 20
    assert entry["busbw_gbps"] == {k: [counts[1][k], counts[2][k]] for k in network.KINDS}
    prof = network.parse_entries({"networks": [entry]}, "x")["mine"]
    assert prof.busbw("all_gather", 2.0) == pytest.approx(184.6e9)
    # 300 MB asked: 256 MiB (268 MB) is the closest size in log terms
    assert (
        nccl_tests.profile_from_logs(_write_set(tmp_path, counts), name="m", size=300_000_000)["busbw_gbps"][
            "all_reduce"
        ][0]
        == 436.0
    )


def test_incomplete_or_inconsistent_logs_are_one_line_errors(tmp_path: Path) -> None:
    paths = _write_set(
        tmp_path,
        {
            1: {"all_reduce": 400.0, "all_gather": 250.0, "reduce_scatter": 250.0},
            2: {"all_reduce": 360.0, "all_gather": 185.0},
        },
    )
    with pytest.raises(InputError, match="missing reduce_scatter at 2 node"):
        nccl_tests.profile_from_logs(paths, name="x")
    odd = tmp_path / "all_reduce_odd.log"
    odd.write_text(_log("all_reduce_perf", 1, 4, {256 << 20: 300.0}))
    with pytest.raises(InputError, match=r"\[4, 8\] devices per node"):
        nccl_tests.profile_from_logs([*paths[:3], str(odd)], name="x")
    with pytest.raises(InputError, match="within a factor of 2"):
        nccl_tests.profile_from_logs(paths[:3], name="x", size=8 << 30)
    junk = tmp_path / "junk.log"
    junk.write_text("hello\n")
    with pytest.raises(InputError, match="not an nccl-tests log"):
        nccl_tests.parse_log(str(junk))


def test_cli_writes_a_profile_plan_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    counts = {
        1: {"all_reduce": 436.0, "all_gather": 249.8, "reduce_scatter": 249.7},
        2: {"all_reduce": 361.7, "all_gather": 184.6, "reduce_scatter": 181.6},
    }
    out = tmp_path / "net.yaml"
    assert (
        main(["network", *_write_set(tmp_path, counts), "--name", "lab", "--device", "H100-SXM", "-o", str(out)]) == 0
    )
    assert yaml.safe_load(out.read_text())["networks"][0]["name"] == "lab"
    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-8b",
                "--hardware",
                "h100",
                "--devices",
                "16",
                "--global-batch",
                "32",
                "--seq-len",
                "4096",
                "--evaluate",
                "dp=16",
                "--network",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["network", str(tmp_path / "nope.log"), "--name", "x"]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["network", *_write_set(tmp_path, counts), "--name", "x", "--size", "lots"]) == 2
    capsys.readouterr()
    assert main(["network", *_write_set(tmp_path, counts), "--name", "x", "-o", str(tmp_path / "no" / "net.yaml")]) == 1
    assert "cannot write output" in capsys.readouterr().err  # was a traceback
