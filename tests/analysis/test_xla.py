"""JAX/XLA: XSpace reader, XLA op categories, HLO reader and costs, the XLA view.

Expected values come from an independent protobuf wire walk (real GPU xplane), from hand
computation (HLO snippets, a hand-built TPU-style XSpace) or from the model's shapes (generated
CPU JAX profile)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stepscope.analysis.xla.hlo_cost import CostModel, global_shape, group_size, padding_waste
from stepscope.analysis.xla.summary import phase_of, scope_path
from stepscope.cli import main
from stepscope.trace.hlo import parse_hlo_text
from stepscope.trace.xplane import read_xplane
from stepscope.trace.xspace_pb import xspace_class

ROOT = Path(__file__).resolve().parents[2]
GPU_XPLANE = ROOT / "examples" / "traces" / "jax_gpu_te_fused_attn.xplane.pb"


# ---- an independent, minimal protobuf wire walker (no schema library) -------------------------
def _varint(b: bytes, i: int) -> tuple[int, int]:
    v = s = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return v, i


def _fields(b: bytes) -> list[tuple[int, Any]]:
    out, i = [], 0
    while i < len(b):
        tag, i = _varint(b, i)
        f, w = tag >> 3, tag & 7
        if w == 0:
            v, i = _varint(b, i)
        elif w == 2:
            n, i = _varint(b, i)
            v, i = b[i : i + n], i + n
        elif w == 1:
            v, i = b[i : i + 8], i + 8
        elif w == 5:
            v, i = b[i : i + 4], i + 4
        else:
            raise ValueError(w)
        out.append((f, v))
    return out


def test_real_gpu_xplane_matches_an_independent_wire_decode() -> None:
    data = GPU_XPLANE.read_bytes()
    planes = [v for f, v in _fields(data) if f == 1]
    gpu0 = next(p for p in planes if dict(_fields(p)).get(2) == b"/device:GPU:0")
    durs, names = [], []
    meta = {}
    for f, v in _fields(gpu0):
        if f == 4:  # map<int64, XEventMetadata>
            entry = dict(_fields(v))
            meta[entry[1]] = dict(_fields(entry[2])).get(2, b"").decode("utf-8", "replace")
    for f, line in _fields(gpu0):
        if f != 3:
            continue
        for g, ev in _fields(line):
            if g == 4:
                e = dict(_fields(ev))
                durs.append(e.get(3, 0) // 1000)
                names.append(meta[e.get(1, 0)])
    fr = read_xplane(GPU_XPLANE)
    t = fr.table.to_pydict()
    dev_rows = [
        i for i, (k, d) in enumerate(zip(t["kind"], t["device"])) if d == 0 and k in ("kernel", "memcpy", "memset")
    ]
    assert len(dev_rows) == len(durs) == 150
    assert sum(t["dur_ns"][i] for i in dev_rows) == sum(durs)
    assert sorted(t["name"][i] for i in dev_rows) == sorted(names)
    assert fr.header["hostnames"] == ["934987a2fc2f"] and not fr.truncated


def test_real_gpu_xplane_through_analyze(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["analyze", str(GPU_XPLANE), "--json", str(out), "-q"]) == 0
    r = json.loads(out.read_text())["ranks"][0]
    assert r["launch"]["matched"] == 150  # every kernel joined to its hipLaunch by correlation id
    x = r["extras"]["xla"]
    cats = {c["label"]: c for c in x["by_category"]}
    assert "attention" in cats and "gemm" in cats  # TransformerEngine fused attention, gemm_fusion_dot
    # the fused-attention kernels (op te_fused_attn_*) are all attention, by name stack and op
    top = {o["op"]: o for o in x["top_ops"]}
    assert all(o["category"] == "attention" for n, o in top.items() if n.startswith("te_fused_attn"))
    phases = {p["label"]: p["time_ns"] for p in x["phases"]}
    assert phases.get("backward", 0) > 0 and phases.get("forward", 0) > 0  # transpose(jvp()) vs jvp()
    # the device plane's own stats: AMD, compute capability 9.5 (gfx950), 256 CUs, 288 GiB -> MI355X
    assert r["hardware"]["name"] == "MI355X" and r["hardware"]["detected_from"] == "trace"


def test_jitted_call_as_step_marker_on_the_real_gpu_xplane(tmp_path: Path) -> None:
    """No Steps line here: the jitted call is the step. JAX records PjitFunction(loss_fn) twice per
    call, one inside the other; each call is one step (5 executions, as PJRT_LoadedExecutable_Execute)."""
    out = tmp_path / "r.json"
    assert main(["analyze", str(GPU_XPLANE), "--step-marker", "PjitFunction(loss_fn)", "--json", str(out), "-q"]) == 0
    steps = json.loads(out.read_text())["ranks"][0]["steps"]
    assert len(steps) == 5 and all(s["compute_ns"] > 0 for s in steps)


def test_truncated_and_garbage_xplane(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = GPU_XPLANE.read_bytes()
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(data[: int(len(data) * 0.95)])
    fr = read_xplane(cut)
    assert fr.truncated and "complete plane" in fr.note
    assert (
        sum(1 for k, d in zip(fr.table["kind"].to_pylist(), fr.table["device"].to_pylist()) if k == "kernel" and d == 0)
        == 150
    )
    assert main(["analyze", str(cut), "-q"]) == 0
    assert "truncated" in capsys.readouterr().err
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f garbage")
    assert main(["analyze", str(bad), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "XSpace" in err[0]


def test_mangled_utf8_in_names_is_replaced_not_fatal(tmp_path: Path) -> None:
    data = bytearray(GPU_XPLANE.read_bytes())
    i = data.find(b"gemm_fusion_dot.kd")
    data[i : i + 4] = b"\xff\xfe\xfa\xfb"
    p = tmp_path / "m.xplane.pb"
    p.write_bytes(bytes(data))
    names = set(read_xplane(p).table["name"].to_pylist())
    assert any("\ufffd" in n for n in names if n)


# ---- a hand-built TPU-style XSpace: async collectives, name stacks, XLA cost stats ------------
def _tpu_space(path: Path, evil: str | None = None) -> None:
    X = xspace_class()
    s = X()
    s.hostnames.append(b"tpu-host-0")
    p = s.planes.add(id=1, name=b"/device:TPU:0")
    stat_names = {1: b"hlo_op", 2: b"tf_op", 3: b"flops", 4: b"bytes_accessed", 5: b"hlo_category"}
    for k, v in stat_names.items():
        p.stat_metadata[k].id = k
        p.stat_metadata[k].name = v
    # (name, tf_op, category, flops, bytes, offset_us, dur_us)
    ops = [
        ("fusion.1", "jit(step)/jvp(mlp)/dot_general", "convolution fusion", 2_000_000, 100_000, 0, 10),
        ("all-reduce-start.1", "jit(step)/grads/psum", "all-reduce", 0, 0, 10, 1),
        (
            "fusion.2",
            "jit(step)/transpose(jvp(mlp))/checkpoint/rematted_computation/dot_general",
            "convolution fusion",
            2_000_000,
            100_000,
            11,
            10,
        ),
        ("fusion.3", "jit(step)/transpose(jvp(mlp))/dot_general", "convolution fusion", 4_000_000, 200_000, 21, 20),
        ("all-reduce-done.1", "jit(step)/grads/psum", "all-reduce", 0, 0, 41, 5),
        ("copy.4", "jit(step)/transpose(jvp(mlp))/transpose", "data formatting", 0, 50_000, 46, 4),
    ]
    if evil:
        ops.append((evil, f"jit(step)/jvp({evil})/custom-call", "custom-call", 0, 0, 50, 2))
    meta_id = {}
    for n, (name, *_rest) in enumerate(ops, 1):
        md = p.event_metadata[n]
        md.id, md.name = n, name.encode()
        meta_id[name] = n
    steps = p.lines.add(id=1, name=b"Steps", timestamp_ns=1_000)
    steps.events.add(metadata_id=99, offset_ps=0, duration_ps=60_000_000)  # step "7", 60 us
    p.event_metadata[99].id, p.event_metadata[99].name = 99, b"7"
    line = p.lines.add(id=2, name=b"XLA Ops", timestamp_ns=1_000)
    for name, tf_op, cat, flops, nbytes, off_us, dur_us in ops:
        e = line.events.add(metadata_id=meta_id[name], offset_ps=off_us * 1_000_000, duration_ps=dur_us * 1_000_000)
        for sid, val in ((1, name), (2, tf_op), (5, cat)):
            st = e.stats.add(metadata_id=sid)
            st.str_value = val.encode()
        for sid, num in ((3, flops), (4, nbytes)):
            st = e.stats.add(metadata_id=sid)
            st.int64_value = num
    path.write_bytes(s.SerializeToString())


def test_hand_built_tpu_xspace_xla_view_by_hand(tmp_path: Path) -> None:
    f = tmp_path / "tpu-host-0.xplane.pb"
    _tpu_space(f)
    out = tmp_path / "r.json"
    assert main(["analyze", str(f), "--json", str(out), "-q", "--hardware", "tpu-v5p"]) == 0
    r = json.loads(out.read_text())["ranks"][0]
    assert [s["name"] for s in r["steps"]] == ["XLAStep#7"]
    step = r["steps"][0]
    # as for PyTorch, a step's window is its device work: first op start to last op end (0-50 us)
    assert step["step_time_ns"] == 50_000
    x = r["extras"]["xla"]
    assert x["op_time_ns"] == 50_000  # 10 + 1 + 10 + 20 + 5 + 4 us
    assert x["async_stall_ns"] == 5_000  # all-reduce-done
    cats = {c["label"]: c["time_ns"] for c in x["by_category"]}
    assert cats == {"gemm": 40_000, "comm:all_reduce": 6_000, "data_formatting": 4_000}
    ph = {c["label"]: c["time_ns"] for c in x["phases"]}
    # the gradient all-reduce (grads/psum, 1 + 5 us) is outside autodiff with no optimizer name: forward
    assert ph == {"forward": 16_000, "recompute": 10_000, "backward": 24_000}
    assert x["recompute_share_of_backward"] == pytest.approx(10 / 34)
    scopes = {c["label"]: c["time_ns"] for c in x["by_scope"]}
    assert scopes == {"mlp": 44_000, "grads": 6_000}
    top = {o["op"]: o for o in x["top_ops"]}
    # fusion.3: 4 MFLOP in 20 us = 0.2 TFLOP/s; intensity 20 FLOP/B; v5p ridge ~ 459e12/2765e9 = 166 -> memory bound
    assert top["fusion.3"]["achieved_tflops"] == pytest.approx(4e6 / 20e-6 / 1e12)
    assert top["fusion.3"]["intensity_flops_per_byte"] == pytest.approx(20.0)
    assert top["fusion.3"]["bound"] == "memory"


def test_xla_html_escapes_names_from_the_trace(tmp_path: Path) -> None:
    evil = "<img src=x onerror=alert(1)>"
    f = tmp_path / "evil.xplane.pb"
    _tpu_space(f, evil=evil)
    out = tmp_path / "r.html"
    assert main(["analyze", str(f), "--html", str(out), "-q"]) == 0
    text = out.read_text()
    assert "XLA ops" in text and evil not in text and "&lt;img src=x onerror=alert(1)&gt;" in text


# ---- HLO text: parse, FLOPs, bytes, padding, global shapes (hand-computed) ---------------------
HLO = """HloModule m, entry_computation_layout={(bf16[8,128]{1,0})->bf16[8,256]{1,0}}

