"""Compute-rate helpers of the cost model: matmul weights per layer, the efficiency priors, GEMM
shape efficiency, and the recompute policies counted from the model's shape (torchtitan's op-level
selective AC, MaxText's "minimal"); see planner/cost.py for the model."""

from __future__ import annotations

import numpy as np

from ..catalog.model_flops import ModelShape
from .attention import kernel_share
from .job import Job
from .vocab import ATTN_REL, GEMM_SHARE, MATMUL_EFF


def params(m: ModelShape) -> tuple[float, float, float]:
    """(dense params per layer, expert params per layer, embedding params) — matmul weights,
    averaged over the layers (hybrid models mix attention kinds; MoE models have dense layers)."""
    L = m.n_layers
    mixer = m.mixer_params_total() / L
    if m.n_experts:
        mult = 3 if m.gated_mlp else 2
        moe_frac = (L - m.first_dense_layers) / L
        dense = mixer + moe_frac * (mult * m.d_model * m.d_ff_expert * m.n_shared_experts + m.d_model * m.n_experts)
        dense += (1 - moe_frac) * m.dense_mlp_params()
        experts = moe_frac * float(mult * m.d_model * m.d_ff_expert * m.n_experts)
    else:
        dense, experts = mixer + m.dense_mlp_params(), 0.0
    return float(dense), experts, float(m.vocab * m.d_model)


def op_sac(m: ModelShape, seq: int) -> tuple[float, float]:
    """(activation bytes per token and layer / h, recompute factor) of torchtitan's op-level
    selective AC (``selective_ac_option = "op"``, torchtitan ``activation_checkpoint.py``): it saves
    the output of every op in its save list, the matmuls except every second one counted in forward
    order, and the attention kernel's, and recomputes the rest. A Llama block runs wq, wk, wv, wo,
    w1, w3, w2: wq, wv, w1, w2 are kept, wk, wo, w3 recomputed (GPT blocks: wq, wv, fc1 kept; wk,
    wo, fc2 recomputed). Saved, in bf16: wq, wv, w1 (and w2) outputs, the attention output (as wide
    as wq's) and the block's input. The recompute replays wk, wo, w3 (fc2) and the elementwise
    ops, not attention: factor = 1 + their FLOPs / (3 x the layer's forward FLOPs, causal attention
    included). Multiply-accumulates per token below."""
    h, q_w, kv_w, f, layer = _block(m, seq)
    kept = q_w + kv_w + f + (h if m.gated_mlp else 0.0) + q_w + h
    redone = (kv_w + q_w + f) * h
    return 2 * kept / h, 1.0 + redone / (3 * layer)


def norm_moe_act(
    m: ModelShape, eager_swiglu: bool = False, fp8_inputs: bool = False, fp8_cache: bool = False
) -> tuple[float, float]:
    """(activation bytes per token and layer / h, recomputed forward bytes per token and layer) of
    Megatron-core's ``--recompute-modules layernorm moe_act``: the two norms keep their inputs and
    recompute their outputs (2 h fewer stored: read h + write h each, 8 h B again in backward); in
    MoE layers each routed copy recomputes the experts' activation from the kept fc1 output (one
    f_e fewer: the gated product, or a plain MLP's activation output; gated: read 2 f_e + write f_e,
    6 f_e B). No GEMM is recomputed; dense layers keep their MLP activation.
    ``fp8_inputs`` (stored_per_token's fp8 count): Megatron then has the linear layers after a
    recomputed norm or expert activation save the original input instead of their fp8 copy
    (``set_for_recompute_input_layernorm``, ``set_for_recompute_pre_mlp_layernorm``,
    ``set_save_original_input(linear_fc2)`` in Megatron-core), so what is freed is every copy of
    those outputs the fp8 count holds: the first norm's fp8 copy (h x 1 B), the second's (1 B in
    dense layers; in MoE layers the router's bf16 2 B and the shared experts' fp8 copy, 1 B) and
    each routed copy's fp8 activation output (f_e x 1 B); the quantization is redone in backward
    (its traffic is left out). ``fp8_cache`` (with ``fp8_inputs``; DeepSeek-V3's low-precision
    storage, the fp8_activation_cache setting): the kept SwiGLU inputs of the MoE layers (2 f_e per
    routed copy and per shared expert) at 1 B instead of 2, and the attention output once at 1.5 B
    (E5M6) instead of bf16 and an fp8 copy (3 B)."""
    h = float(m.d_model)
    moe = (m.n_layers - m.first_dense_layers) / m.n_layers if m.n_experts else 0.0
    copies = moe * m.experts_per_token * m.d_ff_expert
    redone = 8 * h + (6 if m.gated_mlp else 4) * copies
    if fp8_inputs:
        shared = 1.0 if m.n_shared_experts else 0.0
        freed = h + (1 - moe) * h + moe * (2 + shared) * h + copies
        if fp8_cache and m.gated_mlp:
            _, out = _attention_widths(m)
            freed += moe * 2 * m.d_ff_expert * (m.experts_per_token + m.n_shared_experts) + 1.5 * out
        return stored_per_token(m, eager_swiglu, True)[0] - freed / h, redone
    return stored_per_token(m, eager_swiglu)[0] - 2 * (2 * h + copies) / h, redone


