"""Cluster view: hand-computed synthetic instances, gloo ranks with injected faults, the real pair."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stepscope.analysis.cluster.comm_args import object_array
from stepscope.analysis.cluster.comm_events import CommEvents
from stepscope.analysis.cluster.results import LowBandwidthFinding
from stepscope.analysis.cluster.view import build
from stepscope.analysis.results import RankAnalysis
from stepscope.analysis.steps.results import CpuStep, IdleCauses, LaunchStats, StepBreakdown, StepStats
from stepscope.cli import main
from tests import synth

ROOT = Path(__file__).resolve().parents[2]
PAIR = ROOT / "tests" / "fixtures" / "traces" / "HolisticTraceAnalysis" / "tests" / "data" / "trace_filter"


def _step(step_ns: int, compute_ns: int, loader_ns: int = 0) -> StepBreakdown:
    import dataclasses

    fields = {f.name: 0 for f in dataclasses.fields(StepBreakdown)}
    fields.update(
        name="s",
        step_time_ns=step_ns,
        compute_ns=compute_ns,
        by_category_ns={},
        kernel_time_by_category_ns={},
        collectives=(),
        idle_causes=IdleCauses(*(0 for _ in dataclasses.fields(IdleCauses))),
        cpu=dataclasses.replace(CpuStep(*(0 for _ in dataclasses.fields(CpuStep))), dataloader_ns=loader_ns),
        window_source="device",
    )
    return StepBreakdown(**fields)


def _rank(rank: int, starts: list[int], durs: list[int], nbytes: int, steps: list[StepBreakdown]) -> RankAnalysis:
    n = len(starts)
    ev = CommEvents(
        np.array(["pg0"] * n, dtype=object),
        np.array(["all_reduce"] * n, dtype=object),
        np.arange(n),
        np.array(starts, dtype=np.int64),
        np.array(durs, dtype=np.int64),
        np.full(n, nbytes, np.int64),
        np.full(n, 4, np.int64),
        np.zeros(n, np.int64),
    )
    stats = StepStats(*(0 for _ in range(7)), flagged=())  # type: ignore[arg-type]
    launch = LaunchStats(*(0 for _ in range(len(LaunchStats.__dataclass_fields__))))  # type: ignore[arg-type]
    return RankAnalysis(
        rank=rank,
        device=None,
        path=f"r{rank}",
        step_source="test",
        steps=tuple(steps),
        step_stats=stats,
        top_kernels=(),
        top_cpu_ops=(),
        stream_idle=(),
        launch=launch,
        comm_events=ev,
    )


def test_instances_offsets_wait_transfer_bandwidth_by_hand() -> None:
    """4 ranks, 2 all-reduces of 100 MB. True clocks: rank r's clock runs ahead by 1000*r ns.
    Instance 0: arrivals (true) 0, 0, 0, 5000 ns; all end at true 15000 -> rank 3 (last) takes 10000.
    Instance 1: arrivals 100000 + (2000, 0, 0, 0); all end at 112000."""
    true_start = [[0, 0, 0, 5000], [102000, 100000, 100000, 100000]]
    true_end = [15000, 112000]
    ranks = []
    for r in range(4):
        off = 1000 * r
        starts = [true_start[k][r] + off for k in range(2)]
        durs = [true_end[k] - true_start[k][r] for k in range(2)]
        ranks.append(_rank(r, starts, durs, 100_000_000, [_step(200_000, 50_000)]))
    c = build(tuple(ranks), gpus_per_node=2, peak_intra_gbps=100.0, peak_inter_gbps=10.0)
    assert c is not None
    # offsets relative to the median end: true offsets 0,1000,2000,3000 minus their median 1500
    assert c.clock_offsets_ns == {0: -1500, 1: -500, 2: 500, 3: 1500}
    first, second = c.collectives
    assert first.transfer_ns == 10000 and first.last_rank == 3 and first.skew_ns == 5000
    assert {r: t.wait_ns for r, t in first.ranks.items()} == {0: 5000, 1: 5000, 2: 5000, 3: 0}
    assert second.transfer_ns == 10000 and second.last_rank == 0
    # algbw = 1e8 B / 10 us = 10,000 GB/s; busbw x 2(n-1)/n = 1.5 (group size 4)
    assert first.algbw_gbps == pytest.approx(1e8 / 10000)
    assert first.busbw_gbps == pytest.approx(1e8 / 10000 * 1.5)
    assert first.link == "inter" and first.peak_gbps == 10.0  # ranks 0-3 span 2 nodes of 2


def test_stragglers_by_cause_and_what_if_by_hand() -> None:
    """8 ranks; rank 5 computes 30 ms more per step, rank 2 spends 20 ms more in its data loader.
    Each collective: everyone waits for the slowest arrival (rank 5)."""
    ranks = []
    for r in range(8):
        comp = 100_000_000 + (30_000_000 if r == 5 else 0) + 100_000 * (r % 3)  # small natural spread
        loader = 1_000_000 + (20_000_000 if r == 2 else 0)
        busy = comp + loader
        slowest = 131_000_000 + 200_000  # rank 5's busy time
        starts = [busy, 1_000_000_000 + busy]
        durs = [slowest - busy + 5_000_000, slowest - busy + 5_000_000]
        steps = [_step(slowest + 5_000_000, comp, loader), _step(slowest + 5_000_000, comp, loader)]
        ranks.append(_rank(r, starts, durs, 64 << 20, steps))
    c = build(tuple(ranks))
    assert c is not None
    worst = {s.rank: s for s in c.stragglers if s.is_straggler}
    assert set(worst) == {5, 2}
    assert worst[5].cause == "compute" and worst[2].cause == "host: data loader"
    assert worst[5].excess_ns == pytest.approx(30_000_000, rel=0.01)
    assert worst[2].excess_ns == pytest.approx(20_000_000, rel=0.01)
    # busy = step - wait: rank 5 ~131.2 ms; next slowest rank 2 ~121.1 ms; median ~101.2 ms
    # -> fixing rank 5 saves 131.2 - 121.1 ~ 10.1 ms per step; fixing rank 2 alone saves nothing
    assert worst[5].what_if_saving_ns == pytest.approx(131_200_000 - 121_100_000, abs=200_000)
    assert worst[2].what_if_saving_ns == 0


@pytest.mark.slow
@pytest.mark.torch
def test_gloo_slow_compute_and_slow_loader_found_and_told_apart(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out_dir = tmp_path / "g"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "gen_gloo_traces.py"),
            str(out_dir),
            "--ranks",
            "3",
            "--slow-loader-rank",
            "1",
            "--loader-sleep-ms",
            "50",
            "--slow-compute-rank",
            "2",
            "--compute-sleep-ms",
            "80",
            "--port",
            str(synth.free_port()),
        ],
        check=True,
        timeout=600,
        capture_output=True,
    )
    out = tmp_path / "r.json"
    assert main(["analyze", str(out_dir), "--json", str(out), "--html", str(tmp_path / "r.html"), "-q"]) == 0
    c = json.loads(out.read_text())["cluster"]
    found = {s["rank"]: s for s in c["stragglers"] if s["is_straggler"]}
    assert set(found) == {1, 2}
    assert found[1]["cause"] == "host: data loader" and found[2]["cause"] == "compute"

    # the injected amounts as they actually happened (a sleep can overrun on a busy machine), read
    # straight from the raw JSON: per step, the custom op's time on rank 2, and rank 1's data-loader
    # time minus the other ranks'
    def per_step(rank: int, prefix: str) -> list[float]:
        ev = json.loads((out_dir / f"rank-{rank}.json").read_text())["traceEvents"]
        steps = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
        ops = [e for e in ev if str(e.get("name", "")).startswith(prefix) and e.get("ph") == "X"]
        return [sum(o["dur"] for o in ops if s["ts"] <= o["ts"] < s["ts"] + s["dur"]) * 1e3 for s in steps]

    injected_compute = float(np.median(per_step(2, "stepscope_test::busy")))
    loader = {r: float(np.median(per_step(r, "enumerate(DataLoader)"))) for r in (0, 1, 2)}
    injected_loader = loader[1] - float(np.median([loader[0], loader[2]]))
    assert (
        injected_compute >= 80e6 and injected_loader >= 48e6
    )  # the sleeps: 80 and 50 ms per step (large against noise)
    assert found[1]["excess_ns"] == pytest.approx(injected_loader, rel=0.10)
    assert found[2]["excess_ns"] == pytest.approx(injected_compute, rel=0.10)
    assert len(c["collectives"]) >= 3 and set(c["clock_offsets_ns"]) == {"0", "1", "2"}
    for x in c["collectives"]:
        assert min(t["wait_ns"] for t in x["ranks"].values()) == 0
    assert "Cluster (3 ranks)" in (tmp_path / "r.html").read_text()


def test_real_pair_matches_by_order_per_stream(tmp_path: Path) -> None:
    import stepscope

    out = tmp_path / "r.json"
    assert main(["analyze", str(PAIR), "--json", str(out), "-q"]) == 0
    c = json.loads(out.read_text())["cluster"]
    # independent: NCCL kernels per rank and stream, in time order, paired by position
    kern = {}
    for r in (0, 1):
        t = stepscope.load(str(PAIR / f"sampled_rank-{r}.json.gz")).events.to_pydict()
        rows = [
            (s, ts, d)
            for n, k, s, ts, d in zip(t["name"], t["kind"], t["stream"], t["ts_ns"], t["dur_ns"])
            if k == "kernel" and "nccl" in n.lower()
        ]
        kern[r] = {s: sorted((ts, d) for s2, ts, d in rows if s2 == s) for s in {x[0] for x in rows}}
    expected_wait = {0: 0, 1: 0}
    n_pairs = 0
    for s in kern[0]:
        for (_t0, d0), (_t1, d1) in zip(kern[0][s], kern[1][s]):
            n_pairs += 1
            expected_wait[0] += d0 - min(d0, d1)
            expected_wait[1] += d1 - min(d0, d1)
    assert len(c["collectives"]) == n_pairs == 10
    got = {0: 0, 1: 0}
    for x in c["collectives"]:
        for r, t in x["ranks"].items():
            got[int(r)] += t["wait_ns"]
    assert got == expected_wait


def test_critical_path_by_hand_and_perfetto_export(tmp_path: Path) -> None:
    """2 ranks, 1 step [0, 100): rank 0 computes [0, 40) then waits in the all-reduce [40, 100);
    rank 1 computes [0, 50), loads data [50, 70), arrives at 70; transfer 30 (rank 1 did not wait).
    Path: rank 1 local [0, 70) = 50 compute + 20 data loading, then communication [70, 100)."""
    import dataclasses

    from stepscope.report.perfetto import perfetto

    r0 = _rank(0, [40], [60], 1 << 20, [_step(100, 40)])
    r1 = _rank(1, [70], [30], 1 << 20, [_step(100, 50, 20)])
    z = np.zeros(1, np.int64)
    ev0 = dataclasses.replace(r0.comm_events, compute_iv=(z, np.array([40])), step_windows=(z, np.array([100])))  # type: ignore[type-var]
    ev1 = dataclasses.replace(
        r1.comm_events,
        compute_iv=(z, np.array([50])),
        loader_iv=(np.array([50]), np.array([70])),  # type: ignore[type-var]
        step_windows=(z, np.array([100])),
    )
    c = build((dataclasses.replace(r0, comm_events=ev0), dataclasses.replace(r1, comm_events=ev1)))
    assert c is not None and c.clock_offsets_ns == {0: 0, 1: 0}
    (p,) = c.critical_paths
    assert p.length_ns == 100
    assert p.by_kind_ns == {
        "compute": 50,
        "communication": 30,
        "data loading": 20,
        "CPU": 0,
        "launch overhead": 0,
        "sync wait": 0,
        "other idle": 0,
        "memcpy": 0,
    }
    assert p.by_rank_ns == {1: 70}
    trace = perfetto(c.critical_paths, list(c.collectives), [0, 1])
    marked = [e for e in trace["traceEvents"] if e.get("cat") == "critical_path" and e["ph"] == "X"]
    assert len(marked) == 4  # 2 segments, on the cluster track and on rank 1's own track
    waits = [e for e in trace["traceEvents"] if e.get("name") == "sync wait"]
    assert len(waits) == 1 and waits[0]["pid"] == 0 and waits[0]["dur"] == 30 / 1e3
    json.dumps(trace)


def test_slow_link_found_from_pair_groups() -> None:
    """8 ranks in 4 pair groups, 4 pair all-reduces of 16 MB each; the pair of ranks 2 and 3
    transfers 4x slower. Nobody is otherwise slow: ranks 2 and 3 are flagged as a link."""
    ranks = []
    for r in range(8):
        n = 4
        durs = [4_000_000 * (4 if r in (2, 3) else 1)] * n
        starts = [10_000_000 * k for k in range(n)]
        ev = CommEvents(
            np.array([f"pair{r // 2}"] * n, dtype=object),
            np.array(["all_reduce"] * n, dtype=object),
            np.arange(n),
            np.array(starts, np.int64),
            np.array(durs, np.int64),
            np.full(n, 16 << 20, np.int64),
            np.full(n, 2, np.int64),
            np.zeros(n, np.int64),
        )
        import dataclasses

        ranks.append(dataclasses.replace(_rank(r, [0], [1], 1, [_step(50_000_000, 30_000_000)]), comm_events=ev))
    c = build(tuple(ranks))
    assert c is not None
    link = {s.rank for s in c.stragglers if s.cause == "link" and s.is_straggler}
    assert link == {2, 3}


def test_comm_matrix_for_all_to_all_by_hand() -> None:
    """3 ranks, one all-to-all of 3 MB each, no split recorded: 1/3 to each member (the third that
    stays on the rank crosses no link), so 1 MB to each other rank."""
    ranks = []
    for r in range(3):
        ev = CommEvents(
            np.array(["ep"], dtype=object),
            np.array(["all_to_all"], dtype=object),
            np.zeros(1, np.int64),
            np.array([1000 + r], np.int64),
            np.array([500], np.int64),
            np.array([3_000_000], np.int64),
            np.array([3], np.int64),
            np.zeros(1, np.int64),
        )
        import dataclasses

        ranks.append(dataclasses.replace(_rank(r, [0], [1], 1, [_step(10_000, 5_000)]), comm_events=ev))
    c = build(tuple(ranks))
    assert c is not None
    m = c.comm_matrix["all_to_all"]
    assert m.ranks == (0, 1, 2)
    assert m.bytes == ((0, 1_000_000, 1_000_000), (1_000_000, 0, 1_000_000), (1_000_000, 1_000_000, 0))
    # recorded group ranks and splits: rank r sends its 3 MB as splits (1, 2, 3) x 0.5 MB over members 0, 1, 2
    import dataclasses

    rec = []
    for ra in ranks:
        ev = dataclasses.replace(ra.comm_events, members=object_array([(0, 1, 2)]), in_split=object_array([(1, 2, 3)]))
        rec.append(dataclasses.replace(ra, comm_events=ev))
    c2 = build(tuple(rec))
    assert c2 is not None
    m2 = c2.comm_matrix["all_to_all"]
    assert m2.bytes == ((0, 1_000_000, 1_500_000), (500_000, 0, 1_500_000), (500_000, 1_000_000, 0))
    assert "recorded In split size" in m2.assumption and c2.collectives[0].members == (0, 1, 2)


@pytest.mark.parametrize("portable", [False, True])
def test_recorded_group_ranks_and_splits_from_kineto_args(
    tmp_path: Path, portable: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two NCCL ranks (global ranks 4 and 9 of a larger job), one all-to-all each with its recorded
    args: 1,000 float32 elements, in splits [1, 3] -> rank 4 sends 750 * 4 B to rank 9; rank 9
    splits [2, 2] -> 500 * 4 B to rank 4. Both readers keep the args beside the table."""

    if portable:
        from stepscope.trace import kineto

        monkeypatch.setattr(kineto, "_fast", None)
    d = tmp_path / "ranks"
    d.mkdir()
    for rank, split in ((4, "[1, 3]"), (9, "[2, 2]")):
        args = {
            "Collective name": "all_to_all",
            "In msg nelems": 1000,
            "Out msg nelems": 1000,
            "Group size": 2,
            "dtype": "Float",
            "Process Group Name": "ep",
            "Process Group Ranks": "[4, 9]",
            "In split size": split,
            "Out split size": "[]",
        }
        ev = [synth.step("ProfilerStep#1", 0, 1000)]
        ev += synth.launch("sm90_xmma_gemm", 1, 10, 100)
        ev += synth.launch("ncclDevKernel_SendRecv", 120, 130 + (rank == 9) * 20, 200, stream=20, **args)
        synth.write(d / f"rank{rank}.json", ev, rank=rank)
    out = tmp_path / "r.json"
    assert main(["analyze", str(d), "--json", str(out), "-q"]) == 0
    c = json.loads(out.read_text())["cluster"]
    (x,) = c["collectives"]
    assert x["type"] == "all_to_all" and x["bytes"] == 4000 and set(x["ranks"]) == {"4", "9"}
    m = c["comm_matrix"]["all_to_all"]
    assert m["ranks"] == [4, 9] and m["bytes"] == [[0, 3000], [2000, 0]]
    assert "recorded Process Group Ranks" in m["assumption"] and "recorded In split size" in m["assumption"]