%fused_computation (param_0: bf16[8,128], param_1: bf16[128,256]) -> bf16[8,256] {
  %param_0 = bf16[8,128]{1,0} parameter(0)
  %param_1 = bf16[128,256]{1,0} parameter(1)
  ROOT %dot.1 = bf16[8,256]{1,0} dot(bf16[8,128]{1,0} %param_0, bf16[128,256]{1,0} %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (p0: bf16[8,128], p1: bf16[128,256]) -> bf16[8,256] {
  %p0 = bf16[8,128]{1,0:T(8,128)(2,1)} parameter(0), sharding={devices=[4,1]<=[4]}
  %p1 = bf16[100,200]{1,0:T(8,128)(2,1)S(1)} parameter(1)
  %x = f32[1,32,32,8]{3,2,1,0} parameter(2)
  %k = f32[3,3,8,16]{3,2,1,0} parameter(3)
  %p2 = f32[16,128]{1,0} parameter(4)
  %p3 = f32[64,128]{1,0} parameter(5)
  %fusion.1 = bf16[8,256]{1,0} fusion(%p0, %p1), kind=kOutput, calls=%fused_computation, metadata={op_name="jit(f)/jvp(mlp)/dot_general" source_file="model.py" source_line=12}
  %conv = f32[1,30,30,16]{3,2,1,0} convolution(f32[1,32,32,8]{3,2,1,0} %x, f32[3,3,8,16]{3,2,1,0} %k), window={size=3x3}, dim_labels=b01f_01io->b01f
  %ag = f32[64,128]{1,0} all-gather(f32[16,128]{1,0} %p2), replica_groups=[2,4]<=[8], dimensions={0}
  %rs = f32[16,128]{1,0} reduce-scatter(f32[64,128]{1,0} %p3), replica_groups={{0,1,2,3}}, dimensions={0}, to_apply=%add
  ROOT %add.2 = bf16[8,256]{1,0} add(%fusion.1, %fusion.1)
}
"""


def test_hlo_costs_by_hand() -> None:
    m = parse_hlo_text(HLO)
    assert m.name == "m" and m.entry is not None and m.entry.name == "main"
    ins = m.instructions()
    cm = CostModel(m)
    fusion = cm.cost(ins["fusion.1"])
    assert fusion.flops == 2 * 8 * 256 * 128  # dot inside the fusion
    assert fusion.bytes_accessed == 8 * 128 * 2 + 100 * 200 * 2 + 8 * 256 * 2  # operands + output, bf16
    assert fusion.op_class == "convolution fusion:kOutput"
    assert ins["fusion.1"].op_name == "jit(f)/jvp(mlp)/dot_general" and ins["fusion.1"].source == "model.py:12"
    assert cm.cost(ins["conv"]).flops == 2 * (30 * 30 * 16) * (3 * 3 * 8)
    add = cm.cost(ins["add.2"])
    assert add.flops == 8 * 256 and add.bytes_accessed == 3 * 8 * 256 * 2
    p1 = ins["p1"].shapes[0]
    assert p1.tiles == ((8, 128), (2, 1)) and p1.memory_space == 1 and p1.minor_to_major == (1, 0)
    assert padding_waste(p1) == pytest.approx(1 - (100 * 200) / (104 * 256))  # 100 -> 104 (x8), 200 -> 256 (x128)
    assert padding_waste(ins["p0"].shapes[0]) == 0.0
    assert global_shape(ins["p0"]) == "bf16[32,128]"  # 4 shards along dim 0
    assert group_size("[2,4]<=[8]") == 4 and group_size("{{0,1,2,3},{4,5,6,7}}") == 4
    assert global_shape(ins["ag"]) == "f32[64,128]"
    assert global_shape(ins["rs"]) == "f32[64,128]"  # 16 x 4 ranks along dim 0
    assert cm.cost(ins["ag"]).flops == 0


def test_hlo_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "m.hlo.txt"
    f.write_text(HLO)
    assert main(["hlo", str(f), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in doc["modules"][0]["instructions"]}
    assert "dot.1" not in rows and rows["fusion.1"]["flops"] == 2 * 8 * 256 * 128  # fused dot folded into its fusion
    assert rows["fusion.1"]["kind"] == "kOutput" and rows["ag"]["replica_groups"] == "[2,4]<=[8]"
    assert main(["hlo", str(f)]) == 0
    assert "fusion.1" in capsys.readouterr().out
    (tmp_path / "x.txt").write_text("not hlo at all\n")
    assert main(["hlo", str(tmp_path / "x.txt")]) == 2


def test_scope_paths_and_phases() -> None:
    s = "jit(train_step)/shard_map/transpose(jvp(layers))/while/body/closed_call/checkpoint/rematted_computation/attention/bst,btd->bsd/dot_general"
    assert scope_path(s) == "layers/attention" and phase_of(s) == "recompute"
    assert scope_path("jit(f)/transpose(jvp(moe))/(experts/dot:router/dot)") == "moe/experts+router"
    assert phase_of("jit(f)/jvp(mlp)/dot_general") == "forward" and phase_of("jit(f)/optimizer/sub") == "optimizer"
    assert phase_of("jit(f)/grads/psum") == "forward" and phase_of(None) == "forward"


# ---- a real JAX profile generated on CPU (4 devices, shard_map psum, scan, remat) -------------
@pytest.fixture(scope="module")
def jax_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("jax")
    out = tmp_path_factory.mktemp("jax")
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4", "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_jax_profile.py"), str(out), "--steps", "3"],
        check=True,
        timeout=600,
        env=env,
    )
    return out


@pytest.mark.slow
@pytest.mark.jax
def test_generated_jax_profile_with_hlo(jax_profile: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "analyze",
                str(jax_profile),
                "--hlo",
                str(jax_profile / "train_step.hlo.txt"),
                "--json",
                str(out),
                "--html",
                str(tmp_path / "r.html"),
                "-q",
            ]
        )
        == 0
    )
    doc = json.loads(out.read_text())
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3]  # one rank per CPU device of the host
    for r in doc["ranks"]:
        assert [s["name"] for s in r["steps"]] == ["XLAStep#0", "XLAStep#1", "XLAStep#2"]
        for s in r["steps"]:
            assert s["compute_ns"] + s["exposed_comm_ns"] + s["exposed_memcpy_ns"] + s["idle_ns"] == s["step_time_ns"]
        assert r["extras"]["xla"]["devices"] == 1
    # the gradient all-reduces are matched across the 4 devices by the cluster view
    coll = doc["cluster"]["collectives"]
    assert any(c["type"] == "all_reduce" and len(c["ranks"]) == 4 for c in coll)
    r = doc["ranks"][0]
    x = r["extras"]["xla"]
    # name stacks by op count, which does not depend on timing: the program's unscoped ops (copies,
    # parameter moves) are under a tenth of its ops. The time-weighted ratios are ~0.997 on an idle
    # machine, but one preempted tiny op on a loaded CPU moved one to 0.93 in a CI run alongside
    # another test run, so they only get a sanity bound
    ops = sum(c["count"] for c in x["by_category"])
    unscoped = sum(s["count"] for s in x["by_scope"] if s["label"] == "(no scope)")
    assert ops > 0 and unscoped < 0.1 * ops
    assert x["scope_coverage_ratio"] > 0.5 and x["flops_coverage_ratio"] > 0.5
    cats = {c["label"] for c in x["by_category"]}
    assert {"gemm", "comm:all_reduce"} <= cats
    phases = {p["label"]: p["time_ns"] for p in x["phases"]}
    assert phases["recompute"] > 0 and phases["forward"] > 0 and phases["backward"] > 0
    assert any(lp["label"].startswith("while") and lp["time_ns"] > 0 for lp in x["loops"])  # the scan over layers
    leaves = {c["label"] for c in x["by_scope_leaf"]}
    assert {"attention", "mlp", "head", "embed"} <= leaves
    # forward MLP matmuls: per device 4 sequences x 32 tokens = 128 rows; [128,64] x [64,256]
    doc = subprocess.run(
        [sys.executable, "-m", "stepscope.cli", "hlo", str(jax_profile / "train_step.hlo.txt"), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = json.loads(doc.stdout)["modules"][0]["instructions"]
    mlp_fwd = [
        r
        for r in rows
        if (r["op_name"] or "").endswith("jvp(layers)/while/body/closed_call/mlp/dot_general")
        and "transpose" not in (r["op_name"] or "")
        and r["flops"] > 0
    ]
    assert mlp_fwd and all(r2["flops"] == 2 * 128 * 64 * 256 for r2 in mlp_fwd)
    assert "XLA ops" in (tmp_path / "r.html").read_text()
    from stepscope.trace.xplane import _fast

    if _fast is not None:  # the C scanner and the protobuf runtime agree on a real CPU profile too
        f = next(jax_profile.rglob("*.xplane.pb"))
        a, b = read_xplane(f), read_xplane(f, force_portable=True)
        assert all(a.table[c].to_pylist() == b.table[c].to_pylist() for c in a.table.column_names)


# ---- nsys-jax archives: the same kind of JAX job seen through Nsight Systems ------------------
NSYS_JAX = ROOT / "tests" / "fixtures" / "traces" / "JAX-Toolbox" / ".github" / "workflows" / "nsys-jax" / "test_data"


def test_nsys_jax_archives_as_ranks(tmp_path: Path) -> None:
    import io
    import zipfile

    import pyarrow.parquet as pq

    out = tmp_path / "r.json"
    assert main(["analyze", str(NSYS_JAX), "--json", str(out), "-q"]) == 0
    ranks = {r["rank"]: r for r in json.loads(out.read_text())["ranks"]}
    assert set(ranks) == {0, 1, 2, 3}  # from "procN" in the file names
    for r in ranks.values():
        assert len(r["steps"]) == 5  # executions of pjit__wrapped_step_fn, the module with the most GPU time
        for s in r["steps"]:
            assert s["compute_ns"] + s["exposed_comm_ns"] + s["exposed_memcpy_ns"] + s["idle_ns"] == s["step_time_ns"]
        cats = {c["label"] for c in r["extras"]["xla"]["by_category"]}
        assert "comm:all_reduce" in cats and "gemm" in cats
    # independent: leaf XLA thunks of process 0 straight from the Parquet file, inside the 5 step modules
    with zipfile.ZipFile(NSYS_JAX / "pax_fsdp4_4proc_proc0.zip") as z:
        rows = pq.read_table(io.BytesIO(z.read("nvtx_gpu_proj_trace/trace.parquet"))).to_pylist()
    by_id = {r["RangeId"]: r for r in rows if r["RangeId"] is not None}
    steps = [r for r in rows if (r["Name"] or "").startswith("TSL:XlaModule:#hlo_module=pjit__wrapped_step_fn,")]
    assert len(steps) == 5
    thunks = [
        r
        for r in rows
        if (r["Name"] or "").startswith("TSL:Thunk:")
        and not ((by_id.get(r["ParentId"]) or {}).get("Name") or "").startswith("TSL:Thunk:")
        and (by_id.get(r["ParentId"]) or {})
        .get("Name", "")
        .startswith("TSL:XlaModule:#hlo_module=pjit__wrapped_step_fn,")
    ]
    x = ranks[0]["extras"]["xla"]
    assert x["op_time_ns"] == sum(r["Projected Duration"] for r in thunks)


def test_c_scanner_and_protobuf_runtime_give_the_same_table(tmp_path: Path) -> None:
    from stepscope.trace import xplane

    if xplane._fast is None:
        pytest.skip("C extension not built")
    tpu = tmp_path / "tpu.xplane.pb"
    _tpu_space(tpu)
    cut = tmp_path / "cut.xplane.pb"
    data = GPU_XPLANE.read_bytes()
    cut.write_bytes(data[: int(len(data) * 0.95)])
    for f in (GPU_XPLANE, tpu, cut):
        for include_python in (False, True):
            a = read_xplane(f, include_python=include_python)
            b = read_xplane(f, include_python=include_python, force_portable=True)
            assert a.table.num_rows == b.table.num_rows > 0
            assert a.truncated == b.truncated and a.header["deviceProperties"] == b.header["deviceProperties"]
            for col in a.table.column_names:
                assert a.table[col].to_pylist() == b.table[col].to_pylist(), (f.name, col)
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f garbage")
    for portable in (False, True):
        with pytest.raises(Exception, match="XSpace"):
            read_xplane(bad, force_portable=portable)
