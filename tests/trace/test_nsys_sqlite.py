"""Nsight Systems SQLite exports (trace/nsys_sqlite.py): a small export built here with hand-computed
answers, two real exports (tests/fixtures, extra-p/extrap), several processes in one export, bad files."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

import stepscope
from stepscope.cli import main
from stepscope.trace.nsys_sqlite import READ_COLUMNS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CONCURRENT = FIXTURES / "nsys_concurrent_profile4.sqlite"
CON_KERNEL = FIXTURES / "nsys_con_kernel.sqlite"

GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn"
SCHEMA = READ_COLUMNS  # the tables and columns the reader uses, as nsys names them
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4>"


def _gid(pid: int, tid: int = 0) -> int:
    """nsys's packed id: process in bits 24-47, thread in bits 0-23 (hardware id above)."""
    return (1 << 56) | (pid << 24) | tid


def _export(path: Path, processes: list[tuple[int, int]]) -> None:
    """An export in nsys's layout (the columns the reader uses): for each (pid, device), two NVTX
    steps, [0, 10 us) and [10 us, 20 us), each with the same launches shifted by 10 us x step:
    step 0 launches a GEMM (stream 7, 2-6 us), an elementwise kernel (stream 8, 5-7 us) and a 1 MiB
    pageable host-to-device copy (stream 7, 7.5-8.5 us); step 1 one GEMM (12-15 us); plus an NVTX
    range PyTorch's emit_nvtx would write around the first launch."""
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.executemany(
        "INSERT INTO StringIds VALUES (?, ?)",
        [(1, GEMM), (2, ELEMENTWISE), (3, "cudaLaunchKernel_v7000"), (4, "cudaMemcpyAsync_v3020"), (5, "step")],
    )
    for pid, dev in processes:
        g, t = _gid(pid), _gid(pid, pid + 1)
        corr = pid * 100  # correlation ids are per process
        con.executemany(
            "INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, NULL, NULL, NULL, ?, ?, NULL, ?, 0)",
            [
                (0, 10_000, None, t, 5),
                (10_000, 20_000, "step", t, None),
                (900, 1_600, "aten::mm, seq = 7, op_id = 3", t, None),
                (50, None, "a mark", t, None),
            ],
        )
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0)",
            [
                (1_000, 1_500, t, corr + 1, 3),
                (2_000, 2_500, t, corr + 2, 3),
                (3_000, 3_300, t, corr + 3, 4),
                (11_000, 11_500, t, corr + 4, 3),
            ],
        )
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?)",
            [
                (2_000, 6_000, dev, 7, corr + 1, g, 1, 1),
                (5_000, 7_000, dev, 8, corr + 2, g, 2, 2),
                (12_000, 15_000, dev, 7, corr + 4, g, 1, 1),
            ],
        )
        con.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (7500, 8500, ?, 1, 7, ?, ?, 1048576, 1, 1, 3)",
            (dev, corr + 3, g),
        )
    con.executemany(
        "INSERT INTO TARGET_INFO_GPU VALUES (?, 'NVIDIA H100 80GB HBM3', 85899345920, 132, 9, 0)", [(0,), (1,)]
    )
    con.commit()
    con.close()


def _one_thread_export(
    path: Path, ranges: list[tuple[int, int, str]], calls: list[tuple[int, int]], kernels: list[tuple[int, int, int]]
) -> None:
    """An export of one thread of process 7 on an H100: NVTX ``ranges`` (start, end, text),
    ``cudaLaunchKernel`` calls (start, correlation id; 100 ns long) and GEMM ``kernels`` (start,
    end, correlation id) on stream 7."""
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(1, GEMM), (3, "cudaLaunchKernel_v7000")])
    t, g = _gid(7, 8), _gid(7)
    con.executemany(
        "INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, NULL, NULL, NULL, ?, ?, NULL, NULL, 0)",
        [(a, b, x, t) for a, b, x in ranges],
    )
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, 3, 0)", [(a, a + 100, t, c) for a, c in calls]
    )
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, 7, ?, ?, 1, 1)",
        [(a, b, c, g) for a, b, c in kernels],
    )
    con.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H100 80GB HBM3', 85899345920, 132, 9, 0)")
    con.commit()
    con.close()