def mla_up_proj(m: ModelShape, seq: int) -> tuple[float, float]:
    """(activation bytes per token and layer / h not stored, recompute factor) of Megatron-core's
    ``--recompute-modules mla_up_proj`` (``MLASelfAttention``: the up-projections and the rotary
    embedding run inside a ``CheckpointWithoutOutput`` whose outputs are freed once the attention
    kernel has run, and regenerated before its backward). Not stored: the per-head q and k
    (nope + rope wide each) and v (v_head_dim), 2 B per element, in the softmax-attention layers;
    the latents they are made from stay (stored_per_token counts them). Recomputed: the q
    up-projection (from the q latent, or from h without one) and the kv up-projection, their
    forward FLOPs once more (the rotary embedding's elementwise work is left out): factor =
    1 + 3 x their FLOPs / the layers' FLOPs per token (forward and backward, causal attention, MTP
    modules in, output layer out). DeepSeek-V3: 65,536 of the 67,648 attention elements per token
    not stored (18.3 B per token / h of about 62), factor 1.08. (0, 1) for models without MLA."""
    if not m.mla:
        return 0.0, 1.0
    q_lora, kv_lora, nope, rope, v = m.mla
    share = (m.n_layers - m.linear_layers) / m.n_layers
    per_head = m.n_heads * (2 * (nope + rope) + v)
    macs = (q_lora or m.d_model) * m.n_heads * (nope + rope) + kv_lora * m.n_heads * (nope + v)
    layers_flops = m.flops_per_token(seq) - 6.0 * m.d_model * m.vocab  # forward and backward, per token
    redone = 2.0 * macs * (m.n_layers - m.linear_layers + m.mtp_layers)  # MTP modules are MLA layers too
    return 2.0 * share * per_head / m.d_model, 1.0 + 3.0 * redone / max(layers_flops, 1.0)


def _attention_widths(m: ModelShape, kv_repeated: bool = False) -> tuple[float, float]:
    """(the attention's stored elements per token but its output, the output's), averaged over the
    layers (stored_per_token)."""
    q_w, kv_w = float(m.n_heads * m.head_dim), float(m.n_kv_heads * m.head_dim)
    if m.mla:
        q_lora, kv_lora, nope, rope, v = m.mla
        qk, v_w = m.n_heads * (nope + rope), m.n_heads * v
        attn, out = q_lora + kv_lora + rope + 2.0 * qk + v_w, float(v_w)
    else:
        attn, out = q_w + 2 * (q_w if kv_repeated else kv_w), q_w
    if m.linear_layers and m.linear_attn:
        hk, dk, hv, dv = m.linear_attn
        share = m.linear_layers / m.n_layers  # linear-attention layers: q, k, v, gate (+ output below)
        attn = (1 - share) * attn + share * (2 * hk * dk + 2 * hv * dv)
        out = (1 - share) * out + share * hv * dv
    return attn, out


