"""The job a plan is for (model, devices, batch, framework properties) and the vocabularies of
strategy fields (recompute policies, pipeline schedules, TP-overlap mechanisms, bottlenecks)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..catalog.hardware import HBM_VISIBLE, Hardware
from ..catalog.model_flops import ModelShape
from ..errors import ConfigError
from .attention import KERNELS as ATTENTION_KERNELS
from .bottleneck import BOTTLENECKS, bottleneck_codes  # noqa: F401  (re-exported for cost.py and the renderers)
from .dispatch import EP_DISPATCH
from .network import NetworkProfile
from .recompute import (  # noqa: F401  (re-exported: the cost model and its readers import them from here)
    ACT_BYTES,
    CP_REPLAY,
    EP_REPLAY,
    GATHERED_BYTES,
    MLA_POLICIES,
    QKV_OFFLOADED_BYTES,
    RECOMPUTE,
    RECOMPUTE_FACTOR,
    REPLICATED_BYTES,
    TP_REPLAY,
)

# (bytes per logit held at the loss's peak, bytes per logit moved by the loss's kernels), by
# Job.loss. Fused (in place on one fp32 copy: Megatron's native fused loss): bf16 logits + the
# fp32 copy; upcast, max/sum, exp in place, gradient in place, downcast: ~6 fp32 passes. Unfused
# (PyTorch F.cross_entropy(logits.float()): torchtitan, Hugging Face): the forward holds bf16 +
# fp32 input + log-softmax output (10 B), the backward's first kernels the saved output, its
# gradient and the input gradient (12 B); moved: upcast 2+4, log-softmax 8+4, NLL backward 4,
# log-softmax backward 12+4, downcast 4+2 = 44 B. Copy (nanotron's sharded_cross_entropy with
# dtype=float, tensor_parallel/functional.py): the max is subtracted out of place, so the bf16
# logits, their fp32 copy and the shifted fp32 logits are live together (10 B); the exp, the
# normalization and the gradient then work in place on the shifted copy; moved: upcast 2+4, max
# 4, subtract 4+4, exp 4+4, sum 4, divide 4+4, backward multiply 4+4, downcast 4+2 = 52 B.
# Compiled (the unfused loss under torch.compile: torchtitan compiles its loss function with the
# model since April 2025, components/loss.py build_cross_entropy_loss, PR #1033; before that a
# TODO left it eager): Inductor fuses the upcast into the reductions and the softmax gradient into
# one kernel, so only the bf16 logits (saved) and their bf16 gradient are live (4 B); moved: max
# and sum-exp passes 2+2, backward read 2 + write 2 = 8 B. Under --eager it runs unfused.
# Transformer Engine (its Triton parallel cross entropy, transformer_engine/pytorch/triton/cross_entropy.py;
# Megatron's cross_entropy_fusion_impl="te", which Megatron-Bridge's performance recipes set): an online
# softmax pass over the bf16 logits keeps only each row's max and sum; backward writes the gradient
# in place into the logits: 2 B held; moved: forward read 2, backward read 2 + write 2 = 6 B.
LOSS_BYTES = {
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
# 1F1B's (pp - 1) x 3F: factor (pp - 2) / (3 (pp - 1)), per pipeline depth (cost.py; nan here);
# DualPipeV (pp - 1) x 2 F_chunk with 2 chunks per rank, written against (pp - 1) / vpp: 2/3
# (the same as ZB-H1's (pp - 1) F)
SCHEDULES = ("1f1b", "zb-h1", "zb-v", "afab", "dualpipe", "dualpipev")
BUBBLE_FACTOR = np.array([1.0, 1.0 / 3.0, 0.1, 1.0, np.nan, 2.0 / 3.0])
DUALPIPE, DUALPIPEV = SCHEDULES.index("dualpipe"), SCHEDULES.index("dualpipev")


def ends_on_first_rank(sched: np.ndarray, pp: np.ndarray) -> np.ndarray:
    """Where the first pipeline rank also holds the last stage (the embedding and the output layer):
    DualPipe (stages i and pp-1-i on rank i) and the V shapes (ZB-V, DualPipeV)."""
    return np.isin(sched, (DUALPIPE, SCHEDULES.index("zb-v"), DUALPIPEV)) & (pp > 1)


def dualpipe_micro_batches_ok(n_micro: np.ndarray | int, pp: np.ndarray | int) -> np.ndarray | bool:
    """The DualPipes' micro-batches per replica: even and at least 2 x pp (DualPipe's own assertion)."""
    return (n_micro % 2 == 0) & (n_micro >= 2 * pp)


GEMM_SHARE = 0.75  # prior: share of the non-attention compute time spent in GEMMs
MATMUL_EFF = 0.7  # prior: GEMM ceiling / peak for devices without a measured matmul_eff
ATTN_REL = 0.6  # prior: attention kernels' efficiency relative to the dense work's
DP_OVERLAP = 0.7  # prior: share of DP/FSDP traffic hidden behind the backward pass
OFFLOAD_HIDDEN = 0.8  # prior: share of offload traffic hidden behind compute
PP_P2P_HIDDEN = 0.8  # prior: share of steady-state pipeline p2p hidden behind compute
CP_HIDDEN = 0.5  # prior: share of the ring exchange of K and V hidden behind attention
HOST_GBPS = 25.0  # device <-> host when the catalog has no figure (PCIe Gen4 x16, effective)
TP_OVERLAP = ("none", "full", "bwd", "bwd+shard")  # TP/GEMM overlap mechanisms (see the module docstring)


def tp_overlap_needs_sp(code: int) -> bool:
    """Whether a TP_OVERLAP mechanism needs sequence parallelism: full and bwd+shard split
    all-gathers and reduce-scatters; bwd hides the backward input-gradient collective either way
    (planner/tp_overlap.py)."""
    return TP_OVERLAP[code] in ("full", "bwd+shard")


FP8_RECIPES = ("tensorwise", "rowwise")
ZERO3_GATHER = ("layer", "tensor")
# a CUDA/ROCm device's framework reserve (GB): the CUDA context (~0.5-1 GB) and the caching
# allocator's fragmentation; a prior
RESERVE_GB = 3.0


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending, found up to sqrt(n): trying every d <= n took 24 s for 2^28 devices."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


@dataclass(frozen=True)
class Job:
    model: ModelShape
    hw: Hardware
    devices: int
    devices_per_node: int
    global_batch: int  # sequences per step
    seq_len: int
    precision: str = "bf16"
    # framework reserve per device (driver context, allocator slack); None = by the device's
    # runtime: RESERVE_GB under CUDA/ROCm, 0 where memory is assigned statically (XLA on TPU,
    # Hardware.static_memory); resolved in __post_init__, so it is always a number afterwards
    reserve_gb: float | None = None
    # False: attention materializes the s x s scores (no FlashAttention-style kernel, e.g. 2021
    # Megatron): every score is computed (no causal skipping) and moved through HBM
    flash_attention: bool = True
    # False: norms, rotary embeddings and the MLP activation run as separate eager PyTorch ops (no
    # torch.compile or fused kernels), which moves ~3.5x the elementwise bytes of a Llama block
    fused_elementwise: bool = True
    # True: a gated MLP's act(gate) * up runs as separate PyTorch ops even where the norms are fused
    # (nanotron's GLUActivation: torch.split, F.silu, a multiply): act(gate) is stored for the
    # multiply's backward beside gate, up and the product (4 f per token instead of a fused
    # kernel's 3) and the two kernels move 10 B per element instead of 6. fused_elementwise False
    # implies it (see swiglu_eager)
    eager_swiglu: bool = False
    # Megatron's account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split
    # (set by Megatron-Bridge's Llama 3.1 405B recipe): the embedding and the loss count as one
    # layer each when the layers are split over the stages, so the first and the last stage hold
    # one transformer layer fewer than the others (stages.stage_layers)
    pipeline_split_embedding: bool = False
    # pipeline blocks placed by their cumulative cost, as nanotron's build_model does (a layer
    # 4 n_heads d_head h + 3 d_ff h, the output layer V h): a heavy output layer leaves the last
    # stage fewer layers and the first more (stages.cost_split)
    pipeline_split_cost: bool = False
    # residual-branch (hidden) dropout on, as Megatron's GPT runs of 2021-22 had (--hidden-dropout
    # 0.1, its default then): a 1-byte mask per h-wide element after attention and after the MLP
    # is kept for backward (activations.py); 0 (off) in today's LLM recipes
    hidden_dropout: bool = False
    # ZeRO-1/2: the updated weights' all-gather runs under the next step's first forward (Megatron
    # --overlap-param-gather) instead of after the optimizer step, exposed
    param_gather_overlap: bool = False
    # ZeRO-1/2: the gradients are all-reduced (not reduce-scattered) after the whole backward pass,
    # exposed: nanotron with fp32 gradient accumulation (trainer.py builds no DDP wrapper when
    # accumulate_grad_in_fp32 and zero_stage > 0, then calls sync_gradients_across_dp with
    # reduce_scatter=False after train_batch_iter, "too memory hungry, instead we run all_reduce")
    zero_sync_after_backward: bool = False
    # ZeRO-1/2: host seconds per parameter tensor of the stage and DP rank that the updated
    # weights' all-gather spends putting each rank's shard of each tensor back in place, one
    # small op at a time (nanotron: ZeroDistributedOptimizer._all_gather_params slices every
    # tensor for every rank, and its all_gather_coalesced flattens per rank, gathers, then
    # unflattens and copy_s every (tensor, rank) pair from Python); exposed after the optimizer
    # step. 0 = a flat buffer gathered in place (Megatron's distributed optimizer, DeepSpeed,
    # FSDP); see benchmarks/zero_gather_host.py for the measured cost per pair
    zero_gather_copy_s: float = 0.0
    # bytes per parameter of the stage and micro-batch that a separate gradient-accumulation kernel
    # moves after each backward: nanotron's FP32GradientAccumulator.backward runs
    # fp32_grad.add_(half_param.grad) for every parameter (read the bf16 gradient, 2 B, read and
    # write the fp32 one, 8 B: 10), on every micro-batch, whole even under ZeRO-1. 0 where the
    # weight-gradient GEMM accumulates in place (Megatron's gradient_accumulation_fusion) or
    # gradients are reduce-scattered each micro-batch (FSDP)
    grad_accum_bytes: float = 0.0
    # bytes per parameter of the optimizer's states: fp32 master weights and Adam's m and v, 12;
    # 8 with the moments in bf16 (DeepSeek-V3's report, section 3.3.3; Megatron-Core's
    # --use-precision-aware-optimizer with --exp-avg-dtype/--exp-avg-sq-dtype bf16); sharded by
    # ZeRO as the states are (planner/states.py); the optimizer step moves these and a 4-byte gradient
    optimizer_bytes: float = 12.0
    # how ZeRO-3 / FSDP gathers the weights (planner/buffers.py): "layer", a transformer block's
    # weights in one collective (PyTorch FSDP wrapped per block: torchtitan, Megatron's FSDP), or
    # "tensor", each parameter tensor by itself just before its op (XLA's SPMD partitioner, one
    # all-gather per sharded array; DeepSpeed ZeRO-3's per-module fetch): it sets how much is held
    # gathered at the peak, not the bytes moved
    zero3_gather: str = "layer"
    # how expert parallelism exchanges tokens across nodes (planner/dispatch.py): "all_to_all", every
    # routed copy to its expert's rank; "deepep", once per destination node, then over NVLink
    ep_dispatch: str = "all_to_all"
    # SMs DeepEP's kernels take while they run (Megatron's moe_deepep_num_sms, DeepEP's Buffer.num_sms:
    # 20; DeepSeek-V3's report, section 3.2.2): the compute under a hidden exchange runs on the rest
    deepep_sms: int = 20
    # ZeRO-0/1/2 gradients reduced under the backward in buckets of this many MB of gradients in the
    # parameters' dtype (PyTorch DDP's bucket_cap_mb, 25 by default; nanotron's ddp_bucket_cap_mb,
    # 25): each bucket is its own collective and pays its own ring latency; 0 = one collective
    dp_bucket_mb: float = 0.0
    # MoE routing imbalance: tokens on the most loaded expert-parallel rank / the mean (1 = perfectly
    # balanced). Each MoE layer waits for that rank at its all-to-all, so its expert GEMMs and its
    # share of the all-to-all take this factor longer (and hold that much more dispatched activation)
    moe_imbalance: float = 1.0
    # False: the attention's query, key and value projections (and a gated MLP's gate and up
    # projections) are separate GEMMs (torchtitan, Hugging Face, MaxText's default), so with GQA the
    # key/value GEMMs are only kv_heads*head_dim/tp wide; True: one fused GEMM each (Megatron's
    # linear_qkv and linear_fc1, nanotron's qkv_proj and gate_up_proj)
    fused_projections: bool = True
    # True: the model repeats K and V to every query head before the attention kernel (torchtitan's
    # Llama: repeat_kv ahead of F.scaled_dot_product_attention), so under GQA the kernel's K and V
    # are n_heads wide: context parallelism exchanges those, the no-recompute policies store them
    # for the kernel's backward, and the copy moves them once more (cost.py, rates.stored_per_token);
    # False: the kernel reads kv_heads-wide K and V (Megatron, nanotron, MaxText, flash-attn's GQA)
    kv_repeated: bool = False
    # the loss's kernels (LOSS_BYTES): "fused", a vocab-parallel cross entropy in place on one fp32
    # copy of the logits (Megatron's native fused loss): 6 B per logit held, ~24 B moved; "te",
    # Transformer Engine's, the gradient in place in the bf16 logits: 2 B held, 6 B moved;
    # "unfused", PyTorch's F.cross_entropy on an fp32 upcast (torchtitan, Hugging Face): 12 B held
    # at the start of backward, ~44 B moved; "copy", nanotron's sharded cross entropy, which
    # subtracts the max out of place: 10 B held, ~52 B moved; "compiled", the unfused loss under
    # torch.compile (torchtitan since April 2025): 4 B held, ~8 B moved, unfused when the job is eager
    loss: str = "fused"
    # fp8 scaling recipe (with precision fp8): "tensorwise" (one scale per tensor: Transformer
    # Engine, torchao's tensorwise) or "rowwise" (one per row: torchao's rowwise); see rates.fp8_cast_bytes
    fp8_recipe: str = "tensorwise"
    # fp8 weights cast once per step and cached across its micro-batches (Transformer Engine's
    # is_first_microbatch, which Megatron-core sets at the start of every step:
    # MegatronModule.set_is_first_microbatch); False: recast every micro-batch (torchao's float8
    # training, whose casts run in each forward)
    fp8_weight_cache: bool = True
    # what the fp8 linear layers save of their inputs for the weight gradient: "fp8", the quantized
    # copy (1 B per element; Transformer Engine's Linear, LayerNormLinear, LayerNormMLP and
    # GroupedLinear keep the cast input with column-wise usage), or "bf16", the high-precision
    # input, recast in backward (torchao's float8: matmul_with_hp_or_float8_args saves input_hp);
    # see rates.stored_per_token
    fp8_saved_inputs: str = "fp8"
    # with precision fp8 under ZeRO-3/FSDP: the layers' weights are cast to fp8 before their
    # all-gather (torchao's enable_fsdp_float8_all_gather, off by default in torchtitan), so the
    # gathers move, and the gathered buffers hold, 1 B per layer parameter instead of 2 (the
    # embedding and the output layer stay bf16; the gradients' reduce-scatter is unchanged)
    fp8_all_gather: bool = False
    # fp8's GEMM speedup only for the linears whose per-device shape clears torchao's H100
    # thresholds (torchao.float8 _auto_filter_for_rowwise / _auto_filter_for_tensorwise, drawn
    # from its float8 linear benchmarks: below them "worse performance"); the others run at the
    # bf16 rate and still pay their casts (rates.fp8_gains). False: every linear gains
    fp8_gain_thresholds: bool = False
    # ZeRO-3/FSDP collectives issued a layer ahead (FSDP2's implicit prefetching: the next block's
    # all-gather in forward, the previous block's all-gather and the next's reduce-scatter in
    # backward, each on its own stream): all but a micro-batch's first all-gather and last
    # reduce-scatter run under a neighbouring layer's compute while they are shorter than it
    # (data_parallel.py); False: the share Job.dp_overlap hides
    zero3_prefetch: bool = False
    # sequence parallelism's all-gathered inputs of the column-parallel layers are saved for their
    # weight gradients (torchtitan: PrepareModuleInput gathers the norm's output to Replicate and
    # F.linear saves that input), so (1 - 1/tp) of two h-wide inputs more per token and layer stay
    # on each TP rank (activations.py); False: re-gathered in backward (Megatron's sequence
    # parallelism saves the shard and all-gathers again for the weight gradient)
    sp_saves_gathered: bool = False
    # sequence parallelism's backward all-gathers the column-parallel layers' saved shards again
    # for their weight gradients (cost.py: time): Megatron's LinearWithGradAccumulationAndAsync-
    # Communication and nanotron's column linears (tp_recompute_allgather) launch it before the
    # input-gradient GEMM and wait for it before the weight gradient; False: not counted
    sp_regather: bool = False
    # the fused attention kernel (planner/attention.py: "fa2", "cudnn", "fa3"): its measured speed
    # replaces the attention prior on devices where the catalog has measurements of it; "" = the prior
    attention_kernel: str = ""
    # bytes per gradient kept and reduced; 0 = by precision: fp32 (4 B) with bf16 and fp8 (Megatron
    # forces fp32 accumulation and reduction with bf16; torchtitan's FSDP2 reduce dtype; nanotron's
    # fp32 accumulator), 2 B with fp16 (Megatron without --accumulate-allreduce-grads-in-fp32 and
    # DeepSpeed reduce fp16 gradients in fp16)
    grad_bytes: int = 0
    # efficiencies achieved / bf16 peak; None = the priors above from the device's matmul_eff (set
    # them when measured, e.g. from a trace); arrays allowed: one value per configuration
    gemm_eff: float | np.ndarray | None = None
    attn_eff: float | np.ndarray | None = None
    # calibration multiplies the efficiencies and the communication times
    gemm_scale: float | np.ndarray = 1.0
    attn_scale: float | np.ndarray = 1.0
    # 1 / the fraction of the links' bandwidth achieved: divides every link's bandwidth, so the
    # transfers are slower before the overlap rules hide what they can (links.Links.bandwidth)
    comm_scale: float | np.ndarray = 1.0
    # multiplies transfer time over inter-node links only (1 / the achieved fraction of the catalog's
    # inter-node bandwidth, on top of comm_scale): the network tier a cluster may fall short on
    inter_scale: float | np.ndarray = 1.0
    # seconds per layer and micro-batch (forward and backward) that the device waits on the host:
    # launches and host synchronisations the GPU cannot run ahead of (cost.py); 0 = none, the prior;
    # set by a calibration, a traced what-if's host-bound idle or --host-wait-us
    layer_overhead_s: float | np.ndarray = 0.0
    # share of the DP/FSDP traffic hidden behind compute (cost.py), never more than its window;
    # DP_OVERLAP the prior, a trace's measured share, or --dp-overlap
    dp_overlap: float | np.ndarray = DP_OVERLAP
    # a measured cluster network (planner/network.py): collectives get its bus bandwidth by the
    # nodes they span instead of the catalog's nominal link rates
    network: NetworkProfile | None = None

    @property
    def capacity_bytes(self) -> float:
        """Memory per device the strategies must fit in, bytes (Hardware.capacity_bytes; a device
        without a memory size is taken as an 80 GiB part)."""
        return self.hw.capacity_bytes or 80 * 2**30 * HBM_VISIBLE

    @property
    def reserve_bytes(self) -> float:
        """The framework reserve per device in bytes (reserve_gb, resolved by __post_init__)."""
        return float(self.reserve_gb or 0.0) * 1e9

    @property
    def loss_run(self) -> str:
        """The loss's kernels as the job runs them: ``loss``, except that a compiled loss in an eager
        job (fused_elementwise False: no torch.compile) runs unfused."""
        return "unfused" if self.loss == "compiled" and not self.fused_elementwise else self.loss

    @property
    def loss_bytes(self) -> tuple[float, float]:
        """(bytes per logit held at the loss's peak, bytes per logit moved): LOSS_BYTES of loss_run."""
        return LOSS_BYTES[self.loss_run]

    @property
    def swiglu_eager(self) -> bool:
        """The gated MLP's activation runs as separate eager ops (eager_swiglu, or every
        elementwise op eager)."""
        return self.eager_swiglu or not self.fused_elementwise

    def __post_init__(self) -> None:
        for name in ("devices", "devices_per_node", "global_batch", "seq_len"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                flag = "--" + name.replace("_", "-")
                raise ConfigError(
                    f"{name.replace('_', ' ')} must be a whole number >= 1, not {v!r}", fix=f"pass a positive {flag}"
                )
        if self.devices > self.devices_per_node and self.devices % self.devices_per_node:
            # the link tiers (intra-node, inter-node) and TP-within-a-node assume whole nodes
            fits = max(d for d in divisors(self.devices) if d <= self.devices_per_node)
            raise ConfigError(
                f"{self.devices} devices do not fill whole nodes of {self.devices_per_node}",
                fix=f"pass the devices per node the job really has as --devices-per-node (e.g. {fits}; TPUs: its slice size)",
            )
        reserve = self.reserve_gb if self.reserve_gb is not None else 0.0 if self.hw.static_memory else RESERVE_GB
        object.__setattr__(self, "reserve_gb", reserve)
        if not 0 <= reserve < math.inf:
            raise ConfigError(f"reserve must be >= 0 GB, not {self.reserve_gb}", fix="e.g. --reserve-gb 3")
        if self.precision == "fp8" and not self.hw.peak_tflops.get("fp8"):
            raise ConfigError(
                f"{self.hw.name} has no fp8 peak in the hardware catalog (its matrix units do not run fp8)",
                fix="use --precision bf16, or add the device's fp8 peak to data/hardware.yaml",
            )
        if self.sp_saves_gathered and self.sp_regather:
            raise ConfigError(
                "sequence parallelism either keeps its gathered inputs (torchtitan) or gathers them again in backward (Megatron, nanotron), not both",
                fix="drop --sp-saves-gathered or --sp-regather",
            )
        if self.pipeline_split_embedding and self.pipeline_split_cost:
            raise ConfigError(
                "the pipeline split is either by layers with the embedding and loss counted (Megatron) or by cost (nanotron), not both",
                fix="drop --pipeline-split-embedding or --pipeline-split-cost",
            )
        if self.loss not in LOSS_BYTES:
            raise ConfigError(
                f"loss must be one of {', '.join(LOSS_BYTES)}, not {self.loss!r}", fix="e.g. --loss unfused"
            )
        if self.fp8_saved_inputs not in ("fp8", "bf16"):
            raise ConfigError(
                f"fp8 saved inputs must be fp8 or bf16, not {self.fp8_saved_inputs!r}",
                fix="e.g. --fp8-saved-inputs bf16 (torchao)",
            )
        if self.attention_kernel not in ("", *ATTENTION_KERNELS):
            raise ConfigError(
                f"attention kernel must be one of {', '.join(ATTENTION_KERNELS)}, not {self.attention_kernel!r}",
                fix="e.g. --attention-kernel fa2 (FlashAttention-2, PyTorch SDPA's flash backend)",
            )
        if self.fp8_recipe not in FP8_RECIPES:
            raise ConfigError(
                f"fp8 recipe must be one of {', '.join(FP8_RECIPES)}, not {self.fp8_recipe!r}",
                fix="e.g. --fp8-recipe rowwise",
            )
        if self.network is not None and self.network.device and self.network.device.lower() != self.hw.name.lower():
            raise ConfigError(
                f"network {self.network.name} was measured on {self.network.device} nodes, not {self.hw.name}",
                fix=f"pass --hardware {self.network.device}, or leave --network out",
            )
        if self.network is not None and self.network.devices_per_node != self.devices_per_node:
            raise ConfigError(
                f"network {self.network.name} was measured with {self.network.devices_per_node} devices per node, "
                f"not {self.devices_per_node}",
                fix=f"pass --devices-per-node {self.network.devices_per_node}, or leave --network out",
            )
        if not 1.0 <= self.moe_imbalance < math.inf:
            raise ConfigError(
                f"MoE imbalance must be >= 1 (max / mean tokens per expert rank), not {self.moe_imbalance}",
                fix="e.g. --moe-imbalance 1.2; 1 is perfectly balanced routing",
            )
        if (
            isinstance(self.layer_overhead_s, float | int) and not 0 <= self.layer_overhead_s < math.inf
        ):  # (calibration grids pass arrays)
            raise ConfigError(
                f"host wait must be a number >= 0, not {self.layer_overhead_s * 1e6:g} us per layer and micro-batch",
                fix="e.g. --host-wait-us 200",
            )
        if isinstance(self.dp_overlap, float | int) and not 0 <= self.dp_overlap <= 1:  # (a NaN fails too)
            raise ConfigError(
                f"DP overlap must be a share from 0 to 1, not {self.dp_overlap:g}",
                fix="e.g. --dp-overlap 0 when the gradients are reduced after the backward",
            )
        if not 0 < self.optimizer_bytes <= 64:
            raise ConfigError(
                f"optimizer states must take more than 0 and at most 64 bytes per parameter, not {self.optimizer_bytes:g}",
                fix="e.g. --optimizer-bytes 8 (fp32 master weights, Adam moments in bf16)",
            )
        if not 0 <= self.grad_accum_bytes < math.inf:
            raise ConfigError(
                f"gradient accumulation must move >= 0 bytes per parameter, not {self.grad_accum_bytes:g}",
                fix="e.g. --grad-accum-bytes 10 (nanotron's fp32 accumulator)",
            )
        if not 0 <= self.zero_gather_copy_s < math.inf:
            raise ConfigError(
                f"ZeRO gather copy time must be >= 0 us per tensor and rank, not {self.zero_gather_copy_s * 1e6:g}",
                fix="e.g. --zero-gather-copy-us 10 (nanotron's per-tensor all-gather)",
            )
        if not 0 <= self.deepep_sms < 1024:
            raise ConfigError(
                f"DeepEP SMs must be between 0 and 1023, not {self.deepep_sms}",
                fix="e.g. deepep_sms 20 (DeepEP's default)",
            )
        if self.ep_dispatch not in EP_DISPATCH:
            raise ConfigError(
                f"EP dispatch must be one of {', '.join(EP_DISPATCH)}, not {self.ep_dispatch!r}",
                fix="e.g. --ep-dispatch deepep (DeepEP's node-deduplicated dispatch)",
            )
        if self.zero3_gather not in ZERO3_GATHER:
            raise ConfigError(
                f"ZeRO-3 gather must be one of {', '.join(ZERO3_GATHER)}, not {self.zero3_gather!r}",
                fix="e.g. --zero3-gather tensor (XLA, DeepSpeed)",
            )
        if not 0 <= self.dp_bucket_mb < math.inf:
            raise ConfigError(
                f"DP bucket size must be >= 0 MB, not {self.dp_bucket_mb}",
                fix="e.g. --dp-bucket-mb 25 (PyTorch DDP's default)",
            )
        if self.grad_bytes == 0:
            object.__setattr__(self, "grad_bytes", 2 if self.precision == "fp16" else 4)
        if self.grad_bytes not in (2, 4):
            raise ConfigError(f"gradient bytes must be 2 or 4, not {self.grad_bytes}", fix="--grad-dtype bf16 or fp32")
