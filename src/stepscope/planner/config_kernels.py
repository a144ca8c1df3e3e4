"""Framework settings, part one: precision, kernels, the loss, fp8 and the pipeline split (the
groups config.py composes; knobs.py says what each field's metadata means)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .attention import kernel_share
from .knobs import Checked, Report, knob, on
from .vocab import LOSS_BYTES, AttentionKernel, Fp8Recipe, Fp8SavedInputs, GradDtype, LossKind, Precision

_KERNEL_TEXT = {
    "fa2": "FlashAttention-2's measured speed",
    "cudnn": "cuDNN's measured speed",
    "fa3": "FlashAttention-3's measured speed",
}
_LOSS_TEXT = {
    "fused": "fused vocab-parallel loss",
    "unfused": "eager F.cross_entropy on fp32 logits",
    "copy": "nanotron's sharded cross entropy",
    "compiled": "compiled F.cross_entropy",
    "te": "Transformer Engine's cross entropy (gradient in place)",
}


def _kernel_as_run(job: Any) -> str | None:
    """The attention kernel as the job runs it: none without flash attention; named with a note
    where the catalog has no measurement of it on the device (the prior is used then)."""
    kernel = job.framework.kernels.attention_kernel
    if not (kernel and job.framework.kernels.flash_attention):
        return None
    measured = kernel_share(kernel, job.hw.name, job.seq_len) is not None
    return kernel if measured else f"{kernel}: not measured on {job.hw.name}, the prior"


def _flash_says(v: bool, st: Mapping[str, Any]) -> str:
    if not v:
        return "attention scores materialized"
    kernel = st.get("attention_kernel")
    return f"flash attention ({_KERNEL_TEXT.get(kernel, kernel)})" if kernel else "flash attention"


@dataclass(frozen=True, kw_only=True)
class PrecisionSettings(Checked):
    compute: Precision = knob(
        "bf16",
        key="precision",
        help="bf16, fp16 or fp8 (fp8 GEMMs, the rest bf16); MFU is always against the bf16 peak",
        report=Report(rank=10, when="always"),
    )
    grads: GradDtype | None = knob(
        None,
        key="grad_dtype",
        help="gradients kept and reduced in; none = by precision: fp32 with bf16 and fp8, fp16 with fp16",
        source="Megatron forces fp32 accumulation and reduction with bf16; torchtitan's FSDP2 reduce dtype; "
        "nanotron's fp32 accumulator; Megatron without --accumulate-allreduce-grads-in-fp32 and DeepSpeed "
        "reduce fp16 gradients in fp16",
        example="bf16",
        report=Report(
            rank=70,
            when="always",
            key="grad_bytes",
            as_run=lambda job: job.grad_bytes,
            says=lambda v, st: f"{'fp32' if v == 4 else '16-bit'} gradients",
            line=100,
        ),
    )


@dataclass(frozen=True, kw_only=True)
class Kernels(Checked):
    flash_attention: bool = knob(
        True,
        key="flash_attention",
        help="false: attention materializes the s x s scores (no FlashAttention-style kernel): every score "
        "is computed (no causal skipping) and moved through HBM",
        source="2021 Megatron (no fused attention kernel)",
        report=Report(rank=60, when="always", says=_flash_says, line=90),
    )
    fused_elementwise: bool = knob(
        True,
        key="fused_elementwise",
        help="false: norms, rotary embeddings and the MLP activation run as separate eager PyTorch ops (no "
        "torch.compile or fused kernels), ~3.5x the elementwise bytes of a Llama block; a compiled loss "
        "runs unfused then",
        report=Report(
            rank=40,
            when="always",
            says=lambda v, st: "fused elementwise kernels" if v else "eager elementwise ops",
            line=70,
        ),
    )
    eager_swiglu: bool = knob(
        False,
        key="eager_swiglu",
        help="a gated MLP's act(gate) * up runs as separate PyTorch ops though the norms are fused: act(gate) "
        "is stored too (4 f per token instead of 3) and 10 B per element moved instead of 6; implied by "
        "fused_elementwise false",
        source="nanotron's GLUActivation: torch.split, F.silu, a multiply",
        report=Report(
            rank=50,
            when="always",
            as_run=lambda job: job.swiglu_eager,
            says=lambda v, st: "eager SwiGLU" if v and st["fused_elementwise"] else None,
            line=80,
        ),
    )
    fused_projections: bool = knob(
        True,
        key="fused_projections",
        help="q, k, v (and a gated MLP's gate and up) in one GEMM each; false: separate GEMMs, so with GQA "
        "the k and v GEMMs are only kv_heads x head_dim / tp wide",
        source="true: Megatron's linear_qkv and linear_fc1, nanotron's qkv_proj and gate_up_proj; false: "
        "torchtitan, Hugging Face, MaxText's default",
        report=Report(
            rank=30,
            when="always",
            says=lambda v, st: "fused q/k/v and gate/up GEMMs" if v else "separate q, k, v (and gate, up) GEMMs",
            line=20,
        ),
    )
    kv_repeated: bool = knob(
        False,
        key="kv_repeated",
        help="K and V are repeated to every query head before the attention kernel: under GQA context "
        "parallelism exchanges, the no-recompute policies store and the copy moves n_heads-wide K and V",
        source="torchtitan's Llama: repeat_kv ahead of F.scaled_dot_product_attention; false: Megatron, "
        "nanotron, MaxText, flash-attn's GQA read kv_heads-wide K and V",
        report=Report(rank=150, says=on("K and V repeated to every query head"), line=30),
    )
    attention_kernel: AttentionKernel = knob(
        "",
        key="attention_kernel",
        help="the fused attention kernel, timed on the device's architecture (data/attention_kernels.yaml): "
        'fa2 FlashAttention-2, cudnn (Transformer Engine on Hopper), fa3 FlashAttention-3; "" = a prior of '
        "0.6 x the dense work's efficiency",
        example="fa2",
        report=Report(rank=90, as_run=_kernel_as_run),
    )


@dataclass(frozen=True, kw_only=True)
class Loss(Checked):
    kind: LossKind = knob(
        "fused",
        key="loss",
        help="the loss's kernels (bytes per logit held / moved): fused, a vocab-parallel cross entropy in "
        "place on one fp32 copy (6 / ~24); te, Transformer Engine's, the gradient in place in the bf16 "
        "logits (2 / 6); unfused, F.cross_entropy on an fp32 upcast (12 / ~44); copy, nanotron's sharded "
        "cross entropy, the max subtracted out of place (10 / ~52); compiled, the unfused loss under "
        "torch.compile (4 / ~8; unfused when fused_elementwise is false)",
        source="fused: Megatron's native fused loss; te: Megatron's cross_entropy_fusion_impl=te "
        "(Megatron-Bridge's performance recipes); unfused: torchtitan before April 2025, Hugging Face; "
        "copy: nanotron; compiled: torchtitan since April 2025 (components/loss.py, PR #1033); "
        "vocab.LOSS_BYTES counts each",
        example="unfused",
        report=Report(
            rank=20,
            when="always",
            as_run=lambda job: job.loss_run,
            says=lambda v, st: f"{_LOSS_TEXT[v]} ({LOSS_BYTES[v][0]:g} B per logit live)",
            line=10,
        ),
    )


@dataclass(frozen=True, kw_only=True)
class Fp8(Checked):
    GROUP = "fp8"
    recipe: Fp8Recipe = knob(
        "tensorwise",
        key="fp8_recipe",
        help="with precision fp8: one scale per tensor or per row (more cast traffic, bf16 TP all-gathers); "
        "rates.fp8_cast_bytes",
        source="tensorwise: Transformer Engine, torchao's tensorwise; rowwise: torchao's rowwise",
        example="rowwise",
        report=Report(rank=100, when="fp8", says=lambda v, st: f"fp8 {v}", line=110),
    )
    weight_cache: bool = knob(
        True,
        key="fp8_weight_cache",
        help="with precision fp8: weights cast once per step and cached across its micro-batches; false: "
        "recast every micro-batch",
        source="Transformer Engine's is_first_microbatch, which Megatron-core sets at the start of every "
        "step (MegatronModule.set_is_first_microbatch); false: torchao's float8 training, whose casts run "
        "in each forward",
        report=Report(
            rank=110,
            when="fp8",
            says=lambda v, st: f"weights cast {'once per step' if v else 'every micro-batch'}",
            line=111,
        ),
    )
    saved_inputs: Fp8SavedInputs = knob(
        "fp8",
        key="fp8_saved_inputs",
        help="with precision fp8: what the linear layers keep of their inputs for the weight gradient: the "
        "fp8 copy (1 B per element) or the bf16 input, recast in backward; rates.stored_per_token",
        source="fp8: Transformer Engine's Linear, LayerNormLinear, LayerNormMLP and GroupedLinear keep the cast "
        "input with column-wise usage; bf16: torchao's float8 (matmul_with_hp_or_float8_args saves input_hp)",
        example="bf16",
        report=Report(rank=120, when="fp8", says=lambda v, st: f"{v} inputs saved", line=112),
    )
    activation_cache: bool = knob(
        False,
        key="fp8_activation_cache",
        help="with precision fp8 and the layernorm_moe_act recompute policies: the MoE layers' SwiGLU inputs "
        "(each routed and shared expert's gate and up outputs) are kept in fp8 (1 B) and the attention output "
        "once in a 12-bit format (1.5 B) that serves both the attention backward and the output projection's "
        "weight gradient, instead of bf16 and a bf16 + fp8 pair; rates.norm_moe_act",
        source="DeepSeek-V3 technical report (arXiv 2412.19437) section 3.3.3, Low-Precision Storage: the "
        "inputs of the SwiGLU operator in MoE cached in FP8 with its output recomputed; the input of the "
        "Linear after the attention operator in a customized E5M6 format",
        report=Report(
            rank=125, when="fp8 changed", says=on("fp8-cached SwiGLU inputs, E5M6 attention output"), line=116
        ),
    )
    all_gather: bool = knob(
        False,
        key="fp8_all_gather",
        help="with precision fp8 under ZeRO-3/FSDP: the layers' weights are cast to fp8 before their "
        "all-gather, so the gathers move and the gathered buffers hold 1 B per layer parameter instead of 2 "
        "(the embedding and the output layer stay bf16; the gradients' reduce-scatter is unchanged)",
        source="torchao's enable_fsdp_float8_all_gather, off by default in torchtitan",
        report=Report(rank=130, when="fp8 changed", says=on("FSDP gathers fp8 weights"), line=113),
    )
    gain_thresholds: bool = knob(
        False,
        key="fp8_gain_thresholds",
        help="with precision fp8: only the linears whose per-device shape clears torchao's H100 thresholds "
        "run faster than bf16; the others run at the bf16 rate and still pay their casts (rates.fp8_gains)",
        source="torchao.float8 _auto_filter_for_rowwise / _auto_filter_for_tensorwise, drawn from its float8 "
        'linear benchmarks (below them "worse performance"); torchtitan converts narrow TP shards too',
        report=Report(rank=140, when="fp8 changed", says=on("no fp8 gain below torchao's shape thresholds"), line=114),
    )


@dataclass(frozen=True, kw_only=True)
class Pipeline(Checked):
    split_embedding: bool = knob(
        False,
        key="pipeline_split_embedding",
        help="the embedding and the loss count as one layer each when the layers are split over the stages, "
        "so the first and the last stage hold one transformer layer fewer (stages.stage_layers)",
        source="Megatron's account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split, "
        "set by Megatron-Bridge's Llama 3.1 405B recipe",
        report=Report(rank=290, says=on("embedding and loss counted as pipeline layers"), line=190),
    )
    split_cost: bool = knob(
        False,
        key="pipeline_split_cost",
        help="pipeline blocks placed by their cumulative cost (a layer 4 n_heads d_head h + 3 d_ff h, the "
        "output layer V h): a heavy output layer leaves the last stage fewer layers, the first more "
        "(stages.cost_split)",
        source="nanotron's build_model (get_block_compute_costs)",
        report=Report(rank=300, says=on("pipeline stages balanced by cost, the output layer's included"), line=200),
    )
    uneven_virtual_stages: bool = knob(
        False,
        key="uneven_virtual_stages",
        help="the search also interleaves 2, 3, 4, 6 or 8 virtual stages a rank where pp x vpp does not divide "
        "the layers, each rank's layers spread over its stages as evenly as they go: the framework takes the "
        "split as an explicit layout (megatron_layout.py)",
        source="Megatron's --pipeline-model-parallel-layout (pipeline_parallel_layer_layout.py), used by "
        "NVIDIA's Qwen3-235B recipe (94 layers, PP8 VP4) and DeepSeek-V3's (61 layers, PP16 VP2)",
    )