def stored_per_token(
    m: ModelShape, eager_swiglu: bool = False, fp8_inputs: bool = False, kv_repeated: bool = False
) -> tuple[float, float, float]:
    """(no recompute, selective recompute, routed-expert part) activation bytes per token and layer
    / h, tensor by tensor: Korthikanti et al.'s accounting (bf16, flash attention so no s x s
    scores, no dropout masks) with the model's own widths, averaged over the layers:
    - the two norms' inputs and outputs, 4 h;
    - attention: q, k, v (GQA: k and v kv_heads wide, n_heads wide when ``kv_repeated``: the
      kernel then saves the repeated copies; MLA: the q and kv latents too, per-head q/k of
      nope + rope and v of v_head_dim), its output; linear-attention layers: q, k, v, the output
      gate and the output;
    - MLP: a gated one's gate, up and product (3 f; 4 f with ``eager_swiglu``: separate eager ops
      also store act(gate) for the multiply's backward), a plain one's activation input and output
      (2 f); MoE layers: each of the k routed copies of the token (h) with its expert's 3 f_e
      (2 f_e plain), and the shared experts' 3 f_e each.
    Selective recompute (Megatron's core attention) regenerates the attention output from the kept
    q, k, v. GPT-3 (MHA, plain 4h MLP) gives 32, Korthikanti's 34 without the two dropout masks.
    ``fp8_inputs`` (Transformer Engine's fp8 linear layers keep their quantized inputs, 1 B per
    element, for the weight gradient): the first norm's output (the q/k/v input) and, in dense
    layers, the second's (the MLP's input) and the MLP's down-projection input (the gated product
    or the plain activation) are kept in fp8 instead of bf16; so are each routed copy (h) and its
    expert's down-projection input (f_e), and the shared experts' down-projection inputs; the
    attention output stays bf16 for the attention kernel's backward, and the output projection
    keeps an fp8 copy of it beside (1 B more per element); in MoE layers the router keeps the second
    norm's output in bf16 and the shared experts an fp8 copy of it."""
    h = float(m.d_model)
    attn, out = _attention_widths(m, kv_repeated)
    per = (4 if eager_swiglu else 3) if m.gated_mlp else 2
    moe = (m.n_layers - m.first_dense_layers) / m.n_layers if m.n_experts else 0.0  # share of MoE layers
    routed = moe * m.experts_per_token * (h + per * m.d_ff_expert)
    mlp = routed + moe * m.n_shared_experts * per * m.d_ff_expert + (1 - moe) * per * float(m.d_ff)
    none = 4 * h + attn + out + mlp
    if fp8_inputs:  # the bytes per token and layer fp8 saves, as the docstring lists them
        routed_fp8 = moe * m.experts_per_token * (h + m.d_ff_expert)
        shared = moe * m.n_shared_experts * m.d_ff_expert - (moe * h if m.n_shared_experts else 0.0)
        fp8_saving = h + (1 - moe) * (h + float(m.d_ff)) + routed_fp8 + shared - out
        return (2 * none - fp8_saving) / h, (2 * (none - out) - fp8_saving) / h, (2 * routed - routed_fp8) / h
    return 2 * none / h, 2 * (none - out) / h, 2 * routed / h


def dots_saveable(m: ModelShape, seq: int) -> tuple[float, float]:
    """The same for MaxText's ``remat_policy: minimal``, which is JAX's
    ``checkpoint_dots_with_no_batch_dims``: every projection's output is saved (q, k, v, o, the MLP's
    up/gate and down), the block's input too; attention (its dots carry batch dimensions, or it is
    a kernel) and the elementwise ops are recomputed: factor = 1 + attention's forward FLOPs / (3 x
    the layer's forward FLOPs)."""
    h, q_w, kv_w, f, layer = _block(m, seq)
    kept = q_w + 2 * kv_w + h + (2 if m.gated_mlp else 1) * f + h + h
    return 2 * kept / h, 1.0 + seq * q_w / (3 * layer)


