"""Roofline, MFU and hardware detection on synthetic traces with hand-computed answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import stepscope
from stepscope.analysis.api import analyze
from stepscope.analysis.config import AnalyzeConfig
from stepscope.catalog.hardware import by_name, detect
from stepscope.catalog.model_flops import from_hf_config
from stepscope.cli import main
from stepscope.errors import ConfigError

from .. import synth

US = 1000
BF = "c10::BFloat16"


def _mm_trace(tmp_path: Path, device: str = "NVIDIA H100 80GB HBM3") -> Path:
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    # aten::mm 1024^3 in bf16 (External id 5) launches one 10 us kernel
    ev.append(
        synth.cpu(
            "aten::mm", 5, 20, **{"External id": 5, "Input Dims": [[1024, 1024], [1024, 1024]], "Input type": [BF, BF]}
        )
    )
    ev += synth.launch("sm90_xmma_gemm_bf16bf16", 6, 100, 10, ext=5)
    # aten::add (External id 6) on [1024, 1024] bf16 launches a 20 us kernel
    ev.append(
        synth.cpu(
            "aten::add",
            30,
            10,
            **{"External id": 6, "Input Dims": [[1024, 1024], [1024, 1024], []], "Input type": [BF, BF, "Scalar"]},
        )
    )
    ev += synth.launch("vectorized_elementwise_kernel", 31, 120, 20, ext=6)
    # a kernel whose op has no shapes (External id 7): 10 us not covered
    ev.append(synth.cpu("aten::custom_thing", 40, 5, **{"External id": 7}))
    ev += synth.launch("custom_kernel", 41, 150, 10, ext=7)
    p = synth.write(tmp_path / "t.json", ev)
    doc = json.loads(p.read_text())
    doc["deviceProperties"] = [{"id": 0, "name": device}]
    p.write_text(json.dumps(doc))
    return p


def test_roofline_groups_by_hand(tmp_path: Path) -> None:
    r = analyze(stepscope.load(_mm_trace(tmp_path)), AnalyzeConfig(model_flops_per_step=1e9)).ranks[0]
    roof = r.roofline
    assert roof.hardware.name == "H100-SXM" and roof.hardware.peak_tflops == pytest.approx(989.4)
    assert roof.coverage_ratio == pytest.approx(30 / 40)  # mm + add kernels of 40 us kernel time
    g = {x.name: x for x in roof.groups}
    mm = g["aten::mm"]
    flops = 2 * 1024**3
    assert mm.flops == flops and mm.bytes == 3 * 1024 * 1024 * 2
    assert mm.achieved_tflops == pytest.approx(flops / 10e-6 / 1e12)  # 214.7
    assert mm.intensity == pytest.approx(flops / (3 * 1024 * 1024 * 2))  # 341.3 >= ridge 989.4/3.35 = 295.3
    assert mm.bound == "compute"
    roof_ns = flops / 989.4e12 * 1e9  # 2.17 us
    assert mm.roofline_ns == round(roof_ns) and mm.time_lost_ns == 10 * US - round(roof_ns)
    assert mm.efficiency == pytest.approx(round(roof_ns) / 10_000)
    add = g["aten::add"]
    n = 1024 * 1024
    assert add.flops == n and add.bytes == 3 * n * 2
    assert add.bound == "memory"  # intensity 1/6 flop/byte
    assert add.roofline_ns == round(3 * n * 2 / 3350e9 * 1e9)  # 1.88 us at 3.35 TB/s
    assert g["aten::custom_thing"].bound == "unknown"
    # ordering: the biggest time lost first (add loses 18.1 us, mm 7.8 us)
    assert [x.name for x in roof.groups][:2] == ["aten::add", "aten::mm"]
    (sf,) = roof.steps
    step_s = r.steps[0].step_time_ns / 1e9  # window [100, 160) us
    assert r.steps[0].step_time_ns == 60 * US
    assert sf.mfu == pytest.approx(1e9 / (step_s * 989.4e12))
    assert sf.hfu == pytest.approx((flops + n) / (step_s * 989.4e12))
    assert r.phases[0].recompute_ns == 0


def test_latency_bound_small_ops(tmp_path: Path) -> None:
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev.append(
        synth.cpu("aten::mm", 5, 20, **{"External id": 5, "Input Dims": [[8, 8], [8, 8]], "Input type": [BF, BF]})
    )
    ev += synth.launch("gemm_small", 6, 100, 3, ext=5)
    p = synth.write(tmp_path / "t.json", ev)
    r = analyze(stepscope.load(p), AnalyzeConfig(hardware="A100-SXM-80GB")).ranks[0]
    assert r.roofline.hardware.detected_from == "--hardware"
    assert r.roofline.groups[0].bound == "latency"


def test_unknown_device_says_so(tmp_path: Path) -> None:
    a = analyze(stepscope.load(_mm_trace(tmp_path, device="AMD Radeon Graphics")))
    assert a.ranks[0].roofline.hardware is None
    assert any("not in the hardware catalog" in w and "--hardware" in w for w in a.warnings)
    assert a.ranks[0].roofline.steps[0].mfu is None


def test_hardware_catalog_detection_and_user_file(tmp_path: Path) -> None:
    assert detect("NVIDIA A100-SXM4-80GB").name == "A100-SXM-80GB"
    assert detect("Tesla V100-SXM2-32GB").name == "V100-SXM2"
    assert detect("AMD Instinct MI300X VF").name == "MI300X"
    assert detect("") is None and detect(None) is None
    f = tmp_path / "hw.yaml"
    f.write_text("devices:\n  - {name: MyChip, match: 'mychip', peak_tflops: {bf16: 100}, hbm_gbps: 1000}\n")
    assert detect("ACME MyChip v2", str(f)).name == "MyChip"
    assert by_name("mychip", str(f)).peak_flops("bf16") == 100e12
    with pytest.raises(ConfigError):
        by_name("no-such-device")


def test_model_flops_from_hf_config_llama3_8b(tmp_path: Path) -> None:
    cfg = {
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "hidden_act": "silu",
        "model_type": "llama",
    }
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    m = from_hf_config(p)
    # per layer: attention 2*4096*4096 + 2*4096*1024, SwiGLU 3*4096*14336; plus the LM head
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336
    n = 32 * per_layer + 4096 * 128256
    assert m.matmul_params_per_token() == n  # 7.50e9: Llama 3 8B without the embedding table
    assert m.flops_per_token(8192) == 6 * n + 12 * 32 * 8192 * 32 * 128 * 0.5


def test_moe_config(tmp_path: Path) -> None:
    cfg = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 256,
        "vocab_size": 100,
        "hidden_act": "silu",
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
    }
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    m = from_hf_config(p)
    attn = 4 * 64 * 64
    moe = 3 * 64 * 256 * 2 + 64 * 8
    assert m.matmul_params_per_token() == 2 * (attn + moe) + 64 * 100


def test_cli_mfu_from_hf_config_and_json_contract(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "vocab_size": 100,
                "hidden_act": "silu",
            }
        )
    )
    out = tmp_path / "r.json"
    rc = main(
        [
            "analyze",
            str(_mm_trace(tmp_path)),
            "--hf-config",
            str(cfg),
            "--tokens-per-step",
            "1000",
            "--seq-len",
            "100",
            "--json",
            str(out),
            "-q",
        ]
    )
    assert rc == 0
    doc = json.loads(out.read_text())
    (r,) = doc["ranks"]
    assert r["hardware"]["name"] == "H100-SXM"
    assert {
        "name",
        "signature",
        "count",
        "dur_ns",
        "flops",
        "bytes",
        "achieved_tflops",
        "achieved_gbps",
        "intensity",
        "efficiency",
        "bound",
    } <= set(r["roofline"][0])
    m = from_hf_config(cfg)
    step = r["steps"][0]
    assert step["mfu"] == pytest.approx(m.flops_per_token(100) * 1000 / (60e-6 * 989.4e12))
    assert "hfu" in step and "recompute_ns" in step
    assert main(["analyze", str(_mm_trace(tmp_path)), "--hf-config", str(cfg), "-q"]) == 2  # needs tokens and seq len


def test_cli_mfu_from_a_catalog_model_name(tmp_path: Path) -> None:
    """`analyze --model llama3-8b` takes the model from the catalog, as `plan --model` does: the same
    FLOPs as its shape written out as a config.json (4096 wide, 32 layers, GQA 8 of 32 heads,
    SwiGLU 14336, vocabulary 128256)."""
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "hidden_size": 4096,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "intermediate_size": 14336,
                "vocab_size": 128256,
                "hidden_act": "silu",
            }
        )
    )
    docs = []
    for model in ("llama3-8b", str(cfg)):
        out = tmp_path / "r.json"
        assert (
            main(
                [
                    "analyze",
                    str(_mm_trace(tmp_path)),
                    "--model",
                    model,
                    "--tokens-per-step",
                    "10",
                    "--seq-len",
                    "10",
                    "--json",
                    str(out),
                    "-q",
                ]
            )
            == 0
        )
        docs.append(json.loads(out.read_text())["ranks"][0]["steps"][0]["mfu"])
    assert docs[0] == docs[1] == pytest.approx(from_hf_config(cfg).flops_per_token(10) * 10 / (60e-6 * 989.4e12))


@pytest.mark.parametrize(
    "mfu, band, figures",
    [
        (
            0.25,
            "<30%",
            [
                "exposed_comm_ns / step_time_ns",
                "cpu.dataloader_ns / step_time_ns",
                "idle_causes.host_bound_ns / step_time_ns",
                "roofline memory/latency-bound dur_ns / kernel time",
            ],
        ),
        (0.35, "30-40%", ["overlapped_comm_ns / comm_ns", "idle_ns / step_time_ns"]),
        (0.45, "40-50%", ["recompute_ns / step_time_ns", "roofline[0].time_lost_ns / step_time_ns"]),
        (0.60, ">50%", []),
        (2.50, ">100%", ["mfu"]),  # impossible: the FLOPs given are wrong, and it says so
    ],
)
def test_mfu_diagnosis_tree(tmp_path: Path, mfu: float, band: str, figures: list[str]) -> None:
    flops = mfu * 60e-6 * 989.4e12  # the step window is 60 us on an H100 (989.4 TFLOP/s bf16)
    r = analyze(stepscope.load(_mm_trace(tmp_path)), AnalyzeConfig(model_flops_per_step=flops)).ranks[0]
    d = r.mfu_diagnosis
    assert d.mfu == pytest.approx(mfu) and d.band == band
    assert [c.figure for c in d.checks] == figures
    if band == "<30%":
        assert d.checks[3].value == pytest.approx(20 / 40) and not d.checks[3].ok  # the 20 us add of 40 us kernel time
    if band == ">100%":
        assert d.verdict.startswith("impossible") and not d.checks[0].ok
    if band == "30-40%":
        idle = r.steps[0].idle_ns / r.steps[0].step_time_ns  # [110, 120) and [140, 150): 20 of 60 us
        assert d.checks[1].value == pytest.approx(idle) and not d.checks[1].ok
        assert d.checks[0].ok  # no communication: nothing to overlap


def test_scopes_modules_and_annotations(tmp_path: Path) -> None:
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev.append(synth.cpu("nn.Module: Attention_0", 0, 100, cat="python_function"))
    ev.append(synth.cpu("nn.Module: Linear_0", 10, 40, cat="python_function"))
    ev.append(
        synth.cpu("aten::mm", 15, 20, **{"External id": 5, "Input Dims": [[64, 64], [64, 64]], "Input type": [BF, BF]})
    )
    ev += synth.launch("gemm_a", 20, 200, 30, ext=5)  # inside Linear_0 and Attention_0
    ev.append(synth.cpu("nn.Module: Linear_1", 300, 40, cat="python_function"))
    ev += synth.launch("gemm_b", 310, 400, 20)  # inside Linear_1 only
    ev.append(synth.cpu("my_region", 500, 100, cat="user_annotation"))
    ev += synth.launch("elementwise_c", 510, 600, 5)
    r = analyze(stepscope.load(synth.write(tmp_path / "t.json", ev))).ranks[0]
    sc = {s.name: s for s in r.scopes}
    assert (sc["Linear"].instances, sc["Linear"].kernels, sc["Linear"].kernel_ns) == (2, 2, 50 * US)
    assert (sc["Attention"].kernels, sc["Attention"].kernel_ns, sc["Attention"].kind) == (1, 30 * US, "module")
    assert sc["Linear"].flops == sc["Attention"].flops == 2 * 64**3
    assert sc["Attention"].achieved_tflops == pytest.approx(2 * 64**3 / 30e-6 / 1e12)
    assert (sc["my_region"].kind, sc["my_region"].kernel_ns) == ("annotation", 5 * US)
    assert "ProfilerStep#1" not in sc


def test_detect_from_compute_capability_when_name_is_empty() -> None:
    from stepscope.catalog.hardware import detect_from_properties

    assert detect_from_properties({"computeMajor": 9, "computeMinor": 0, "numSms": 132}).name == "H100-SXM"
    assert (
        detect_from_properties({"computeMajor": 8, "computeMinor": 0, "numSms": 108, "totalGlobalMem": 85e9}).name
        == "A100-SXM-80GB"
    )
    assert (
        detect_from_properties({"computeMajor": 8, "computeMinor": 0, "numSms": 108, "totalGlobalMem": 42e9}).name
        == "A100-SXM-40GB"
    )
    assert detect_from_properties({"computeMajor": 9, "computeMinor": 4, "numSms": 304}).name == "MI300X"
    assert detect_from_properties({"computeMajor": 5, "computeMinor": 2, "numSms": 3}) is None
    assert detect_from_properties({"name": ""}) is None


def test_per_kernel_roofline_and_excess_flops(tmp_path: Path) -> None:
    r = analyze(stepscope.load(_mm_trace(tmp_path)), AnalyzeConfig(model_flops_per_step=1e9)).ranks[0]
    k = {g.name: g for g in r.roofline.kernels}
    assert set(k) == {"sm90_xmma_gemm_bf16bf16", "vectorized_elementwise_kernel"}  # the custom op has no model
    g = k["sm90_xmma_gemm_bf16bf16"]
    assert (g.flops, g.dur_ns, g.dtype, g.bound) == (2 * 1024**3, 10 * US, "bf16", "compute")
    assert r.roofline.steps[0].excess_flops == 2 * 1024**3 + 1024 * 1024 - 1e9
    from stepscope.catalog.hardware import by_name

    core = by_name("TPU-v4-core")
    assert core.peak_flops("bf16") == 275e12 / 2 and core.hbm_gbps == 1228 / 2


def test_deepseek_v3_mla_moe_active_params_match_the_published_37b() -> None:
    from stepscope.catalog.model_flops import from_config_dict
    from stepscope.planner.search import model

    m = model("deepseek-v3")
    assert m.mla == (1536, 512, 128, 64, 128) and m.mtp_layers == 1
    # DeepSeek-V3 technical report: 37B activated parameters per token (ours: matmul weights incl.
    # the LM head and the MTP module, without the input embedding table)
    assert m.matmul_params_per_token() == pytest.approx(37e9, rel=0.03)
    # MLA attention by hand for one layer: q_a + q_b + kv_a + kv_b + o
    h, d = 128, 7168
    assert m.attn_params() == d * 1536 + 1536 * h * 192 + d * (512 + 64) + 512 * h * (128 + 128) + h * 128 * d
    assert m.flops_per_token(4096) == 6 * m.matmul_params_per_token() + 6 * 62 * 4096 * h * (192 + 128) * 0.5
    assert from_config_dict({"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2}).mla is None