def _analyze(paths: list[Path], tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "r.json"
    assert main(["analyze", *map(str, paths), "--json", str(out), "-q", *extra]) == 0
    return json.loads(out.read_text())


def test_small_export_by_hand(tmp_path: Path) -> None:
    """Step 0's device window runs from the GEMM's start (2 us) to step 1's first work (12 us): 10 us;
    kernels cover [2, 7) = 5 us, the copy 1 us, idle [7, 7.5) + [8.5, 12) = 4 us. Step 1: the GEMM
    alone, 3 us (step 0 is over 3x step 1: --skip-steps 0 keeps it in the statistics)."""
    db = tmp_path / "report.sqlite"
    _export(db, [(4242, 0)])
    r = _analyze([db], tmp_path, "--step-marker", "step", "--skip-steps", "0")
    rank = r["ranks"][0]
    s0, s1 = rank["steps"]
    assert s0["step_time_ns"] == 10_000 and s0["window_start_ns"] == 2_000 and s0["window_end_ns"] == 12_000
    assert s0["compute_ns"] == 5_000 and s0["exposed_memcpy_ns"] == 1_000 and s0["idle_ns"] == 4_000
    assert s1["step_time_ns"] == 3_000 and s1["compute_ns"] == 3_000
    assert rank["device"] == "NVIDIA H100 80GB HBM3" and rank["hardware"]["name"] == "H100-SXM"
    cats = {k["name"]: k["category"] for k in rank["top_kernels"]}
    assert cats[GEMM] == "gemm" and cats["Memcpy HtoD (Pageable -> Device)"] == "memcpy_h2d"
    assert rank["launch"]["matched"] == 3  # every kernel found its cudaLaunchKernel by correlation id


def test_small_export_rows(tmp_path: Path) -> None:
    """The event table: 3 kernels, 1 memcpy (1 MiB), 4 runtime calls named without their version,
    2 step ranges (one by textId), the emit_nvtx range as cpu_op "aten::mm"; the mark (no end) dropped."""
    db = tmp_path / "report.sqlite"
    _export(db, [(4242, 0)])
    t = stepscope.load(db).events.to_pylist()
    by_kind: dict[str, list[dict]] = {}
    for e in t:
        by_kind.setdefault(e["kind"], []).append(e)
    assert len(by_kind["kernel"]) == 3 and len(by_kind["memcpy"]) == 1 and by_kind["memcpy"][0]["bytes"] == 1 << 20
    assert sorted(e["name"] for e in by_kind["runtime"]) == ["cudaLaunchKernel"] * 3 + ["cudaMemcpyAsync"]
    assert [e["name"] for e in by_kind["user_annotation"]] == ["step", "step"]
    assert [e["name"] for e in by_kind["cpu_op"]] == ["aten::mm"]
    assert {e["pid"] for e in t} == {4242} and {e["tid"] for e in by_kind["runtime"]} == {4243}
    assert {(e["stream"], e["device"]) for e in by_kind["kernel"]} == {(7, 0), (8, 0)}


def test_several_processes_are_ranks_by_device(tmp_path: Path) -> None:
    """pid 100 ran on device 1, pid 200 on device 0: rank 0 is pid 200, rank 1 pid 100, each with
    its own two steps; a warning says how ranks were numbered."""
    db = tmp_path / "all_ranks.sqlite"
    _export(db, [(100, 1), (200, 0)])
    trace = stepscope.load(db)
    assert [r.rank for r in trace.ranks] == [0, 1] and all(r.rank_source == "nsys process" for r in trace.ranks)
    ev = trace.events.to_pylist()
    assert {e["pid"] for e in ev if e["rank"] == 0} == {200} and {e["pid"] for e in ev if e["rank"] == 1} == {100}
    assert any("several GPU processes or devices" in w for w in trace.warnings)
    r = _analyze([db], tmp_path, "--step-marker", "step")
    assert [[s["step_time_ns"] for s in rk["steps"]] for rk in r["ranks"]] == [
        [10_000, 3_000],
        [10_000, 3_000],
    ]  # step 0: [2, 12) us, to step 1's first work
    assert [rk["device"].endswith(f"(device {d} of all_ranks.sqlite)") for d, rk in enumerate(r["ranks"])] == [
        True,
        True,
    ]
    assert sum("several GPU processes or devices" in w for w in r["warnings"]) == 1


@pytest.mark.parametrize("path", [CONCURRENT, CON_KERNEL], ids=["concurrent", "con_kernel"])
def test_real_exports_match_sql(path: Path, tmp_path: Path) -> None:
    """Row counts and kernel time read independently with SQL; the parts sum to the step exactly."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    count = {
        t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
        for t in (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_MEMSET",
            "CUPTI_ACTIVITY_KIND_RUNTIME",
        )
    }
    kernel_ns = con.execute("SELECT SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    has_nvtx = con.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'NVTX_EVENTS'").fetchone()[0]
    ranges = (
        con.execute("SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND end IS NOT NULL").fetchone()[0]
        if has_nvtx
        else 0
    )
    con.close()
    ev = stepscope.load(path).events
    kinds = ev["kind"].to_pylist()
    assert kinds.count("kernel") == count["CUPTI_ACTIVITY_KIND_KERNEL"]
    assert kinds.count("memcpy") == count["CUPTI_ACTIVITY_KIND_MEMCPY"]
    assert kinds.count("memset") == count["CUPTI_ACTIVITY_KIND_MEMSET"]
    assert kinds.count("runtime") == count["CUPTI_ACTIVITY_KIND_RUNTIME"]
    assert kinds.count("user_annotation") + kinds.count("cpu_op") == ranges
    assert sum(d for d, k in zip(ev["dur_ns"].to_pylist(), kinds) if k == "kernel") == kernel_ns
    rank = _analyze([path], tmp_path)["ranks"][0]
    assert rank["device"] == "GeForce GTX 1060 with Max-Q Design"
    for s in rank["steps"]:
        assert s["compute_ns"] + s["exposed_comm_ns"] + s["exposed_memcpy_ns"] + s["idle_ns"] == s["step_time_ns"]


def _one_line_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_bad_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database\n" * 100, encoding="utf-8")
    assert "not a readable SQLite database" in _one_line_exit_2(["analyze", str(text)], capsys)
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x INT)")
    con.commit()
    con.close()
    assert "without Nsight Systems tables" in _one_line_exit_2(["analyze", str(other)], capsys)
    rep = tmp_path / "run1.nsys-rep"
    rep.write_bytes(b"\x00" * 64)
    err = _one_line_exit_2(["analyze", str(rep)], capsys)
    assert "nsys export --type sqlite -o run1.sqlite run1.nsys-rep" in err


def test_a_cut_export_is_read_or_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An export cut at 60% of its bytes: never a traceback. Either the tables that survive are read
    with a warning naming the ones that did not, or one line says the file is unreadable."""
    cut = tmp_path / "cut.sqlite"
    data = CONCURRENT.read_bytes()
    cut.write_bytes(data[: int(len(data) * 0.6)])
    out = tmp_path / "r.json"
    code = main(["analyze", str(cut), "--json", str(out), "-q"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 0:
        assert any("unreadable tables skipped" in w for w in json.loads(out.read_text())["warnings"])
    else:
        assert code == 2 and len(err.strip().splitlines()) == 1


def test_directory_of_exports(tmp_path: Path) -> None:
    """A directory holding one export per rank (rank in the file name) reads as those ranks."""
    for r in (0, 1):
        shutil.copy(CON_KERNEL, tmp_path / f"rank{r}.sqlite")
    trace = stepscope.load(tmp_path)
    assert [(r.rank, r.rank_source) for r in trace.ranks] == [(0, "filename"), (1, "filename")]


def test_convert_writes_one_parquet_per_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`stepscope convert` on an export of two processes: one Parquet per rank (file names carry the
    rank), which analyze to the same steps as the export itself."""
    db = tmp_path / "all_ranks.sqlite"
    _export(db, [(100, 1), (200, 0)])
    out = tmp_path / "pq"
    assert main(["convert", str(db), "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["all_ranks.rank0.parquet", "all_ranks.rank1.parquet"]
    r = _analyze(sorted(out.iterdir()), tmp_path, "--step-marker", "step")
    assert [[s["step_time_ns"] for s in rk["steps"]] for rk in r["ranks"]] == [
        [10_000, 3_000],
        [10_000, 3_000],
    ]  # step 0: [2, 12) us, to step 1's first work
    assert {e["pid"] for e in stepscope.load(out / "all_ranks.rank0.parquet").events.to_pylist()} == {200}


def test_nccl_kernels_of_two_processes_match_in_the_cluster_view(tmp_path: Path) -> None:
    """Two processes, three steps; each step a GEMM (stream 7) then an NCCL all-reduce (stream 20)
    that ends at 63 us into the step on both. In step 1 the second process's GEMM runs 3 us longer,
    so it arrives 3 us late: the first process's all-reduce lasts 23 us, 3 of them waiting; the
    transfer is the shorter, 20 us. nsys records no process group, so the group is the NCCL stream."""
    db = tmp_path / "nccl.sqlite"
    con = sqlite3.connect(db)
    con.executescript(SCHEMA)
    con.executemany(
        "INSERT INTO StringIds VALUES (?, ?)",
        [
            (1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            (2, GEMM),
            (3, "cudaLaunchKernel_v7000"),
        ],
    )
    for pid, dev, late in ((100, 0, 0), (200, 1, 3_000)):
        t, g = _gid(pid, pid + 1), _gid(pid)
        for step in range(3):
            base, extra = step * 100_000, late if step == 1 else 0
            c = 10 * step
            con.execute(
                "INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, NULL, NULL, NULL, 'step', ?, NULL, NULL, 0)",
                (base, base + 100_000, t),
            )
            con.executemany(
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, 3, 0)",
                [(base + 1_000, base + 1_500, t, c + 1), (base + 2_000, base + 2_500, t, c + 2)],
            )
            con.executemany(
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?)",
                [
                    (base + 2_000, base + 40_000 + extra, dev, 7, c + 1, g, 2, 2),
                    (base + 40_000 + extra, base + 63_000, dev, 20, c + 2, g, 1, 1),
                ],
            )
    con.commit()
    con.close()
    cl = _analyze([db], tmp_path, "--step-marker", "step")["cluster"]
    coll = cl["collectives"]
    assert [(c["type"], c["group"], c["seq"]) for c in coll] == [("all_reduce", "stream:20", k) for k in range(3)]
    late = coll[1]
    assert late["last_rank"] == 1 and late["skew_ns"] == 3_000 and late["transfer_ns"] == 20_000
    assert late["ranks"]["0"]["wait_ns"] == 3_000 and late["ranks"]["1"]["wait_ns"] == 0
    assert coll[0]["skew_ns"] == 0 and coll[0]["transfer_ns"] == 23_000


def test_one_process_on_two_devices_is_two_ranks(tmp_path: Path) -> None:
    """A process that drives two GPUs (as a JAX process does): its kernels on device 1 repeat those
    on device 0 with their own launches; each device is a rank with the host's steps, 6.5 and 3 us."""
    db = tmp_path / "jax_like.sqlite"
    _export(db, [(4242, 0)])
    con = sqlite3.connect(db)
    con.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT start, end, 1, contextId, streamId, correlationId + 50, "
        "globalPid, demangledName, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL"
    )
    con.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY SELECT start, end, 1, contextId, streamId, correlationId + 50, "
        "globalPid, bytes, copyKind, srcKind, dstKind FROM CUPTI_ACTIVITY_KIND_MEMCPY"
    )
    con.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT start + 1, end, eventClass, globalTid, correlationId + 50, "
        "nameId, returnValue FROM CUPTI_ACTIVITY_KIND_RUNTIME"
    )
    con.commit()
    con.close()
    trace = stepscope.load(db)
    assert [r.rank for r in trace.ranks] == [0, 1]
    ev = trace.events.to_pylist()
    assert {e["device"] for e in ev if e["rank"] == 0 and e["kind"] == "kernel"} == {0}
    assert {e["device"] for e in ev if e["rank"] == 1 and e["kind"] == "kernel"} == {1}
    r = _analyze([db], tmp_path, "--step-marker", "step", "--skip-steps", "0")  # step 0 counts (3x step 1)
    assert [[s["step_time_ns"] for s in rk["steps"]] for rk in r["ranks"]] == [
        [10_000, 3_000],
        [10_000, 3_000],
    ]  # step 0: [2, 12) us, to step 1's first work
    assert [rk["launch"]["matched"] for rk in r["ranks"]] == [3, 3]


