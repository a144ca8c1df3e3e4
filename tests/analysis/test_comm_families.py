"""Communication recognized by kernel name for each library family, and by the collective-named
annotation or op that launched a kernel. Each case is a one-step trace with a hand-computed answer.

Layout of every case (times in us): a GEMM on stream 7 at [100, 400), the communication kernel on
stream 20 at [200, 500). So comm = 300, overlapped with compute = [200, 400) = 200, exposed =
[400, 500) = 100, and the step's device time by category is {gemm: 300, comm:<type>: 300}.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analysis.api import analyze
from stepscope.analysis.classify import load_rules

from .. import synth

US = 1000
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"

# (kernel name as the profiler records it, expected collective type)
FAMILIES: dict[str, tuple[str, str]] = {
    "deepep_internode_dpsk": (
        "void dpsk::ep::internode::dispatch<false, 8, 16, 64>(int4*, float*, long*, float*, int, int)",
        "all_to_all",
    ),
    "deepep_internode_combine": ("void dpsk::ep::internode::combine<__nv_bfloat16, 8>(int4*, float*)", "all_to_all"),
    "deepep_notify_dispatch": (
        "void dpsk::ep::internode::notify_dispatch<true, 8>(int const*, int*, int)",
        "all_to_all",
    ),
    "deepep_cached_notify": ("void dpsk::ep::internode::cached_notify<2, 8>(int, int, int*, int, void*)", "all_to_all"),
    "deepep_intranode": (
        "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*, float*)",
        "all_to_all",
    ),
    "deepep_intranode_cached": (
        "void deep_ep::intranode::cached_notify_dispatch<8>(int const*, int, void**)",
        "all_to_all",
    ),
    "deepep_low_latency": ("void deep_ep::internode_ll::dispatch<true, 3, 7168>(void*, float*, int*)", "all_to_all"),
    "deepep_low_latency_flat": ("low_latency_dispatch_kernel", "all_to_all"),
    "deepep_barrier": ("void deep_ep::intranode::barrier<8>(int**, int)", "barrier"),
    "pplx": ("void pplx::(anonymous namespace)::dispatchKernel<true, true>(int, unsigned int)", "all_to_all"),
    "pplx_combine": ("void pplx::(anonymous namespace)::combineKernel<__nv_bfloat16>(unsigned int)", "all_to_all"),
    "nvshmem": ("nvshmemi_barrier_all_on_stream_kernel", "barrier"),
    "nvshmem_put": ("void nvshmemi_transfer_rma_put_kernel<int4>(void*, void const*, unsigned long)", "other"),
    "te_userbuffers_rs": (
        "void userbuffers_fp16_sum_inplace_gpu_rr_rs<2>(int, int, int, int, int, void**)",
        "reduce_scatter",
    ),
    "te_userbuffers_rs_oop": (
        "void userbuffers_fp16_sum_inplace_gpu_rr_rs_oop_fp8<__nv_fp8_e4m3, 8>(int)",
        "reduce_scatter",
    ),
    "te_userbuffers_ag": (
        "void userbuffers_fp16_sum_inplace_gpu_rw_ag<2>(int, int, int, int, int, void**)",
        "all_gather",
    ),
    "te_userbuffers_ar": ("void userbuffers_fp16_sum_inplace_gpu_rw<8>(int, int, int, int, int, void**)", "all_reduce"),
    "te_userbuffers_p2p": ("kuserbuffers_pushsendrecv(int*, int*, int4*, int4*, int, int*, int*)", "send_recv"),
    "mscclpp": ("void mscclpp::allreduce7<__half>(__half*, mscclpp::DeviceHandle<mscclpp::SmChannel>*)", "all_reduce"),
    "msccl": ("mscclKernel_Sum_half_Simple_false(ncclDevComm*, mscclAlgo*, mscclWork*)", "other"),
    "vllm_custom_ar_1stage": ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*)", "all_reduce"),
    "sglang_custom_ar_2stage": ("void sglang::cross_device_reduce_2stage<half, 4>(sglang::RankData*)", "all_reduce"),
    "rccl": ("rcclGenericKernel<1>(ncclDevComm*, unsigned long, ncclWork*)", "other"),
    "rccl_named": ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "all_gather"),
    "hccl": ("hcom_allReduce__520_0_1", "all_reduce"),
    "hccl_named": ("HcclAllGather_kernel", "all_gather"),
    # oneCCL's SYCL kernels are named by their kernel-name classes (oneCCL src/coll/algorithms/...)
    "oneccl": ("oneccl_alltoall_write_aligned<float, 4>", "all_to_all"),
    "oneccl_barrier": ("oneccl_invoke_barrier", "barrier"),
    "oneccl_copy": ("oneccl_kernel_memcpy_typed<sycl::_V1::ext::oneapi::bfloat16>", "other"),
}


def _step(tmp_path: Path, comm_kernel: str, extra: list[dict[str, Any]] | None = None, comm_ext: int = -1) -> Any:
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev += synth.launch(GEMM, 10, 100, 300, stream=7)
    ev += synth.launch(comm_kernel, 20, 200, 300, stream=20, ext=comm_ext)
    ev += extra or []
    (s,) = analyze(stepscope.load(synth.write(tmp_path / "t.json", ev))).ranks[0].steps
    return s


@pytest.mark.parametrize("case", sorted(FAMILIES))
def test_each_family_is_communication_of_its_collective(tmp_path: Path, case: str) -> None:
    name, ctype = FAMILIES[case]
    s = _step(tmp_path, name)
    assert s.comm_ns == 300 * US
    assert s.overlapped_comm_ns == 200 * US  # [200, 400)
    assert s.exposed_comm_ns == 100 * US  # [400, 500)
    assert s.compute_ns == 300 * US
    assert s.by_category_ns == {"gemm": 300 * US, f"comm:{ctype}": 300 * US}
    (c,) = s.collectives
    assert (c.type, c.comm_ns, c.overlapped_ns, c.exposed_ns, c.count) == (ctype, 300 * US, 200 * US, 100 * US, 1)


@pytest.mark.parametrize(
    "name",
    [
        "void fbgemm_gpu::permute_2D_data_kernel<false, int, int, double>(int, int)",  # "fbgemm" is not "nccl"/"gemm"
        "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)",  # local arithmetic
        "ub_dlnetwork_layerPredictWithCo",  # MATLAB GPU Coder's ub_* naming, not TE userbuffers
        "void occlusion_cull_kernel<float>(float*, int)",  # "ccl" inside a word
        "void saccl_update_kernel(float*)",  # "ccl_" after a letter
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)",
        "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*)",
    ],
)
def test_names_that_only_look_like_communication_are_not(name: str) -> None:
    assert not load_rules().category_of_kernel(name).startswith("comm:")


def test_no_rule_repeats_a_broad_class_without_bound() -> None:
    """`.*`, `.+`, `\\w*` or `\\w+` after a prefix that repeats rescans a 400 KB template name from
    every occurrence of the prefix (a `moe_.*mm` took minutes on one name): repetition of a broad
    class is bounded (`\\w{0,64}`) in every kernel and XLA rule."""
    import re

    from stepscope.analysis.xla.ops import rules as xla_rules

    unbounded = re.compile(r"(\.|\\w|\\S|\])[*+]")
    rules = load_rules()
    pats = [p for _, p in rules.categories] + [p for _, p in rules.collectives]
    pats += [f.pattern for f in rules.comm_families] + [rules.comm_kernels, rules.comm_ops]
    pats += [rules.comm_annotations] if rules.comm_annotations is not None else []
    x = xla_rules()
    pats += [p for _, p in (*x.collectives, *x.custom_calls, *x.categories)] + [x.comm]
    for p in pats:
        assert not unbounded.search(p.pattern), p.pattern


def test_unknown_kernel_under_a_dispatch_annotation_is_all_to_all(tmp_path: Path) -> None:
    """An extension kernel with an unknown name, launched directly under a user annotation named
    "moe_dispatch" (same External id): communication, typed all_to_all."""
    ann = synth.cpu("moe_dispatch", 15, 30, cat="user_annotation", **{"External id": 55})
    s = _step(tmp_path, "void my_ext::token_shuffle_kernel<8>(int4*, int)", [ann], comm_ext=55)
    assert s.by_category_ns == {"gemm": 300 * US, "comm:all_to_all": 300 * US}
    assert s.exposed_comm_ns == 100 * US


@pytest.mark.parametrize(
    ("op", "ctype"),
    [("ep::combine", "all_to_all"), ("all_gather_into_tensor_coalesced", "all_gather"), ("pp_send", "send_recv")],
)
def test_custom_ops_named_after_a_collective(tmp_path: Path, op: str, ctype: str) -> None:
    ann = synth.cpu(op, 15, 30, **{"External id": 56})
    s = _step(tmp_path, "void my_ext::kernel_a<8>(int4*, int)", [ann], comm_ext=56)
    assert s.by_category_ns == {"gemm": 300 * US, f"comm:{ctype}": 300 * US}


def test_a_named_kernel_keeps_its_category_under_a_collective_annotation(tmp_path: Path) -> None:
    """A GEMM launched under "ep_combine" is still a GEMM; aten::broadcast_tensors is a local op."""
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev.append(synth.cpu("ep_combine", 5, 20, cat="user_annotation", **{"External id": 60}))
    ev += synth.launch(GEMM, 10, 100, 300, stream=7, ext=60)
    ev.append(synth.cpu("aten::broadcast_tensors", 25, 10, **{"External id": 61}))
    ev += synth.launch("void my_ext::kernel_b(float*)", 30, 400, 100, stream=7, ext=61)
    (s,) = analyze(stepscope.load(synth.write(tmp_path / "t.json", ev))).ranks[0].steps
    assert s.by_category_ns == {"gemm": 300 * US, "other": 100 * US}
    assert s.comm_ns == 0
