"""The planner's vocabularies and priors: the loss kernels, pipeline schedules, TP-overlap
mechanisms, fp8 recipes and ZeRO-3 gathers a job or a strategy names, and the prior shares the cost
model assumes where nothing is measured. The framework settings (config.py) take their choices from
here, the cost model its constants."""

from __future__ import annotations

import math
from typing import Literal, get_args

import numpy as np

Precision = Literal["bf16", "fp16", "fp8"]
GradDtype = Literal["fp32", "bf16", "fp16"]
LossKind = Literal["fused", "unfused", "copy", "compiled", "te"]
Fp8Recipe = Literal["tensorwise", "rowwise"]
Fp8SavedInputs = Literal["fp8", "bf16"]
Zero3Gather = Literal["layer", "tensor"]
EpDispatch = Literal["all_to_all", "deepep"]
TpOverlap = Literal["none", "full", "bwd", "bwd+shard"]
AttentionKernel = Literal["", "fa2", "cudnn", "fa3"]

# (bytes per logit held at the loss's peak, bytes per logit moved by the loss's kernels), by loss
# kind. Fused (in place on one fp32 copy: Megatron's native fused loss): bf16 logits + the fp32
# copy; upcast, max/sum, exp in place, gradient in place, downcast: ~6 fp32 passes. Unfused
# (PyTorch F.cross_entropy(logits.float()): torchtitan, Hugging Face): the forward holds bf16 +
# fp32 input + log-softmax output (10 B), the backward's first kernels the saved output, its
# gradient and the input gradient (12 B); moved: upcast 2+4, log-softmax 8+4, NLL backward 4,
# log-softmax backward 12+4, downcast 4+2 = 44 B. Copy (nanotron's sharded_cross_entropy with
# dtype=float, tensor_parallel/functional.py): the max is subtracted out of place, so the bf16
# logits, their fp32 copy and the shifted fp32 logits are live together (10 B); the exp, the
# normalization and the gradient then work in place on the shifted copy; moved: upcast 2+4, max
# 4, subtract 4+4, exp 4+4, sum 4, divide 4+4, backward multiply 4+4, downcast 4+2 = 52 B.
# Compiled (the unfused loss under torch.compile: torchtitan compiles its loss function with the
# model since April 2025, components/loss.py build_cross_entropy_loss, PR #1033): Inductor fuses
# the upcast into the reductions and the softmax gradient into one kernel, so only the bf16 logits
# (saved) and their bf16 gradient are live (4 B); moved: max and sum-exp passes 2+2, backward
# read 2 + write 2 = 8 B. In an eager job (fused_elementwise false) it runs unfused.
# Transformer Engine (its Triton parallel cross entropy, transformer_engine/pytorch/triton/cross_entropy.py;
# Megatron's cross_entropy_fusion_impl="te", which Megatron-Bridge's performance recipes set): an online
# softmax pass over the bf16 logits keeps only each row's max and sum; backward writes the gradient
# in place into the logits: 2 B held; moved: forward read 2, backward read 2 + write 2 = 6 B.
LOSS_BYTES: dict[str, tuple[float, float]] = {
    "fused": (6.0, 24.0),
    "unfused": (12.0, 44.0),
    "copy": (10.0, 52.0),
    "compiled": (4.0, 8.0),
    "te": (2.0, 6.0),
}
# 1f1b is interleaved when vpp > 1; afab (all forwards, then all backwards: GPipe, nanotron's default
# pipeline engine) has 1F1B's bubble but holds every micro-batch's activations until its backward
# DeepSeek-V3's DualPipe (bidirectional: each rank holds stages i and pp-1-i, micro-batches enter
# from both ends; two copies of the parameters, pp+1 micro-batches of a stage in flight) and
# DualPipeV (its V-shaped "cut-in-half" form: two chunks per rank, vpp = 2, one copy); both overlap
# a forward chunk with a backward chunk of another micro-batch, which hides the EP all-to-all
# (ep_overlap implied). Bubbles from the DualPipe README's table with F = W = B/2 (F forward, B full
# backward, W its weight part; F&B = F + B): DualPipe (pp/2 - 1)(F&B + B - 3W) = (pp - 2) F, against
# 1F1B's (pp - 1) x 3F: factor (pp - 2) / (3 (pp - 1)), per pipeline depth (stages.py; nan here);
# DualPipeV (pp - 1) x 2 F_chunk with 2 chunks per rank, written against (pp - 1) / vpp: 2/3
# (the same as ZB-H1's (pp - 1) F)
SCHEDULES = ("1f1b", "zb-h1", "zb-v", "afab", "dualpipe", "dualpipev")
BUBBLE_FACTOR = np.array([1.0, 1.0 / 3.0, 0.1, 1.0, np.nan, 2.0 / 3.0])
DUALPIPE, DUALPIPEV = SCHEDULES.index("dualpipe"), SCHEDULES.index("dualpipev")
# TP/GEMM overlap mechanisms (planner/tp_overlap.py); a strategy carries the index
TP_OVERLAP: tuple[str, ...] = get_args(TpOverlap)


