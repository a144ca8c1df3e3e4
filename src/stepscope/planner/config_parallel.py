"""Framework settings, part two: ZeRO/FSDP and data parallelism, TP/SP overlap, MoE, the host and
memory (the groups config.py composes; knobs.py says what each field's metadata means)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .knobs import Checked, Report, knob, on
from .vocab import DP_OVERLAP, EpDispatch, TpOverlap, Zero3Gather


def _scalar(v: Any) -> Any:
    """A value the report shows: a number, not a calibration grid's array."""
    return v if isinstance(v, float | int) else None


@dataclass(frozen=True, kw_only=True)
class Zero(Checked):
    param_gather_overlap: bool = knob(
        False,
        key="param_gather_overlap",
        help="ZeRO-1/2: the updated weights' all-gather runs under the next step's first forward instead of "
        "after the optimizer step, exposed",
        source="Megatron --overlap-param-gather",
        report=Report(rank=210),
    )
    sync_after_backward: bool = knob(
        False,
        key="zero_sync_after_backward",
        help="ZeRO-1/2: the gradients are all-reduced (not reduce-scattered) after the whole backward pass, exposed",
        source="nanotron with fp32 gradient accumulation: trainer.py builds no DDP wrapper when "
        "accumulate_grad_in_fp32 and zero_stage > 0, then calls sync_gradients_across_dp with "
        'reduce_scatter=False after train_batch_iter ("too memory hungry, instead we run all_reduce")',
        report=Report(rank=220),
    )
    gather_copy_s: float = knob(
        0.0,
        key="zero_gather_copy_us",
        unit="us per tensor and rank",
        ge=0.0,
        lt=math.inf,
        scale=1e-6,
        unscale=1e6,
        example="10",
        help="ZeRO-1/2: host time per parameter tensor of the stage and DP rank that the updated weights' "
        "all-gather spends putting each shard back in place one small op at a time, exposed after the "
        "optimizer step; 0 = a flat buffer gathered in place (Megatron's distributed optimizer, DeepSpeed, FSDP)",
        source="nanotron: ZeroDistributedOptimizer._all_gather_params slices every tensor for every rank and "
        "all_gather_coalesced copy_s every (tensor, rank) pair from Python; about 10 us per pair "
        "(benchmarks/zero_gather_host.py)",
        report=Report(
            rank=230,
            says=lambda v, st: f"ZeRO weights gathered tensor by tensor ({v:g} us of host time per tensor and rank)",
            line=150,
        ),
    )
    grad_accum_bytes: float = knob(
        0.0,
        key="grad_accum_bytes",
        unit="B per parameter and micro-batch",
        ge=0.0,
        lt=math.inf,
        example="10",
        help="bytes per parameter of the stage and micro-batch a separate gradient-accumulation kernel moves "
        "after each backward (whole even under ZeRO-1); 0 where the weight-gradient GEMM accumulates in place "
        "(Megatron's gradient_accumulation_fusion) or gradients are reduce-scattered each micro-batch (FSDP)",
        source="nanotron's FP32GradientAccumulator.backward runs fp32_grad.add_(half_param.grad) for every "
        "parameter: read the bf16 gradient (2 B), read and write the fp32 one (8 B)",
        report=Report(
            rank=240,
            says=lambda v, st: f"gradients accumulated by a separate kernel ({v:g} B per parameter and micro-batch)",
            line=140,
        ),
    )
    gather: Zero3Gather = knob(
        "layer",
        key="zero3_gather",
        help="how ZeRO-3/FSDP gathers the weights (buffers.py): layer, a transformer block's weights in one "
        "collective, or tensor, each parameter tensor by itself just before its op; sets how much is held "
        "gathered at the peak, not the bytes moved",
        source="layer: PyTorch FSDP wrapped per block (torchtitan, Megatron's FSDP); tensor: XLA's SPMD "
        "partitioner (one all-gather per sharded array), DeepSpeed ZeRO-3's per-module fetch",
        example="tensor",
        report=Report(
            rank=260,
            says=lambda v, st: "ZeRO-3 weights gathered tensor by tensor" if v == "tensor" else None,
            line=160,
        ),
    )
    prefetch: bool = knob(
        False,
        key="zero3_prefetch",
        help="ZeRO-3/FSDP collectives issued a layer ahead, each on its own stream: all but a micro-batch's "
        "first all-gather and last reduce-scatter run under a neighbouring layer's compute while they are "
        "shorter than it (data_parallel.py); false: the share dp_overlap hides",
        source="FSDP2's implicit prefetching (the next block's all-gather in forward, the previous block's "
        "all-gather and the next's reduce-scatter in backward)",
        report=Report(rank=160, says=on("ZeRO-3 collectives prefetched a layer ahead"), line=40),
    )
    bucket_mb: float = knob(
        0.0,
        key="dp_bucket_mb",
        unit="MB",
        ge=0.0,
        lt=math.inf,
        example="25",
        help="ZeRO-0/1/2 gradients reduced under the backward in buckets of this many MB of gradients in the "
        "parameters' dtype, each its own collective paying its own ring latency; 0 = one collective",
        source="PyTorch DDP's bucket_cap_mb and nanotron's ddp_bucket_mb: 25 by default",
        report=Report(rank=200),
    )
    dp_overlap: float = knob(
        DP_OVERLAP,
        key="dp_overlap",
        unit="share",
        ge=0.0,
        le=1.0,
        example="0",
        help="share (0-1) of the DP/FSDP gradient and weight traffic hidden behind compute, never more than its "
        "window (data_parallel.py); 0: the gradients are reduced after the backward; with --from-analysis it "
        "replaces the trace's measured share",
        source="a prior; 0 for Megatron without --overlap-grad-reduce and Megatron-LM's 2021 DDP",
        report=Report(
            rank=330,
            as_run=lambda job: None if (v := _scalar(job.dp_overlap)) is None else float(v),
            says=lambda v, st: f"{v:.0%} of the DP/FSDP traffic hidden at most" if v else "DP/FSDP traffic not hidden",
            line=230,
        ),
    )


