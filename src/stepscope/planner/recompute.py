"""The recompute policies: what each stores per layer and micro-batch, what its recompute costs and
which collectives it replays (activations.py and cost.py read these; the nan entries are counted
from the model's shape, rates.py)."""

from __future__ import annotations

import numpy as np

# Recompute policies: activation bytes per layer = c * s*b*h/(tp*cp), compute x factor.
# none/selective/full follow Korthikanti et al.; the named policies are priors from which tensors
# they keep (MaxText/torchtitan names): "minimal" keeps every projection's output (recomputes
# attention and the pointwise work; computed from the model's shape, see rates.dots_saveable),
# "save_dot_except_mlp" keeps the attention projections' outputs (q, k, v, out) and recomputes the
# MLP (~2/3 of the forward FLOPs), "save_qkv_proj" keeps only the QKV projections, "save_out_proj" only
# the attention output projection (both recompute nearly the whole forward); "op" is torchtitan's
# op-level selective AC, computed from the model's shape (see op_sac); "layernorm_moe_act" is
# Megatron-core's --recompute-modules layernorm moe_act (rates.norm_moe_act); "qkv_proj_offloaded"
# is MaxText's policy of that name (JAX save_and_offload_only_these_names: the q, k, v projections
# offloaded to pinned host memory, nothing else saved): on the device only the block input, the
# recompute of save_qkv_proj, and the q, k, v bytes (save_qkv_proj's less the block input) to the
# host in forward and back in backward (cost.py, QKV_OFFLOADED_BYTES). "mla_up_proj" is
# Megatron-core's --recompute-modules mla_up_proj (multi-latent attention models only): the
# per-head q, k, v the up-projections make from the kept latents are freed once the attention
# kernel has run and regenerated in backward (rates.mla_up_proj); "layernorm_mla_up_proj_moe_act"
# adds it to layernorm_moe_act (--recompute-modules layernorm mla_up_proj moe_act: DeepSeek-V3's
# RMSNorm, MLA up-projection and SwiGLU recompute, its technical report section 3.2.3).
#
# MaxText's remat policies (appended last, so the earlier indices stay valid) are JAX
# save_only_these_names over the checkpoint names its layers give their tensors: MaxText
# src/MaxText/layers/decoders.py (src/maxtext/layers/decoders.py in 2026 trees),
# Decoder.minimal_policy and Decoder.get_remat_policy. The names: "query_proj", "key_proj",
# "value_proj" (also "qkv_proj", "kv_proj": the q, k, v projections' outputs, attentions.py and,
# for MLA, the per-head q, k, v after the up-projections, attention_mla.py), "context" (the
# attention kernel's output and its logsumexp, attention_op.py; the splash kernel's residuals are
# named "context" too, so keeping it keeps the kernel's forward from being rerun), "out_proj" (the
# output projection's output), "mlpwi_0", "mlpwi_1", "mlpwi" (the MLP's input projections,
# linears.py; a MoE layer's grouped gate and up GEMMs, moe.py), "mlpwo" (the MLP's output
# projection; a MoE layer's expert outputs before the weighted combine, moe.py), and the block
# input "decoder_layer_input", which every policy keeps. Policy by policy:
#   minimal                          q, k, v, out_proj, mlpwi*, mlpwo (counted from the shape)
#   minimal_with_context             minimal's names + context ("minimal_flash" is its old name)
#   save_dot_with_context_except_mlp q, k, v, context, out_proj
#   save_dot_except_mlpwi            q, k, v, out_proj, mlpwo
#   save_dot_except_mlp              q, k, v, out_proj
#   save_qkv_proj                    q, k, v
#   save_out_proj                    out_proj
# The three appended policies are counted from the model's shape by those names
# (rates.maxtext_names: their nan entries below); save_dot_except_mlp's fixed prior counts q, k, v
# 6 + out 2 + block input 2 = 10 B per token / h (MaxText does not name context in it).
RECOMPUTE = (
    "none",
    "selective",
    "full",
    "minimal",
    "save_dot_except_mlp",
    "save_qkv_proj",
    "save_out_proj",
    "op",
    "layernorm_moe_act",
    "qkv_proj_offloaded",
    "mla_up_proj",
    "layernorm_mla_up_proj_moe_act",
    "minimal_with_context",
    "save_dot_with_context_except_mlp",
    "save_dot_except_mlpwi",
)
# the policies that recompute MLA's up-projections: offered for multi-latent attention models only
MLA_POLICIES = (RECOMPUTE.index("mla_up_proj"), RECOMPUTE.index("layernorm_mla_up_proj_moe_act"))
# nan: counted from the model's shape (none and selective: rates.stored_per_token, GPT-3 32 and
# 30, Korthikanti et al.'s 34 and 30 less the dropout masks; op and minimal: rates.op_sac,
# rates.dots_saveable)
ACT_BYTES = np.array(
    [np.nan, np.nan, 2.0, np.nan, 10.0, 8.0, 4.0, np.nan, np.nan, 2.0, np.nan, np.nan, np.nan, np.nan, np.nan]
)
# Of the stored bytes, the h-wide tensors outside the TP region, whole on every TP rank without sequence
# parallelism: both norms' inputs and outputs, 8 (Korthikanti's 10 less the two dropout masks,
# which stored_per_token leaves out); a policy that keeps less keeps the block input (2) and any
# kept h-wide projection output (attention out, MLP down): minimal 2 + 2 + 2,
# save_dot_except_mlp 2 + 2, save_qkv_proj 2, save_out_proj 2 + 2; "op" 2, + 2 for a gated MLP's
# kept down projection (cost.py); layernorm_moe_act keeps the norms' inputs, not their outputs: 4;
# mla_up_proj keeps what none keeps outside the TP region (8), with layernorm_moe_act 4;
# minimal_with_context minimal's 6 (context is split over the heads, inside the TP region),
# save_dot_with_context_except_mlp 2 + 2 (block input, out), save_dot_except_mlpwi 2 + 2 + 2 (and mlpwo)
REPLICATED_BYTES = np.array([8.0, 8.0, 2.0, 6.0, 4.0, 2.0, 4.0, np.nan, 4.0, 2.0, 8.0, 4.0, 6.0, 4.0, 6.0])
# With sequence parallelism whose all-gathered inputs are saved (the sp_saves_gathered setting): the two
# column-parallel inputs (attention's q/k/v input, the MLP's input), 2 B each, that a policy keeps
# whole where Korthikanti's count keeps them sharded: the policies that keep the linear layers'
# inputs (none, selective, layernorm_moe_act and the mla_up_proj ones); the others recompute them, and torchtitan's op
# policy re-gathers (it saves reduce-scatter outputs, not all-gather outputs)
GATHERED_BYTES = np.array([4.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 4.0, 0.0, 4.0, 4.0, 0.0, 0.0, 0.0])
# layernorm_moe_act recomputes no GEMM: its recompute is memory-bound bytes (cost.py, rates.norm_moe_act);
# selective's entry is nominal: cost.py charges the attention core's forward per configuration;
# the mla_up_proj ones follow the model's shape (rates.mla_up_proj), the appended MaxText ones too
# (rates.maxtext_names)
RECOMPUTE_FACTOR = np.array(
    [
        1.0,
        1.05,
        4.0 / 3.0,
        np.nan,
        1.0 + (2.0 / 3.0) / 3.0,
        1.28,
        1.30,
        np.nan,
        1.0,
        1.28,
        np.nan,
        np.nan,
        np.nan,
        np.nan,
        np.nan,
    ]
)
# bytes per token and layer / h that qkv_proj_offloaded moves to the host and back: save_qkv_proj's
# kept bytes less what qkv_proj_offloaded keeps on the device (the block input)
QKV_OFFLOADED_BYTES = float(
    ACT_BYTES[RECOMPUTE.index("save_qkv_proj")] - ACT_BYTES[RECOMPUTE.index("qkv_proj_offloaded")]
)
# TP collectives replayed by a policy's recompute, where the policy says (nan: in proportion to
# the recomputed FLOPs, see cost.py): selective 1 (attention core only), full 1.5, op 1.25
TP_REPLAY = np.array(
    [1.0, 1.0, 1.5, np.nan, np.nan, np.nan, np.nan, 1.25, 1.0, np.nan, 1.0, 1.0, np.nan, np.nan, np.nan]
)
# EP all-to-all and CP ring exchange replayed, the same way: selective recomputes the attention
# core, which under CP holds the ring exchange of K and V (all of the forward's: 1.5) and no MoE
# all-to-all (1); layernorm_moe_act recomputes no collective, nor do the mla_up_proj ones (the
# up-projections run from latents already on the device, before CP's exchange of K and V). Before,
# selective's replay followed its share of the recomputed *time*, which grew as GEMMs got faster.
EP_REPLAY = np.array(
    [1.0, 1.0, 1.5, np.nan, np.nan, np.nan, np.nan, np.nan, 1.0, np.nan, 1.0, 1.0, np.nan, np.nan, np.nan]
)
CP_REPLAY = np.array(
    [1.0, 1.5, 1.5, np.nan, np.nan, np.nan, np.nan, np.nan, 1.0, np.nan, 1.0, 1.0, np.nan, np.nan, np.nan]
)
# every per-policy table has one entry per policy
assert all(
    len(a) == len(RECOMPUTE)
    for a in (ACT_BYTES, REPLICATED_BYTES, GATHERED_BYTES, RECOMPUTE_FACTOR, TP_REPLAY, EP_REPLAY, CP_REPLAY)
)
