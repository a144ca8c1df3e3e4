"""One category per kernel, shared by every table; FBGEMM embedding kernels are not GEMMs."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import stepscope
from stepscope.analysis.api import analyze
from stepscope.analysis.classify import load_rules

from .. import synth

US = 1000
QUICK_START = Path(__file__).parents[2] / "examples" / "traces" / "a100_nccl_rank0.json.gz"


def test_roofline_and_device_time_by_category_agree_on_the_quick_start_trace() -> None:
    """Independently of the analysis: every kernel event of the trace file, categorized by its
    name, its time inside the reported step windows summed per category. The roofline's category
    table and the steps' kernel time by category both equal it (to 1 us: the file's microsecond
    floats rounded to ns)."""
    r = analyze(stepscope.load(QUICK_START)).ranks[0]
    windows = [(s.window_start_ns, s.window_end_ns) for s in r.steps]
    rules = load_rules()
    with gzip.open(QUICK_START, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    expected: Counter[str] = Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            s, end = round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)
            for w0, w1 in windows:
                expected[rules.category_of_kernel(e["name"])] += max(0, min(end, w1) - max(s, w0))
    expected = Counter({k: v for k, v in expected.items() if v})
    roofline = {c.category: c.dur_ns for c in r.roofline.by_category}
    by_step: Counter[str] = Counter()
    for s in r.steps:
        by_step.update(
            {k: v for k, v in s.kernel_time_by_category_ns.items() if not k.startswith(("memcpy", "memset"))}
        )
    assert set(roofline) == set(by_step) == set(expected)
    for cat, ns in expected.items():
        assert abs(roofline[cat] - ns) <= US, cat
        assert abs(by_step[cat] - ns) <= US, cat
    # the conv kernels (cudnn implicit GEMM / wgrad / dgrad) are conv in both tables: 18.66 ms
    assert abs(roofline["conv"] - 18_660_902) <= US and abs(by_step["conv"] - 18_660_902) <= US


def test_roofline_category_of_an_op_with_mixed_kernels(tmp_path: Path) -> None:
    """aten::cudnn_convolution launching a layout transpose (50 us) then a conv kernel (150 us):
    the category table books 50 us to elementwise and 150 us to conv, as the step table does,
    not 200 us to the category of the op's first kernel."""
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev.append(synth.cpu("aten::cudnn_convolution", 5, 40, **{"External id": 70}))
    ev += synth.launch("void cudnn::ops::nchwToNhwcKernel<float, float, float, false>(float*)", 10, 100, 50, ext=70)
    ev += synth.launch("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw", 20, 150, 150, ext=70)
    r = analyze(stepscope.load(synth.write(tmp_path / "t.json", ev))).ranks[0]
    assert {c.category: c.dur_ns for c in r.roofline.by_category} == {"elementwise": 50 * US, "conv": 150 * US}
    (s,) = r.steps
    assert s.kernel_time_by_category_ns == {"elementwise": 50 * US, "conv": 150 * US}


def test_fbgemm_embedding_kernels_are_embedding_not_gemm(tmp_path: Path) -> None:
    """TorchRec/FBGEMM table-batched embedding: forward 200 us, backward (fused row-wise Adagrad)
    300 us; a real GEMM 100 us. "gemm" inside "fbgemm" names no GEMM."""
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev += synth.launch(
        "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, float, 8>(at::GenericPackedTensorAccessor)",
        10,
        100,
        200,
    )
    ev += synth.launch(
        "void fbgemm_gpu::split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_warp_per_row_1<float>(int)",
        20,
        300,
        300,
    )
    ev += synth.launch("ampere_sgemm_128x64_nn", 30, 600, 100)
    (s,) = analyze(stepscope.load(synth.write(tmp_path / "t.json", ev))).ranks[0].steps
    assert s.by_category_ns == {"embedding": 500 * US, "gemm": 100 * US}
    rules = load_rules()
    assert rules.category_of_kernel("void fbgemm_gpu::permute_2D_data_kernel<false, int, int, double>(int)") != "gemm"
    assert rules.category_of_kernel("void fbgemm_gpu::batched_embedding_backward_kernel<float>(int)") == "embedding"
    assert rules.category_of_kernel("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long)") == "elementwise"


def test_category_flops_follow_the_kernels_share_of_the_op_time(tmp_path: Path) -> None:
    """aten::mm [1024,1024] x [1024,1024] bf16: 2 x 1024^3 = 2,147,483,648 FLOPs, run as a GEMM
    kernel of 300 us and a cast kernel of 100 us: the gemm row gets 3/4 of the FLOPs
    (1,610,612,736), the elementwise row 1/4 (536,870,912); both run at the op's rate."""
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev.append(
        synth.cpu(
            "aten::mm",
            5,
            20,
            **{"External id": 5, "Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["c10::BFloat16"] * 2},
        )
    )
    ev += synth.launch("sm90_xmma_gemm_bf16bf16_bf16f32", 10, 100, 300, ext=5)
    ev += synth.launch("void at::native::vectorized_elementwise_kernel<4, cast_op>(int)", 12, 400, 100, ext=5)
    r = analyze(stepscope.load(synth.write(tmp_path / "t.json", ev))).ranks[0]
    by = {c.category: c for c in r.roofline.by_category}
    assert by["gemm"].flops == 1_610_612_736 and by["elementwise"].flops == 536_870_912
    assert by["gemm"].modeled_dur_ns == 300 * US and by["elementwise"].modeled_dur_ns == 100 * US
    rate = 2_147_483_648 / 400e-6 / 1e12  # TFLOP/s of the op over its 400 us
    assert abs(by["gemm"].achieved_tflops - rate) < 1e-9 and abs(by["elementwise"].achieved_tflops - rate) < 1e-9