@dataclass(frozen=True, kw_only=True)
class TensorParallel(Checked):
    overlap: TpOverlap = knob(
        "none",
        key="tp_overlap",
        help="how TP communication overlaps the GEMMs (tp_overlap.py), for every strategy that states none: "
        "full (every collective under its GEMM), bwd (the backward reduce-scatter under the weight-gradient "
        "GEMM), bwd+shard, none",
        source="full: Megatron --tp-comm-overlap, PyTorch async TP; bwd: Megatron with sequence parallelism; "
        "bwd+shard: nanotron's tp_linear_async_communication",
        example="full",
    )
    sequence_parallel: bool = knob(
        True,
        key="sequence_parallel",
        help="TP with sequence parallelism; false: the norms' inputs and outputs whole on every TP rank, their "
        "traffic repeated (every strategy gets sp=0)",
        source="false: nanotron's tp_mode ALL_REDUCE, Megatron without --sequence-parallel",
        example="false",
    )
    sp_saves_gathered: bool = knob(
        False,
        key="sp_saves_gathered",
        help="sequence parallelism keeps the all-gathered inputs of the column-parallel layers for their weight "
        "gradients: (1 - 1/tp) of two h-wide inputs more per token and layer stay on each TP rank "
        "(activations.py); false: gathered again in backward",
        source="torchtitan: PrepareModuleInput gathers the norm's output to Replicate and F.linear saves that "
        "input; Megatron's sequence parallelism saves the shard and all-gathers again",
        report=Report(rank=170, says=on("sequence parallelism keeps its gathered inputs"), line=50),
    )
    sp_regather: bool = knob(
        False,
        key="sp_regather",
        help="count the time of sequence parallelism's backward all-gathers of the column-parallel layers' saved "
        "shards for their weight gradients, 2 per layer under the input-gradient GEMMs (tp_overlap.py)",
        source="Megatron's LinearWithGradAccumulationAndAsyncCommunication and nanotron's column linears "
        "(tp_recompute_allgather) launch it before the input-gradient GEMM and wait for it before the weight "
        "gradient",
        report=Report(rank=180, says=on("sequence parallelism re-gathers its inputs in backward"), line=60),
    )
    across_nodes: bool = knob(
        False,
        key="tp_across_nodes",
        help="let the search put a TP group across nodes (default: TP within a node)",
    )