def test_nvtx_and_kernel_names_are_escaped_in_html(tmp_path: Path) -> None:
    """Strings from an export are untrusted: an NVTX range and a kernel named with markup reach the
    HTML report escaped."""
    evil = "<img src=x onerror=alert(1)>"
    db = tmp_path / "evil.sqlite"
    _export(db, [(4242, 0)])
    con = sqlite3.connect(db)
    con.execute("UPDATE StringIds SET value = ? WHERE id = 2", (evil + "_kernel",))
    con.execute("UPDATE NVTX_EVENTS SET text = ? WHERE text LIKE 'aten::mm%'", (evil,))
    con.commit()
    con.close()
    html = tmp_path / "r.html"
    assert main(["analyze", str(db), "--html", str(html), "-q"]) == 0
    page = html.read_text(encoding="utf-8")
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;_kernel" in page


def test_emit_nvtx_ops_link_their_kernels_and_give_flops(tmp_path: Path) -> None:
    """PyTorch's emit_nvtx(record_shapes=True) ranges: aten::linear [1, 9) us holds aten::t [1.1, 1.2),
    aten::addmm [1.3, 8) and, inside addmm, aten::empty [1.4, 1.5). The launch at 2 us is inside addmm
    after empty ended, so the GEMM belongs to addmm (Kineto links a kernel to the innermost op). FLOPs
    2 x 64 x 128 x 256 = 4,194,304; the kernel's name says bf16, so 2 B per element: (256 + 64 x 128 +
    128 x 256 + 64 x 256 output) x 2 = 115,200 B. Sequence numbers come from "seq = N"."""
    db = tmp_path / "emit.sqlite"
    ranges = [
        (0, 10_000, "step"),
        (
            1_000,
            9_000,
            "aten::linear, seq = 10, op_id = 1, sizes = [[64, 128], [256, 128], [256]], input_op_ids = [(0, 0)]",
        ),
        (1_100, 1_200, "aten::t, seq = 11, op_id = 2, sizes = [[256, 128]]"),
        (1_300, 8_000, "aten::addmm, seq = 12, op_id = 3, sizes = [[256], [64, 128], [128, 256], [], []]"),
        (1_400, 1_500, "aten::empty, op_id = 4, sizes = [[], [], [], [], [], []]"),
    ]
    _one_thread_export(db, ranges, [(2_000, 1)], [(3_000, 7_000, 1)])
    ev = {e["name"]: e for e in stepscope.load(db).events.to_pylist() if e["kind"] in ("cpu_op", "kernel")}
    assert ev[GEMM]["external_id"] == ev["aten::addmm"]["external_id"] >= 0
    assert len({ev[k]["external_id"] for k in ("aten::linear", "aten::t", "aten::addmm", "aten::empty")}) == 4
    assert [ev[k]["sequence_number"] for k in ("aten::linear", "aten::t", "aten::addmm", "aten::empty")] == [
        10,
        11,
        12,
        -1,
    ]
    assert ev["aten::addmm"]["input_dims"] == "[[256], [64, 128], [128, 256], [], []]"
    rank = _analyze([db], tmp_path, "--step-marker", "step")["ranks"][0]
    addmm = next(r for r in rank["roofline"] if r["name"] == "aten::addmm")
    assert addmm["flops"] == 2 * 64 * 128 * 256 and addmm["dtype"] == "bf16" and addmm["bytes"] == 115_200
    assert rank["steps"][0]["executed_flops"] == 2 * 64 * 128 * 256


