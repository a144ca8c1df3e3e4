"""The recompute policies: what each stores per layer and micro-batch, what its recompute costs and
which collectives it replays (activations.py and cost.py read these; the nan entries are counted
from the model's shape, rates.py)."""

from __future__ import annotations

import numpy as np

# Recompute policies: activation bytes per layer = c * s*b*h/(tp*cp), compute x factor.
# none/selective/full follow Korthikanti et al.; the named policies are priors from which tensors
# they keep (MaxText/torchtitan names): "minimal" keeps every projection's output (recomputes
# attention and the pointwise work; computed from the model's shape, see rates.dots_saveable),
# "save_dot_except_mlp" keeps attention matmul outputs and recomputes the MLP
# (~2/3 of the forward FLOPs), "save_qkv_proj" keeps only the QKV projections, "save_out_proj" only
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
)
# the policies that recompute MLA's up-projections: offered for multi-latent attention models only
MLA_POLICIES = (RECOMPUTE.index("mla_up_proj"), RECOMPUTE.index("layernorm_mla_up_proj_moe_act"))
# nan: counted from the model's shape (none and selective: rates.stored_per_token, GPT-3 32 and
# 30, Korthikanti et al.'s 34 and 30 less the dropout masks; op and minimal: rates.op_sac,
# rates.dots_saveable)
ACT_BYTES = np.array([np.nan, np.nan, 2.0, np.nan, 12.0, 8.0, 4.0, np.nan, np.nan, 2.0, np.nan, np.nan])
# Of the stored bytes, the h-wide tensors outside the TP region, whole on every TP rank without sequence
# parallelism: both norms' inputs and outputs, 8 (Korthikanti's 10 less the two dropout masks,
# which stored_per_token leaves out); a policy that keeps less keeps the block input (2) and any
# kept h-wide projection output (attention out, MLP down): minimal 2 + 2 + 2,
# save_dot_except_mlp 2 + 2, save_qkv_proj 2, save_out_proj 2 + 2; "op" 2, + 2 for a gated MLP's
# kept down projection (cost.py); layernorm_moe_act keeps the norms' inputs, not their outputs: 4;
# mla_up_proj keeps what none keeps outside the TP region (8), with layernorm_moe_act 4
REPLICATED_BYTES = np.array([8.0, 8.0, 2.0, 6.0, 4.0, 2.0, 4.0, np.nan, 4.0, 2.0, 8.0, 4.0])
# With sequence parallelism whose all-gathered inputs are saved (the sp_saves_gathered setting): the two
# column-parallel inputs (attention's q/k/v input, the MLP's input), 2 B each, that a policy keeps
# whole where Korthikanti's count keeps them sharded: the policies that keep the linear layers'
# inputs (none, selective, layernorm_moe_act and the mla_up_proj ones); the others recompute them, and torchtitan's op
# policy re-gathers (it saves reduce-scatter outputs, not all-gather outputs)
GATHERED_BYTES = np.array([4.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 4.0, 0.0, 4.0, 4.0])
# layernorm_moe_act recomputes no GEMM: its recompute is memory-bound bytes (cost.py, rates.norm_moe_act);
# selective's entry is nominal: cost.py charges the attention core's forward per configuration;
# the mla_up_proj ones follow the model's shape (rates.mla_up_proj)
RECOMPUTE_FACTOR = np.array(
    [1.0, 1.05, 4.0 / 3.0, np.nan, 1.0 + (2.0 / 3.0) / 3.0, 1.28, 1.30, np.nan, 1.0, 1.28, np.nan, np.nan]
)
# bytes per token and layer / h that qkv_proj_offloaded moves to the host and back: save_qkv_proj's
# kept bytes less what qkv_proj_offloaded keeps on the device (the block input)
QKV_OFFLOADED_BYTES = float(
    ACT_BYTES[RECOMPUTE.index("save_qkv_proj")] - ACT_BYTES[RECOMPUTE.index("qkv_proj_offloaded")]
)
# TP collectives replayed by a policy's recompute, where the policy says (nan: in proportion to
# the recomputed FLOPs, see cost.py): selective 1 (attention core only), full 1.5, op 1.25
TP_REPLAY = np.array([1.0, 1.0, 1.5, np.nan, np.nan, np.nan, np.nan, 1.25, 1.0, np.nan, 1.0, 1.0])
# EP all-to-all and CP ring exchange replayed, the same way: selective recomputes the attention
# core, which under CP holds the ring exchange of K and V (all of the forward's: 1.5) and no MoE
# all-to-all (1); layernorm_moe_act recomputes no collective, nor do the mla_up_proj ones (the
# up-projections run from latents already on the device, before CP's exchange of K and V). Before,
# selective's replay followed its share of the recomputed *time*, which grew as GEMMs got faster.
EP_REPLAY = np.array([1.0, 1.0, 1.5, np.nan, np.nan, np.nan, np.nan, np.nan, 1.0, np.nan, 1.0, 1.0])
CP_REPLAY = np.array([1.0, 1.5, 1.5, np.nan, np.nan, np.nan, np.nan, np.nan, 1.0, np.nan, 1.0, 1.0])