def test_local_critical_path_walks_the_dependency_graph(tmp_path: Path) -> None:
    """One rank, times in us. A launched at 10 runs [20, 120); B launched at 30 waits for A on the
    stream, runs [120, 220); the host syncs [40, 225) (returns 5 us after B ends), works until it
    launches C at 300, C runs [310, 410); the all-reduce K launched at 305 waits for C on the
    stream, runs [410, 500). Walk back from K to the step start (20): K waits for C (compute
    100), C for its launch (launch overhead 10), the host from the sync's return (CPU 75), the sync
    for B (sync wait 5), B for A on the stream (compute 100), A is at the start (compute 100)."""
    from stepscope.analysis.api import analyze
    from stepscope.analysis.cluster.critical_walk import KINDS

    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev += synth.launch("gemm_a", 10, 20, 100)
    ev += synth.launch("gemm_b", 30, 120, 100)
    ev.append(synth.cpu("cudaStreamSynchronize", 40, 185, cat="cuda_runtime"))
    ev += synth.launch("gemm_c", 300, 310, 100)
    ev += synth.launch("ncclDevKernel_AllReduce_Sum_f32", 305, 410, 90)
    f = synth.write(tmp_path / "rank0.json", ev, rank=0)
    (r,) = analyze([str(f)], workers=1).ranks
    ce = r.comm_events
    assert ce is not None and ce.size == 1 and ce.before is not None
    got = dict(zip(KINDS, (int(x) // 1000 for x in ce.before[0])))
    assert got == {
        "compute": 300,
        "data loading": 0,
        "CPU": 75,
        "launch overhead": 10,
        "sync wait": 5,
        "other idle": 0,
        "communication": 0,
        "memcpy": 0,
    }
    # the step's tail: from the all-reduce's end (500) to the step end (500): nothing
    assert int(ce.tail[0].sum()) == 0


def test_local_walks_on_real_traces_partition_their_stretch() -> None:
    """On real NCCL traces every walk's parts are >= 0 and add up to its stretch: from the
    previous collective's end (or the step start) to the collective's start."""
    from stepscope.analysis.api import analyze

    files = sorted(str(p) for p in PAIR.glob("*.json.gz")) + [
        str(ROOT / "examples" / "traces" / "a100_nccl_rank0.json.gz")
    ]
    for f in files:
        (r,) = analyze([f], workers=1).ranks
        ce = r.comm_events
        assert ce is not None and ce.before is not None and ce.size > 0
        assert (ce.before >= 0).all() and (ce.tail >= 0).all()
        last_end: dict[int, int] = {}
        for i in np.argsort(ce.start_ns, kind="stable"):
            st = int(ce.step[i])
            ws = int(ce.step_windows[0][st]) if st >= 0 else int(ce.start_ns[i])
            lo = last_end.get(st, ws)
            assert int(ce.before[i].sum()) == max(int(ce.start_ns[i]) - lo, 0), (f, i)
            last_end[st] = max(last_end.get(st, lo), int(ce.start_ns[i] + ce.dur_ns[i]))


def test_an_intra_node_collective_is_judged_against_the_measured_figure_for_its_type() -> None:
    """Two ranks in one node, all-reduces of 100 MB in 1 ms in groups recorded as 4 ranks (the
    helper's group size): algbw 100 GB/s, busbw x 2(4-1)/4 = 150 GB/s. Against a nominal 450 GB/s
    link that is 33% (flagged); against a measured all-reduce figure of 180 GB/s it is 83% (not
    flagged); a type without a measurement keeps the nominal peak."""
    ranks = tuple(
        _rank(r, [0, 5_000_000, 10_000_000, 15_000_000], [1_000_000] * 4, 100_000_000, [_step(20_000_000, 1_000_000)])
        for r in range(2)
    )
    nominal = build(ranks, gpus_per_node=8, peak_intra_gbps=450.0)
    measured = build(ranks, gpus_per_node=8, peak_intra_gbps=450.0, measured_intra_busbw={"all_reduce": 180.0})
    other = build(ranks, gpus_per_node=8, peak_intra_gbps=450.0, measured_intra_busbw={"all_gather": 180.0})
    assert nominal is not None and measured is not None and other is not None
    assert nominal.collectives[0].busbw_gbps == pytest.approx(150.0)
    assert measured.collectives[0].peak_gbps == 180.0 and other.collectives[0].peak_gbps == 450.0
    assert any(isinstance(f, LowBandwidthFinding) for f in nominal.findings)
    assert not any(isinstance(f, LowBandwidthFinding) for f in measured.findings)


def test_sync_wait_per_step_is_the_union_over_concurrent_instances() -> None:
    """DDP's two gradient buckets in flight together (gloo runs each on its own thread): rank 1
    arrives 40 us late at both, so rank 0 waits 40 us once, not 40 + 39 us. Rank 0 starts the
    buckets at 0 and 1 us, rank 1 at 40 us; all end at 45 us."""
    from stepscope.analysis.cluster.matching import Links, match

    r0 = _rank(0, [0, 1_000], [45_000, 44_000], 1 << 20, [_step(50_000, 5_000)])
    r1 = _rank(1, [40_000, 40_000], [5_000, 5_000], 1 << 20, [_step(50_000, 45_000)])
    m = match({0: r0.comm_events, 1: r1.comm_events}, Links())  # type: ignore[dict-item]
    assert m.offsets_ns == {0: 0, 1: 0}
    # waits: [0, 40) and [1, 40) us -> union 40 us
    assert m.wait_ns[(0, 0)] == 40_000 and m.wait_ns[(1, 0)] == 0