# MaxText's checkpoint names kept by each remat policy it names (decoders.py get_remat_policy;
# planner/recompute.py says what each name is); the block input is kept by all of them
MAXTEXT_NAMES: dict[str, frozenset[str]] = {
    "minimal_with_context": frozenset({"qkv", "context", "out_proj", "mlpwi", "mlpwo"}),
    "save_dot_with_context_except_mlp": frozenset({"qkv", "context", "out_proj"}),
    "save_dot_except_mlpwi": frozenset({"qkv", "out_proj", "mlpwo"}),
}


def maxtext_names(m: ModelShape, seq: int, names: frozenset[str]) -> tuple[float, float]:
    """(bytes per token and layer / h, recompute factor) of a MaxText remat policy that keeps the
    checkpoint ``names`` (of qkv, context, out_proj, mlpwi, mlpwo) and the block input, bf16.
    JAX reruns in backward what a kept tensor's gradient needs and was not kept: the q, k, v
    projections (the attention backward reads them), the attention kernel's forward (its output,
    ``context``, is the output projection's input and the kernel's own backward input), the output
    projection (the MLP's input is the residual after it), the MLP's input projections (the output
    projection's input is their activation), and in MoE layers the experts' output projection
    (the router's gradient reads the experts' outputs). Factor = 1 + those forward multiply-adds /
    (3 x the layer's)."""
    h, q_w, kv_w, f, layer = _block(m, seq)
    wi = (2 if m.gated_mlp else 1) * f
    widths = {"qkv": q_w + 2 * kv_w, "context": q_w, "out_proj": h, "mlpwi": wi, "mlpwo": h}
    macs = {"qkv": (q_w + 2 * kv_w) * h, "context": seq * q_w, "out_proj": q_w * h, "mlpwi": wi * h}
    if m.n_experts:
        macs["mlpwo"] = f * h
    kept = h + sum(w for name, w in widths.items() if name in names)
    redone = sum(v for name, v in macs.items() if name not in names)
    return 2 * kept / h, 1.0 + redone / (3 * layer)


def _block(m: ModelShape, seq: int) -> tuple[float, float, float, float, float]:
    """(h, query width, key/value width, active MLP width, the layer's forward multiply-accumulates
    per token with causal attention: projections + MLP + QK^T and AV over half the sequence)."""
    h, q_w, kv_w = float(m.d_model), float(m.n_heads * m.head_dim), float(m.n_kv_heads * m.head_dim)
    f = float((m.experts_per_token + m.n_shared_experts) * m.d_ff_expert if m.n_experts else m.d_ff)
    layer = (2 * q_w + 2 * kv_w) * h + (3 if m.gated_mlp else 2) * f * h + seq * q_w
    return h, q_w, kv_w, f, layer


def base_dtype(precision: str) -> str:
    """The dtype whose peak MFU and the efficiencies are taken against: fp16 for fp16 runs, else bf16
    (fp8 runs report MFU against the bf16 peak)."""
    return "fp16" if precision == "fp16" else "bf16"


def efficiencies(job: Job, cp: np.ndarray | int = 1) -> tuple[float | np.ndarray, float | np.ndarray, float]:
    """(gemm_eff, attn_eff, dense-work time factor of the precision), before calibration scales.
    Efficiencies are achieved / bf16 (fp16) peak; the factor is < 1 when the precision has a faster
    GEMM peak (fp8): GEMM_SHARE of the dense work runs faster by the ratio of achievable rates. On
    devices whose vector work overlaps the matrix units (TPUs: ``elementwise_overlaps_matmul``)
    the share is 1. With a flash attention kernel named (``attention_kernel``) and measured on
    the device's architecture, attn_eff is its measured share of the matmul ceiling x the device's
    ceiling, at seq_len / cp tokens per kernel call (planner/attention.py; one value per cp)."""
    hw = job.hw
    base = base_dtype(job.precision)
    mm = hw.matmul_eff.get(base, MATMUL_EFF)
    # TPUs issue vector and matrix work in the same bundles: no compute time outside the GEMMs
    share = 1.0 if hw.elementwise_overlaps_matmul else GEMM_SHARE
    gemm = share * mm if job.calibration.gemm_eff is None else job.calibration.gemm_eff
    attn = ATTN_REL * share * mm if job.calibration.attn_eff is None else job.calibration.attn_eff
    if (
        job.calibration.attn_eff is None
        and job.framework.kernels.attention_kernel
        and job.framework.kernels.flash_attention
    ):
        kernel = kernel_share(
            job.framework.kernels.attention_kernel, hw.name, job.seq_len / np.asarray(cp, dtype=np.float64)
        )
        if kernel is not None:
            attn = kernel * mm
    factor = 1.0
    if job.precision not in ("bf16", "fp16") and hw.peak_flops(job.precision) > hw.peak_flops(base):
        speedup = hw.peak_flops(job.precision) * hw.matmul_eff.get(job.precision, mm) / (hw.peak_flops(base) * mm)
        factor = share / speedup + (1 - share)
    return gemm, attn, factor


