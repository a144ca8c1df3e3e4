"""The ``plan`` subcommand's options."""

from __future__ import annotations

import argparse
from typing import Any

from ..argtypes import positive, positive_float


def add_plan_parser(sub: Any) -> argparse.ArgumentParser:
    pl = sub.add_parser("plan", help="search parallel/memory strategies; predict memory, step time and MFU")
    pl.add_argument("--model", help="catalog name (e.g. llama3-70b) or a Hugging Face config.json")
    pl.add_argument("--hardware", help="device name or alias (h100, a100, mi300x, tpu-v5p, ...)")
    pl.add_argument(
        "--hardware-file",
        metavar="YAML",
        help="your own devices (layout of data/hardware.yaml; "
        "for --batch and --calibrate rows too, unless a row names its own hardware_file)",
    )
    pl.add_argument("--devices", type=int, help="number of devices")
    pl.add_argument("--global-batch", type=int, help="sequences per step")
    pl.add_argument(
        "--global-batch-tokens", type=int, metavar="T", help="or the batch in tokens per step (a multiple of --seq-len)"
    )
    pl.add_argument("--seq-len", type=int, help="tokens per sequence")
    pl.add_argument(
        "--devices-per-node",
        type=int,
        help="devices sharing the intra-node link (default: the catalog's, 8 for GPUs, the ICI slice for TPUs)",
    )
    pl.add_argument("--precision", default="bf16", help="bf16, fp16 or fp8 (fp8 GEMMs, the rest bf16)")
    pl.add_argument(
        "--reserve-gb",
        type=float,
        help="framework reserve per device: CUDA context, allocator slack (default 3 GB; "
        "0 on TPUs, whose XLA runtime assigns memory ahead of time)",
    )
    pl.add_argument(
        "--zero3-gather",
        choices=("layer", "tensor"),
        help="ZeRO-3/FSDP gathers a block's weights at once (layer: PyTorch FSDP, default) or each weight tensor "
        "just before its op (tensor: XLA, DeepSpeed ZeRO-3): sets the gathered memory held",
    )
    pl.add_argument(
        "--ep-dispatch",
        choices=("all_to_all", "deepep"),
        help="how expert parallelism sends tokens across nodes: all_to_all (every routed copy to its expert's rank: "
        "Megatron's alltoall dispatcher, torchtitan; default) or deepep (once per destination node, then over NVLink: "
        "DeepEP, Megatron's flex dispatcher; with the model's group-limited routing, n_group/topk_group)",
    )
    pl.add_argument(
        "--deepep-sms",
        type=int,
        metavar="N",
        help="SMs DeepEP's kernels take while they run (default 20, DeepEP's and Megatron's): with --ep-dispatch deepep "
        "the compute a hidden exchange overlaps runs on the device's other SMs",
    )
    pl.add_argument(
        "--grad-dtype",
        choices=("fp32", "bf16", "fp16"),
        help="gradients kept and reduced in (default fp32 with bf16/fp8: Megatron, FSDP2, nanotron; "
        "fp16 with fp16: Megatron, DeepSpeed)",
    )
    pl.add_argument(
        "--evaluate",
        metavar="STRATEGY",
        help='one configuration, e.g. "tp=8,pp=8,dp=16,vpp=2,mb=1,recompute=selective"',
    )
    pl.add_argument("--top", type=positive, default=20, help="configurations to show (default 20)")
    pl.add_argument(
        "--distinct",
        action="store_true",
        help="one row per layout (TP, PP, DP, CP, EP, ZeRO, recompute): its fastest "
        "schedule, virtual stages and micro-batch, so the rows are alternatives rather than variants",
    )
    pl.add_argument(
        "--where",
        metavar="CONDITIONS",
        help="search only configurations that meet these, e.g. "
        '"tp=8,pp<=4,recompute=selective|full" (key=v1|v2, key<=n, key>=n; keys as in --evaluate)',
    )
    pl.add_argument(
        "--no-flash-attention",
        dest="flash_attention",
        action="store_false",
        help="attention materializes the scores (no FlashAttention-style kernels)",
    )
    pl.add_argument(
        "--eager",
        dest="fused_elementwise",
        action="store_false",
        help="norms, rotary embeddings and activations run as eager PyTorch ops (no torch.compile or fused kernels)",
    )
    pl.add_argument(
        "--framework",
        metavar="NAME",
        help="model this training framework: its defaults for the flags below (a flag given wins) and only its "
        "recompute policies (data/frameworks.yaml: megatron, torchtitan, maxtext, nanotron, deepspeed)",
    )
    pl.add_argument(
        "--separate-projections",
        dest="fused_projections",
        action="store_false",
        default=None,
        help="q, k, v (and gate, up) are separate GEMMs, narrow for k and v under GQA and TP (torchtitan, "
        "Hugging Face, MaxText); default: fused (Megatron, nanotron)",
    )
    pl.add_argument(
        "--repeated-kv",
        dest="kv_repeated",
        action="store_true",
        default=None,
        help="K and V are repeated to every query head before the attention kernel (torchtitan's Llama: "
        "repeat_kv before SDPA): under GQA context parallelism exchanges n_heads-wide K and V",
    )
    pl.add_argument(
        "--attention-kernel",
        choices=("fa2", "cudnn", "fa3"),
        default=None,
        help="the fused attention kernel, timed on the device's architecture (data/attention_kernels.yaml): "
        "fa2 FlashAttention-2 (flash-attn, PyTorch SDPA's flash backend), cudnn (Transformer Engine on "
        "Hopper), fa3 FlashAttention-3; default: a prior of 0.45 x the matmul ceiling",
    )
    pl.add_argument(
        "--fp8-recipe",
        choices=("tensorwise", "rowwise"),
        help="with --precision fp8: scaling per tensor (default: Transformer Engine, torchao tensorwise) or per row "
        "(torchao rowwise: more cast traffic, bf16 TP all-gathers)",
    )
    pl.add_argument(
        "--fp8-recast-weights",
        dest="fp8_weight_cache",
        action="store_false",
        default=None,
        help="with --precision fp8: weights are cast to fp8 every micro-batch (torchao); default: once per step, "
        "cached across micro-batches (Transformer Engine under Megatron-core)",
    )
    pl.add_argument(
        "--fp8-saved-inputs",
        choices=("fp8", "bf16"),
        default=None,
        help="with --precision fp8: what the linear layers keep of their inputs for the weight gradient: the "
        "fp8 copy (default: Transformer Engine) or the bf16 input, recast in backward (torchao's float8)",
    )
    pl.add_argument(
        "--fp8-all-gather",
        dest="fp8_all_gather",
        action="store_true",
        default=None,
        help="with --precision fp8 and ZeRO-3/FSDP: the layers' weights are cast to fp8 before their all-gather "
        "(torchao's enable_fsdp_float8_all_gather): half the gather traffic and gathered buffers",
    )
    pl.add_argument(
        "--fp8-gain-thresholds",
        dest="fp8_gain_thresholds",
        action="store_true",
        default=None,
        help="with --precision fp8: only linears whose per-device shape clears torchao's H100 thresholds run "
        "faster than bf16 (the torchtitan preset; torchao converts narrow TP shards too)",
    )
    pl.add_argument(
        "--zero3-prefetch",
        dest="zero3_prefetch",
        action="store_true",
        default=None,
        help="ZeRO-3/FSDP collectives run a layer ahead under the neighbouring layer's compute (FSDP2's implicit "
        "prefetching; the torchtitan preset): only a micro-batch's first all-gather and last reduce-scatter are exposed "
        "while each is shorter than a layer's compute",
    )
    pl.add_argument(
        "--sp-saves-gathered",
        dest="sp_saves_gathered",
        action="store_true",
        default=None,
        help="sequence parallelism keeps the all-gathered inputs of the column-parallel layers for their weight "
        "gradients (torchtitan's DTensor plan; the torchtitan preset) instead of gathering them again in backward",
    )
    pl.add_argument(
        "--sp-regather",
        dest="sp_regather",
        action="store_true",
        default=None,
        help="count the time of sequence parallelism's backward all-gathers of the column-parallel inputs, 2 per "
        "layer under the input-gradient GEMMs (Megatron, nanotron; their presets)",
    )
    pl.add_argument(
        "--overlap-param-gather",
        dest="param_gather_overlap",
        action="store_true",
        help="ZeRO-1/2: the updated weights' all-gather runs under the next forward (Megatron --overlap-param-gather)",
    )
    pl.add_argument(
        "--pipeline-split-embedding",
        action="store_true",
        help="the embedding and the loss count as one layer each when the layers are split over pipeline stages: "
        "the first and the last stage hold one layer fewer (Megatron --account-for-embedding-in-pipeline-split "
        "--account-for-loss-in-pipeline-split, set by Megatron-Bridge's Llama 3.1 405B recipe)",
    )
    pl.add_argument(
        "--pipeline-split-cost",
        action="store_true",
        default=None,
        help="pipeline stages are filled by the blocks' cumulative cost, the output layer's (V h) against a "
        "layer's, as nanotron's build_model does: the last stage holds fewer layers, the first more "
        "(the nanotron preset)",
    )
    pl.add_argument(
        "--hidden-dropout",
        action="store_true",
        help="the residual branches' dropout is on (Megatron --hidden-dropout > 0, the 2021-22 GPT runs): a 1-byte "
        "mask per element after attention and after the MLP is kept for backward",
    )
    pl.add_argument(
        "--zero-sync-after-backward",
        dest="zero_sync_after_backward",
        action="store_true",
        help="ZeRO-1/2: gradients are all-reduced after the backward, exposed (nanotron with fp32 gradient accumulation)",
    )
    pl.add_argument(
        "--zero-gather-copy-us",
        dest="zero_gather_copy_us",
        type=float,
        metavar="US",
        help="ZeRO-1/2: host microseconds per parameter tensor and DP rank the weights' all-gather spends putting "
        "shards back one at a time (nanotron: about 10); default 0, a flat buffer gathered in place",
    )
    pl.add_argument(
        "--grad-accum-bytes",
        dest="grad_accum_bytes",
        type=float,
        metavar="B",
        help="bytes per parameter and micro-batch a separate gradient-accumulation kernel moves after each "
        "backward (nanotron's fp32 accumulator: 10, the nanotron preset); default 0, accumulated in place",
    )
    pl.add_argument(
        "--optimizer-bytes",
        dest="optimizer_bytes",
        type=float,
        metavar="B",
        help="bytes per parameter of the optimizer's states (default 12: fp32 master weights, Adam's m and v; "
        "8 with the moments in bf16, as DeepSeek-V3 and Megatron's precision-aware optimizer keep them)",
    )
    pl.add_argument(
        "--dp-bucket-mb",
        type=float,
        metavar="MB",
        help="gradients reduced under the backward in buckets of this many MB, each paying its own latency "
        "(PyTorch DDP and nanotron: 25); default: one collective",
    )
    pl.add_argument(
        "--no-sequence-parallel",
        dest="sequence_parallel",
        action="store_false",
        default=True,
        help="TP without sequence parallelism (nanotron's tp_mode ALL_REDUCE, Megatron without --sequence-parallel): "
        "the norms' inputs and outputs whole on every TP rank, their traffic repeated (strategy key sp=0)",
    )
    pl.add_argument(
        "--eager-swiglu",
        action="store_true",
        default=None,
        help="the gated MLP's activation and product run as separate PyTorch ops though the norms are fused "
        "(nanotron): act(gate) is stored too, 4 f per token instead of 3, and 10 B per element moved instead of 6",
    )
    pl.add_argument(
        "--loss",
        choices=("fused", "unfused", "copy", "compiled", "te"),
        default=None,
        help="the loss's kernels: fused (in place on one fp32 copy: Megatron's native fused loss; the default), "
        "te (Transformer Engine's: the gradient written in place into the bf16 logits, 2 B per logit live; "
        "Megatron's cross_entropy_fusion_impl=te, set by Megatron-Bridge's performance recipes), "
        "unfused (F.cross_entropy on an fp32 upcast: torchtitan, Hugging Face; = --unfused-loss), "
        "copy (nanotron: the max subtracted out of place, 10 B per logit live), "
        "compiled (F.cross_entropy under torch.compile: torchtitan since 2025-04; 4 B per logit live)",
    )
    pl.add_argument(
        "--unfused-loss",
        dest="fused_loss",
        action="store_false",
        default=True,
        help="= --loss unfused: PyTorch's F.cross_entropy on an fp32 upcast (torchtitan, Hugging Face), 12 B per logit "
        "at its peak instead of a fused vocab-parallel loss's 6 (Megatron)",
    )
    pl.add_argument(
        "--moe-imbalance",
        type=float,
        metavar="F",
        help="MoE routing imbalance: tokens on the most loaded expert-parallel rank / the mean (default 1, balanced); "
        "scales the expert GEMMs, the all-to-all and the dispatched activations",
    )
    pl.add_argument(
        "--host-wait-us",
        type=float,
        metavar="US",
        help="microseconds per layer and micro-batch the device waits on the host (launches, host syncs; default 0), "
        "e.g. what --calibrate fitted on your runs, to reuse in a search or a --batch sweep",
    )
    pl.add_argument(
        "--dp-overlap",
        type=float,
        metavar="SHARE",
        help="share (0-1) of the data-parallel / FSDP gradient and weight traffic the framework hides behind "
        "compute, never more than its window (default 0.7; 0: the gradients are reduced after the backward, as "
        "Megatron without --overlap-grad-reduce or Megatron-LM's 2021 DDP did; with --from-analysis it replaces "
        "the trace's measured share)",
    )
    pl.add_argument(
        "--network",
        metavar="NAME",
        help="a measured cluster network: a name from data/networks.yaml (e.g. hf-h100) or your own YAML file "
        "of that layout (FILE.yaml, FILE.yaml#NAME): collective bandwidth and latency by the nodes a group spans, "
        "instead of the catalog's nominal links",
    )
    pl.add_argument(
        "--tp-across-nodes",
        action="store_true",
        help="let the search put a TP group across nodes (default: TP within a node)",
    )
    pl.add_argument(
        "--ep-overlap",
        action="store_true",
        help="the framework overlaps the MoE all-to-all with another micro-batch (DualPipe-style, Megatron EP overlap)",
    )
    pl.add_argument(
        "--tp-overlap",
        nargs="?",
        const="full",
        default=None,
        choices=("none", "full", "bwd", "bwd+shard"),
        help="how the framework overlaps TP communication with GEMMs: full (the default when the flag is "
        "given: Megatron --tp-comm-overlap, PyTorch async TP), bwd (Megatron with sequence parallelism: "
        "backward reduce-scatter under the weight-gradient GEMM), bwd+shard (nanotron async TP), none",
    )
    pl.add_argument("--json", action="store_true", help="print JSON instead of the table")
    pl.add_argument("--html", metavar="OUT", help="write stacked memory/time bars of the top-k as HTML")
    pl.add_argument(
        "--baseline", metavar="STRATEGY", help="what-if: the strategy of a measured run (with --measured-step-s)"
    )
    pl.add_argument(
        "--measured-step-s", type=positive_float, metavar="S", help="what-if: measured step time of --baseline"
    )
    pl.add_argument("--batch", metavar="FILE.jsonl", help="evaluate many records, one JSON line out per record")
    pl.add_argument(
        "--calibrate",
        metavar="RUNS.csv",
        help="fit efficiencies to measured runs first (columns: model, hardware, "
        "devices, global_batch, seq_len, strategy, and step_time_s or analysis: a stepscope analyze --json report "
        "of the run); accuracy reported leave-one-out",
    )
    pl.add_argument(
        "--from-analysis",
        metavar="REPORT.json",
        help="what-if from a measured trace: use the efficiencies and step "
        "time measured in this stepscope analyze --json report (with --baseline = the traced run's strategy)",
    )
    pl.add_argument("--rank", type=int, help="with --from-analysis: which rank of the report (default: the first)")
    return pl