@dataclass(frozen=True, kw_only=True)
class Moe(Checked):
    ep_dispatch: EpDispatch = knob(
        "all_to_all",
        key="ep_dispatch",
        help="how expert parallelism exchanges tokens across nodes (dispatch.py): all_to_all, every routed copy "
        "to its expert's rank; deepep, once per destination node, then over NVLink (with the model's "
        "group-limited routing, n_group/topk_group)",
        source="all_to_all: Megatron's alltoall dispatcher, torchtitan; deepep: DeepEP, Megatron's flex dispatcher",
        example="deepep",
        report=Report(
            rank=270,
            says=lambda v, st: "EP tokens sent once per destination node (DeepEP)" if v == "deepep" else None,
            line=170,
        ),
    )
    deepep_sms: int = knob(
        20,
        key="deepep_sms",
        unit="SMs",
        ge=0,
        lt=1024,
        help="SMs DeepEP's kernels take while they run: the compute under a hidden exchange runs on the rest",
        source="Megatron's moe_deepep_num_sms, DeepEP's Buffer.num_sms: 20; DeepSeek-V3's report, section 3.2.2",
    )
    imbalance: float = knob(
        1.0,
        key="moe_imbalance",
        unit="max / mean",
        ge=1.0,
        lt=math.inf,
        example="1.2",
        help="MoE routing imbalance: tokens on the most loaded expert-parallel rank / the mean (1 = balanced); "
        "each MoE layer waits for that rank, so its expert GEMMs and its share of the all-to-all take this "
        "factor longer and hold that much more dispatched activation",
        report=Report(rank=190, when="moe", says=lambda v, st: f"MoE imbalance {v:g}" if v != 1.0 else None, line=120),
    )
    across_tp: bool = knob(
        True,
        key="ep_across_tp",
        help="expert parallelism may take tensor and context ranks as well as data-parallel ones: ep x etp "
        "divides dp x cp x tp (an expert data-parallel group of dp x cp x tp / (ep x etp) ranks); false: ep "
        "divides dp",
        source="Megatron-core's parallel_state (expert groups over the data, context and tensor ranks); "
        "torchtitan's ParallelDims (EP borrows dp_shard, cp and, with expert TP 1, tp); MaxText's expert mesh "
        "axis, DeepSpeed's and nanotron's expert groups are carved from the data-parallel ranks only",
    )
    tile_rows: int = knob(
        0,
        key="moe_tile_rows",
        unit="rows",
        ge=0,
        lt=1 << 20,
        example="512",
        help="rows of the routed experts' grouped-GEMM tile, where each expert whose tokens start inside a "
        "tile computes that whole tile again: a device's grouped GEMMs compute about this many rows per "
        "local expert beyond its tokens (work.py); 0: groups padded by no more than the GEMM shape's own "
        "efficiency says",
        source="Megablox gmm/tgmm (MaxText kernels/megablox/backend.py, make_group_metadata: a group starting "
        "mid-tile visits that tile again, up to m/tm + groups - 1 tiles); MaxText base.yml "
        "wi/wo_tile_*_batch_seq 512",
    )
    ep_overlap: bool = knob(
        False,
        key="ep_overlap",
        help="the MoE all-to-all overlaps another micro-batch's compute (every strategy gets ep_overlap=1)",
        source="DualPipe-style schedules, Megatron's EP-communication overlap",
        example="true",
    )


@dataclass(frozen=True, kw_only=True)
class Host(Checked):
    wait_s: float = knob(
        0.0,
        key="host_wait_us",
        unit="us per layer and micro-batch",
        ge=0.0,
        lt=1e6,
        scale=1e-6,
        unscale=1e6,
        example="200",
        help="time per layer and micro-batch (forward and backward) the device waits on the host: launches and "
        "host synchronisations the GPU cannot run ahead of (cost.py); e.g. what --calibrate fitted on your runs",
        source="a prior of 0; a calibration or a traced what-if's host-bound idle replaces it",
        report=Report(
            rank=320,
            as_run=lambda job: _scalar(job.layer_overhead_s) and job.layer_overhead_s * 1e6,
            says=lambda v, st: f"host wait {v:.0f} us per layer and micro-batch",
            line=220,
        ),
    )


@dataclass(frozen=True, kw_only=True)
class Memory(Checked):
    reserve_gb: float | None = knob(
        None,
        key="reserve_gb",
        unit="GB",
        ge=0.0,
        lt=math.inf,
        example="3",
        help="framework reserve per device (driver context, allocator slack); none = by the device's runtime: "
        "3 GB under CUDA/ROCm, 0 where memory is assigned statically (XLA on TPU)",
        source="the CUDA context (~0.5-1 GB) and the caching allocator's fragmentation: a prior",
        report=Report(rank=80, when="always"),
    )
    memory_margin: float | None = knob(
        None,
        key="memory_margin",
        unit="share",
        ge=0.0,
        le=1.0,
        example="0",
        help="share of the device's memory a search keeps free beyond the reserve: rows that leave less "
        "are ranked after those that do (shown, not dropped); none = 0.05 under CUDA/ROCm, 0 where memory is "
        "assigned statically (XLA on TPU)",
        source="a policy against what the model does not see: the caching allocator's fragmentation and the "
        "memory model's own error (9.5% against 46 recorded peaks, BENCHMARKS.md); the same 5% the terminal "
        "flags as tight under --evaluate",
        report=Report(rank=85, when="changed"),
    )
    optimizer_bytes: float = knob(
        12.0,
        key="optimizer_bytes",
        unit="B per parameter",
        gt=0.0,
        le=64.0,
        example="8",
        help="bytes per parameter of the optimizer's states, sharded by ZeRO as the states are (states.py); the "
        "optimizer step moves these and a 4-byte gradient; 12: fp32 master weights and Adam's m and v",
        source="8 with the moments in bf16: DeepSeek-V3's report, section 3.3.3; Megatron-Core's "
        "--use-precision-aware-optimizer with --exp-avg-dtype/--exp-avg-sq-dtype bf16",
        report=Report(rank=250, says=lambda v, st: f"optimizer states {v:g} B per parameter", line=130),
    )
    hidden_dropout: bool = knob(
        False,
        key="hidden_dropout",
        help="residual-branch dropout on: a 1-byte mask per h-wide element after attention and after the MLP "
        "is kept for backward (activations.py); off in today's LLM recipes",
        source="Megatron's GPT runs of 2021-22 (--hidden-dropout 0.1, its default then)",
        report=Report(rank=310, says=on("hidden dropout masks kept"), line=210),
    )