def ends_on_first_rank(sched: np.ndarray, pp: np.ndarray) -> np.ndarray:
    """Where the first pipeline rank also holds the last stage (the embedding and the output layer):
    DualPipe (stages i and pp-1-i on rank i) and the V shapes (ZB-V, DualPipeV)."""
    return np.isin(sched, (DUALPIPE, SCHEDULES.index("zb-v"), DUALPIPEV)) & (pp > 1)


def dualpipe_micro_batches_ok(n_micro: np.ndarray | int, pp: np.ndarray | int) -> np.ndarray | bool:
    """The DualPipes' micro-batches per replica: even and at least 2 x pp (DualPipe's own assertion)."""
    return (n_micro % 2 == 0) & (n_micro >= 2 * pp)


def tp_overlap_needs_sp(code: int) -> bool:
    """Whether a TP_OVERLAP mechanism needs sequence parallelism: full and bwd+shard split
    all-gathers and reduce-scatters; bwd hides the backward input-gradient collective either way
    (planner/tp_overlap.py)."""
    return TP_OVERLAP[code] in ("full", "bwd+shard")


GEMM_SHARE = 0.75  # prior: share of the non-attention compute time spent in GEMMs
MATMUL_EFF = 0.7  # prior: GEMM ceiling / peak for devices without a measured matmul_eff
ATTN_REL = 0.6  # prior: attention kernels' efficiency relative to the dense work's
# prior: chunked linear-attention kernels (GLA, Gated DeltaNet), forward + backward, achieved / bf16
# dense peak on ModelShape.linear_attention_flops_per_token's count: flash-linear-attention's
# README benchmarks (GB200, B1 T8192 H96 D128 and T 4k-16k, H 16-64, D 128/256) give GLA 1.0-1.5%
# and Gated DeltaNet 1.7-2.4% of peak, pytorch/helion examples/fla/BENCHMARKS.md a tuned GLA 2.9%
# on B200: the gating and intra-chunk work runs on the vector units. GPU measurements only: on
# other devices an extrapolation (a calibration's linear_attn_scale corrects it)
LINEAR_ATTN_EFF = 0.015
DP_OVERLAP = 0.7  # prior: share of DP/FSDP traffic hidden behind the backward pass
OFFLOAD_HIDDEN = 0.8  # prior: share of offload traffic hidden behind compute
PP_P2P_HIDDEN = 0.8  # prior: share of steady-state pipeline p2p hidden behind compute
CP_HIDDEN = 0.5  # prior: share of the ring exchange of K and V hidden behind attention
HOST_GBPS = 25.0  # device <-> host when the catalog has no figure (PCIe Gen4 x16, effective)
# a CUDA/ROCm device's framework reserve (GB): the CUDA context (~0.5-1 GB) and the caching
# allocator's fragmentation; a prior
RESERVE_GB = 3.0
# share of a CUDA/ROCm device a search keeps free beyond the reserve (the memory_margin setting)
MEMORY_MARGIN = 0.05


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending, found up to sqrt(n) (a search over 2^28 devices stays fast)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]
