"""What a prediction assumes beyond the strategy: the job's framework properties and precision
details (set by --framework presets, flags or batch keys), as data for the JSON and one line for
the terminal, so a reader sees which kernels and recipes the numbers stand for."""

from __future__ import annotations

from typing import Any

from .attention import kernel_share
from .job import DP_OVERLAP, LOSS_BYTES, Job

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


def _flags(job: Job, *names: str) -> dict[str, bool]:
    """The boolean job settings among ``names`` that are on (those off are left out)."""
    return {n: True for n in names if getattr(job, n)}


def job_settings(job: Job) -> dict[str, Any]:
    """The settings the cost model reads from the job, by the names of the batch-record keys; the
    loss as it runs (a compiled loss in an eager job is unfused), gradients in bytes."""
    out: dict[str, Any] = {
        "precision": job.precision,
        "loss": job.loss_run,
        "fused_projections": job.fused_projections,
        "fused_elementwise": job.fused_elementwise,
        "eager_swiglu": job.swiglu_eager,
        "flash_attention": job.flash_attention,
        "grad_bytes": job.grad_bytes,
        "reserve_gb": job.reserve_gb,
    }
    if job.attention_kernel and job.flash_attention:
        measured = kernel_share(job.attention_kernel, job.hw.name, job.seq_len) is not None
        out["attention_kernel"] = (
            job.attention_kernel if measured else f"{job.attention_kernel}: not measured on {job.hw.name}, the prior"
        )
    if job.precision == "fp8":
        out |= {
            "fp8_recipe": job.fp8_recipe,
            "fp8_weight_cache": job.fp8_weight_cache,
            "fp8_saved_inputs": job.fp8_saved_inputs,
        }
        out |= _flags(job, "fp8_all_gather", "fp8_gain_thresholds")
    out |= _flags(job, "kv_repeated", "zero3_prefetch", "sp_saves_gathered", "sp_regather")
    if job.model.n_experts:
        out["moe_imbalance"] = job.moe_imbalance
    if job.dp_bucket_mb:
        out["dp_bucket_mb"] = job.dp_bucket_mb
    out |= _flags(job, "param_gather_overlap", "zero_sync_after_backward")
    if job.zero_gather_copy_s:
        out["zero_gather_copy_us"] = job.zero_gather_copy_s * 1e6
    if job.grad_accum_bytes:
        out["grad_accum_bytes"] = job.grad_accum_bytes
    if job.optimizer_bytes != 12.0:
        out["optimizer_bytes"] = job.optimizer_bytes
    if job.zero3_gather != "layer":
        out["zero3_gather"] = job.zero3_gather
    if job.ep_dispatch != "all_to_all":
        out["ep_dispatch"] = job.ep_dispatch
    if job.network is not None:
        out["network"] = job.network.name
    out |= _flags(job, "pipeline_split_embedding", "pipeline_split_cost", "hidden_dropout")
    if isinstance(job.layer_overhead_s, float | int) and job.layer_overhead_s > 0:
        out["host_wait_us"] = job.layer_overhead_s * 1e6
    if isinstance(job.dp_overlap, float | int) and job.dp_overlap != DP_OVERLAP:
        out["dp_overlap"] = float(job.dp_overlap)
    return out


def settings_line(st: dict[str, Any]) -> str:
    """One line: ``assumed: ...`` in the order the cost model's terms come."""
    parts = [
        f"{_LOSS_TEXT[st['loss']]} ({LOSS_BYTES[st['loss']][0]:g} B per logit live)",
        "fused q/k/v and gate/up GEMMs" if st["fused_projections"] else "separate q, k, v (and gate, up) GEMMs",
        *(["K and V repeated to every query head"] if st.get("kv_repeated") else []),
        *(["ZeRO-3 collectives prefetched a layer ahead"] if st.get("zero3_prefetch") else []),
        *(["sequence parallelism keeps its gathered inputs"] if st.get("sp_saves_gathered") else []),
        *(["sequence parallelism re-gathers its inputs in backward"] if st.get("sp_regather") else []),
        "fused elementwise kernels" if st["fused_elementwise"] else "eager elementwise ops",
        *(["eager SwiGLU"] if st["eager_swiglu"] and st["fused_elementwise"] else []),
        (
            f"flash attention ({_KERNEL_TEXT.get(st['attention_kernel'], st['attention_kernel'])})"
            if st.get("attention_kernel")
            else "flash attention"
        )
        if st["flash_attention"]
        else "attention scores materialized",
        f"{'fp32' if st['grad_bytes'] == 4 else '16-bit'} gradients",
    ]
    if st["precision"] == "fp8":
        parts.append(
            f"fp8 {st['fp8_recipe']}, weights cast {'once per step' if st['fp8_weight_cache'] else 'every micro-batch'}, "
            f"{st['fp8_saved_inputs']} inputs saved"
            + (", FSDP gathers fp8 weights" if st.get("fp8_all_gather") else "")
            + (", no fp8 gain below torchao's shape thresholds" if st.get("fp8_gain_thresholds") else "")
        )
    if "moe_imbalance" in st and st["moe_imbalance"] != 1.0:
        parts.append(f"MoE imbalance {st['moe_imbalance']:g}")
    if st.get("optimizer_bytes"):
        parts.append(f"optimizer states {st['optimizer_bytes']:g} B per parameter")
    if st.get("grad_accum_bytes"):
        parts.append(
            f"gradients accumulated by a separate kernel ({st['grad_accum_bytes']:g} B per parameter and micro-batch)"
        )
    if st.get("zero_gather_copy_us"):
        parts.append(
            f"ZeRO weights gathered tensor by tensor ({st['zero_gather_copy_us']:g} us of host time per tensor and rank)"
        )
    if st.get("zero3_gather") == "tensor":
        parts.append("ZeRO-3 weights gathered tensor by tensor")
    if st.get("ep_dispatch") == "deepep":
        parts.append("EP tokens sent once per destination node (DeepEP)")
    if st.get("network"):
        parts.append(f"network {st['network']}")
    if st.get("pipeline_split_embedding"):
        parts.append("embedding and loss counted as pipeline layers")
    if st.get("pipeline_split_cost"):
        parts.append("pipeline stages balanced by cost, the output layer's included")
    if st.get("hidden_dropout"):
        parts.append("hidden dropout masks kept")
    if st.get("host_wait_us"):
        parts.append(f"host wait {st['host_wait_us']:.0f} us per layer and micro-batch")
    if "dp_overlap" in st:
        parts.append(
            f"{st['dp_overlap']:.0%} of the DP/FSDP traffic hidden at most"
            if st["dp_overlap"]
            else "DP/FSDP traffic not hidden"
        )
    return "assumed: " + ", ".join(parts)