# gemm_rate's fit to XLA's sm_90 matmul table (see there): the output elements at which the
# parallelism term doubles a GEMM's time, and the reduction depth at which the depth term does
GEMM_OUT0, GEMM_K0 = 642.0**2, 202.0
_GEMM_REF = (1.0 + (GEMM_OUT0 / 4096.0**2) ** 1.5) * (1.0 + GEMM_K0 / 4096.0)  # 4096^3, the reference


def gemm_rate(outputs: np.ndarray | float, depth: np.ndarray | float) -> np.ndarray:
    """A GEMM's throughput relative to a 4096^3 GEMM (at most 1) from the output elements it
    computes in parallel, ``outputs`` = b x m x n for b GEMMs of m x n in one kernel, and its
    reduction depth k: ``ref / ((1 + (642^2 / outputs)^1.5) x (1 + 202 / k))``. Fitted (least
    squares on log time, with a fixed 5.3 us per kernel beside it, not counted here) to the 64
    bf16 rates of XLA's H100 matmul table with m, n, k in 512..4096 (openxla
    ``xla/service/gpu/model/matmul_interpolator_data.h``, ``sm_90``, b = 1): rms error 2.6%, at
    most 10%. Few output tiles leave SMs idle (wave quantization); a short reduction spends more
    of the time filling and draining the pipeline. Its b = 2 and 4 entries run as fast as one GEMM
    b x as tall (within 3-9%), so a grouped GEMM (MoE experts in one kernel) counts its groups'
    outputs together. Assumed to carry over to other devices as a shape effect."""
    r = GEMM_OUT0 / np.maximum(np.asarray(outputs, dtype=np.float64), 1.0)
    slow = (1.0 + r * np.sqrt(r)) * (1.0 + GEMM_K0 / np.maximum(np.asarray(depth, dtype=np.float64), 1.0))
    return np.minimum(_GEMM_REF / slow, 1.0)


def linear_shape(
    tokens: np.ndarray | float, d_in: np.ndarray | float, d_out: np.ndarray | float, groups: np.ndarray | float = 1.0
) -> np.ndarray:
    """Shape efficiency of a linear layer's training GEMMs (``groups`` of them in one kernel,
    each ``tokens`` tall): the forward (tokens x d_out outputs, depth d_in), the input gradient
    (tokens x d_in, depth d_out) and the weight gradient (d_in x d_out, depth tokens) do equal
    FLOPs, so the layer runs at their harmonic mean (gemm_rate). Symmetric in d_in and d_out."""
    fwd = gemm_rate(groups * tokens * d_out, d_in)
    dgrad = gemm_rate(groups * tokens * d_in, d_out)
    wgrad = gemm_rate(groups * d_in * d_out, tokens)
    return np.asarray(3.0 / (1.0 / fwd + 1.0 / dgrad + 1.0 / wgrad))


# bytes per linear weight element and micro-batch that dynamic fp8 scaling moves: tensorwise an
# amax scan and two casts, rowwise three kernels plus the weight gradient's rescale (fp8_cast_bytes)
FP8_WEIGHT_BYTES = {"tensorwise": 8.0, "rowwise": 14.0}