def test_reports_in_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A directory of .nsys-rep reports alone: one line, exit 2, with the export command. Beside an
    export, a report without its own .sqlite is skipped with a warning saying how to export it."""
    (tmp_path / "run1.nsys-rep").write_bytes(b"\x00" * 64)
    err = _one_line_exit_2(["analyze", str(tmp_path)], capsys)
    assert "Nsight Systems reports" in err and "nsys export --type sqlite -o run1.sqlite run1.nsys-rep" in err
    shutil.copy(CON_KERNEL, tmp_path / "rank0.sqlite")
    r = _analyze([tmp_path], tmp_path)
    assert len(r["ranks"]) == 1
    assert any("run1.nsys-rep" in w and "nsys export" in w for w in r["warnings"])


def test_a_table_with_values_of_the_wrong_type_is_skipped_with_a_warning(tmp_path: Path) -> None:
    """SQLite stores any type in any column (and a damaged page can hold anything): a kernel whose
    device is text makes the kernel table unreadable; it is named in a warning and the rest read."""
    db = tmp_path / "odd.sqlite"
    _export(db, [(4242, 0)])
    con = sqlite3.connect(db)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 'gpu0' WHERE correlationId = 424201")
    con.commit()
    con.close()
    r = _analyze([db], tmp_path, "--step-marker", "step")
    assert any("CUPTI_ACTIVITY_KIND_KERNEL" in w and "not integers" in w for w in r["warnings"])
    assert [s["exposed_memcpy_ns"] for s in r["ranks"][0]["steps"]] == [1_000, 0]  # the copy is still read


def test_innermost_op_at_ties_by_hand() -> None:
    """Op ranges on one thread: G [0, 200) holds A [0, 100), which holds B [0, 50) and C [60, 100):
    G, A and B open at the same instant, A and C close at the same instant. Calls at 0 and 25 are
    B's, at 55 A's (B has closed, A is open), at 70 C's, at 100 and 150 G's (A and C have closed),
    at 210 nobody's; each kernel takes its call's op, by correlation id."""
    import numpy as np

    from stepscope.trace.nsys_ops import link_ops
    from stepscope.trace.schema import KIND_CODE as K

    op, rt, kn = K["cpu_op"], K["runtime"], K["kernel"]
    rows = [(op, 0, 200, -1), (op, 0, 100, -1), (op, 0, 50, -1), (op, 60, 40, -1)]  # G, A, B, C: rows 0-3
    calls = [0, 25, 55, 70, 100, 150, 210]
    rows += [(rt, t, 1, c) for c, t in enumerate(calls, 1)] + [(kn, 500 + c, 5, c) for c in range(1, len(calls) + 1)]
    kind, ts, dur, corr = (np.array(x, np.int64) for x in zip(*rows))
    n = kind.size
    ext = link_ops(kind, np.full(n, 7, np.int64), np.full(n, 8, np.int64), ts, dur, corr)
    g, a, b, c = ext[:4]
    assert len({g, a, b, c}) == 4 and min(g, a, b, c) >= 0
    want = [b, b, a, c, g, g, -1]
    assert list(ext[4:11]) == want and list(ext[11:18]) == want


def test_emit_nvtx_phases_forward_backward_recompute(tmp_path: Path) -> None:
    """emit_nvtx ranges carry what the phase analysis reads in Kineto traces: a forward aten::mm
    (seq 5) launching a 1 us kernel; the backward node's evaluate_function range, holding a gradient
    aten::mm (no seq) that launches a 2 us kernel, and a forward aten::mm (seq 9) run again inside it
    (activation checkpointing), launching a 3 us kernel. Forward 1 us, backward 2, recompute 3."""
    db = tmp_path / "phases.sqlite"
    ranges = [
        (0, 20_000, "step"),
        (1_000, 2_000, "aten::mm, seq = 5, op_id = 1, sizes = [[4, 8], [8, 16]]"),
        (5_000, 15_000, "autograd::engine::evaluate_function: MmBackward0, seq = 5, op_id = 2"),
        (5_100, 14_900, "MmBackward0, seq = 5, op_id = 3"),
        (5_200, 6_000, "aten::mm, op_id = 4, sizes = [[16, 4], [4, 8]]"),
        (7_000, 8_000, "aten::mm, seq = 9, op_id = 5, sizes = [[4, 8], [8, 16]]"),
    ]
    _one_thread_export(
        db, ranges, [(1_500, 1), (5_500, 2), (7_500, 3)], [(2_000, 3_000, 1), (6_000, 8_000, 2), (9_000, 12_000, 3)]
    )
    step = _analyze([db], tmp_path, "--step-marker", "step")["ranks"][0]["steps"][0]
    assert step["phase_ns"] == {"forward": 1_000, "backward": 2_000, "recompute": 3_000, "optimizer": 0}
    assert step["recompute_ops"] == 1 and step["step_time_ns"] == 10_000


def test_without_a_marker_the_warning_names_recurring_annotations(tmp_path: Path) -> None:
    """No --step-marker: the whole trace is one window, and the warning names the annotation that
    recurs and covers the most time ("step", twice); the mark-like ranges and ops are not named."""
    db = tmp_path / "report.sqlite"
    _export(db, [(4242, 0)])
    r = _analyze([db], tmp_path)
    (w,) = [w for w in r["warnings"] if "no ProfilerStep#N" in w]
    assert w.endswith("recurring annotations here: 'step' (2x))")
    assert len(r["ranks"][0]["steps"]) == 1


def test_another_tools_database_in_a_directory_is_skipped(tmp_path: Path) -> None:
    """A run directory with an nsys export and another tool's SQLite database (no nsys tables):
    the database is left out with a warning, the export analyzed."""
    shutil.copy(CON_KERNEL, tmp_path / "rank0.sqlite")
    con = sqlite3.connect(tmp_path / "optuna.sqlite")
    con.execute("CREATE TABLE trials (id INT)")
    con.commit()
    con.close()
    out = tmp_path / "out"
    out.mkdir()
    r = _analyze([tmp_path], out)
    assert [Path(rk["path"]).name for rk in r["ranks"]] == ["rank0.sqlite"]
    assert any("optuna.sqlite" in w and "without Nsight Systems tables" in w for w in r["warnings"])


def test_two_nodes_exports_number_on(tmp_path: Path) -> None:
    """Two exports of two processes each (two nodes): ranks 0-1 from the first, 2-3 from the second,
    each file's warning once, in the library and the CLI, analyzed in parallel workers."""
    for node in (0, 1):
        _export(tmp_path / f"node{node}.sqlite", [(100 + node, 0), (200 + node, 1)])
    files = [tmp_path / "node0.sqlite", tmp_path / "node1.sqlite"]
    trace = stepscope.load(files)
    assert [r.rank for r in trace.ranks] == [0, 1, 2, 3] and not any("already taken" in w for w in trace.warnings)
    out = tmp_path / "out"
    out.mkdir()
    r = _analyze(files, out, "--step-marker", "step", "--workers", "2")
    assert [(rk["rank"], Path(rk["path"]).name) for rk in r["ranks"]] == [
        (0, "node0.sqlite"),
        (1, "node0.sqlite"),
        (2, "node1.sqlite"),
        (3, "node1.sqlite"),
    ]
    assert sum("several GPU processes" in w for w in r["warnings"]) == 2 and not any(
        "already taken" in w for w in r["warnings"]
    )