def fp8_gains(recipe: str, in_dim: np.ndarray | float, out_dim: np.ndarray | float) -> np.ndarray:
    """Whether an fp8 linear of ``in_dim`` input and ``out_dim`` output features runs faster than
    bf16 on an H100, by torchao's thresholds (``torchao/float8/float8_linear_utils.py``,
    ``_auto_filter_for_recipe``; there ``K, N = weight.shape``, i.e. K the output and N the input
    features): rowwise gains unless in <= 2048, out <= 1024, or in <= 4096 and out <= 2048;
    tensorwise unless out <= 4096 and in <= 1024. Applied to the GEMM a device runs (TP's shard)."""
    i, o = np.asarray(in_dim, dtype=np.float64), np.asarray(out_dim, dtype=np.float64)
    if recipe == "rowwise":
        return ~((i <= 2048) | (o <= 1024) | ((i <= 4096) & (o <= 2048)))
    return ~((o <= 4096) & (i <= 1024))


def fp8_cast_bytes(m: ModelShape, recipe: str, tp: np.ndarray) -> np.ndarray:
    """Bytes per token and softmax-attention layer, summed over the devices, that dynamic fp8
    scaling moves through HBM besides the GEMMs (weights: ``FP8_WEIGHT_BYTES``).

    Counted as torchao's float8 roofline does (``torchao/testing/float8/roofline_utils.py``, with its
    fusion modeling: an activation's first read fuses into the op that produced it), per element
    of each distinct GEMM input (a layer's two normed inputs, h wide, the attention output and the
    MLP activation) and of each output gradient (q, k, v, MLP gate/up; the two row-parallel
    outputs, h wide); a tensor several linears read is cast once (the compiled graph computes the
    same cast once):
    - tensorwise: 4 B (read bf16, write fp8 row- and column-major; the amax scan fuses), weights 8 B
      (amax scan, two casts);
    - rowwise: 6 B (fp8 row-major + a bf16 transposed copy, then its column-wise fp8 cast), weights
      10 B; plus 4 B per element of every input gradient (and weight gradient): without fast
      accumulation torchao runs the backward GEMMs as tensorwise cuBLAS GEMMs and rescales their
      bf16 outputs in an extra kernel (pytorch/ao issue 2184);
    - under TP, tensorwise casts before the all-gather (torchao's Float8ColwiseParallel and
      PrepareFloat8ModuleInput, which then gather fp8), so every cast is on a 1/tp shard; rowwise
      runs the plain TP plan (torchtitan enables the float8 TP plan for tensorwise only), which
      gathers bf16, so the h-wide inputs, output gradients and input gradients are whole on every
      TP rank: tp x the bytes."""
    h, q_w, kv_w, f, _ = _block(m, 0)
    rep = tp if recipe == "rowwise" else np.ones_like(tp)
    inputs = 2 * h * rep + q_w + f
    grads = q_w + 2 * kv_w + (2 if m.gated_mlp else 1) * f + 2 * h * rep
    if recipe == "rowwise":
        return 6.0 * (inputs + grads) + 4.0 * inputs
    return 4.0 * (inputs + grads)


def weight_tensors_per_layer(m: ModelShape, fused_projections: bool) -> float:
    """Parameter tensors in an average transformer layer, as a framework registers them (no biases,
    as in Llama-style models): 2 norms; attention q, k, v, o (q/k/v one fused tensor with
    ``fused_projections``), MLA's q_a, q_b, kv_a, kv_b, o and its 2 latent norms; an MLP's up and
    down (gated: gate and up, one fused tensor with ``fused_projections``); MoE layers: each
    routed and shared expert's MLP and the router. Counted for per-tensor host work
    (zero_gather_copy_us)."""
    attn = 7.0 if m.mla else (2.0 if fused_projections else 4.0)
    mlp = 2.0 if (fused_projections or not m.gated_mlp) else 3.0
    if not m.n_experts:
        return 2.0 + attn + mlp
    moe = (m.n_layers - m.first_dense_layers) / m.n_layers
    return 2.0 + attn + moe * (mlp * (m.n_experts + m.n_shared_experts) + 1.0) + (1.0 - moe) * mlp
