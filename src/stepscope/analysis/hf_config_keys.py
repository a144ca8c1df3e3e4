"""Hugging Face config keys of model families that name things their own way, normalized to
what :mod:`model_flops` reads.

Block-pattern models (NVIDIA Nemotron-H: ``hybrid_override_pattern`` such as ``"M-M-M*-"``, or
``layers_block_type`` / ``layer_types`` naming one block per entry: ``mamba``/``linear_attention``
(M), ``attention``/``full_attention`` (*), ``mlp`` (-), ``moe`` (E)) stack mixers and MLPs as
separate residual blocks. :class:`~stepscope.analysis.model_flops.ModelShape` pairs one mixer with
one MLP per layer, so the pattern becomes ``layers = mixer blocks`` with the MLP widths scaled by
``MLP blocks / mixer blocks``: the weights and FLOPs are exact, the per-layer activations an
average (the extra blocks' norms and residuals are not counted).

Mamba-2 mixers are counted as linear attention through state-space duality (Dao & Gu, 2024):
C and B play the query and key (``n_groups`` heads of ``ssm_state_size``), x the value and z the
output gate (``mamba_num_heads`` heads of ``mamba_head_dim``), out_proj the output projection;
the per-head state is ``ssm_state_size x mamba_head_dim``. The dt projection (one value per head),
the short convolution and the gates are left out, as for the other linear-attention layers.

Mamba-1 mixers (Jamba: per-channel state, x_proj and dt_proj) have no such form here: those
configs are refused with one line instead of being read as a transformer.

Llama 4: MoE every ``interleave_moe_layer_step``-th layer (read as ``decoder_sparse_step``),
experts ``intermediate_size`` wide and the dense layers ``intermediate_size_mlp``, one shared
expert per MoE layer. Falcon's ``n_head_kv`` / ``num_kv_heads`` (``multi_query``: one) and
ChatGLM's ``multi_query_group_num`` are the key/value heads; ``ffn_hidden_size`` the MLP width,
``padded_vocab_size`` the vocabulary.

Gemma 2, Gemma 3 and Cohere 2 files without ``layer_types`` get the alternation of their
architecture (:func:`_local_global`).

Shared experts wider than a routed one (Qwen2-MoE ``shared_expert_intermediate_size``,
Nemotron-H ``moe_shared_expert_intermediate_size``) count as that many routed-expert widths.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError

_PATTERN = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
_MIXER = {"linear_attention": "linear_attention", "mamba": "linear_attention", "m": "linear_attention",
          "full_attention": "full_attention", "attention": "full_attention", "*": "full_attention"}


def _get(cfg: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return None


def normalize(cfg: dict[str, Any], path: str = "model config") -> dict[str, Any]:
    """The config with block patterns paired into layers, Mamba-2 head keys under the
    linear-attention names and wide shared experts as a count; other configs unchanged."""
    if cfg.get("model_type") == "jamba" or "attn_layer_period" in cfg or "mamba_dt_rank" in cfg:
        # Mamba-1 (selective scan, per-channel state, x_proj/dt_proj) has no linear-attention form
        # here; read as a transformer it would be silently wrong (every layer attention, every one MoE)
        raise ConfigError("Mamba-1 layers (Jamba) are not modeled", path=path,
                          fix="for analyze pass --model-flops N; the planner covers Mamba-2 and linear-attention hybrids")
    out = dict(cfg)
    blocks = _blocks(cfg)
    if blocks:
        mixers = [_MIXER[b] for b in blocks if b in _MIXER]
        n_mlp, n_moe = blocks.count("mlp"), blocks.count("moe")
        if mixers:
            out["num_hidden_layers"] = len(mixers)
            out["layer_types"] = mixers
            out.pop("full_attention_interval", None)
            scale = (n_mlp + n_moe) / len(mixers)
            if n_moe:
                out["first_k_dense_replace"] = round(len(mixers) * n_mlp / (n_mlp + n_moe))
                for k in ("moe_intermediate_size", "moe_shared_expert_intermediate_size"):
                    if cfg.get(k):
                        out[k] = round(int(cfg[k]) * scale)
            if cfg.get("intermediate_size"):
                out["intermediate_size"] = round(int(cfg["intermediate_size"]) * scale)
    heads, head_dim = _get(cfg, "mamba_num_heads", "mamba_n_heads"), _get(cfg, "mamba_head_dim", "mamba_d_head")
    state = _get(cfg, "ssm_state_size", "mamba_d_state", "state_size")
    if (heads or head_dim) and state:
        d = int(_get(cfg, "hidden_size", "d_model") or 0)
        expand = int(_get(cfg, "mamba_expand", "expand") or 2)
        head_dim = int(head_dim or 64)
        heads = int(heads or expand * d // head_dim)
        out.update(linear_num_key_heads=int(_get(cfg, "n_groups", "mamba_n_groups") or 1), linear_key_head_dim=int(state),
                   linear_num_value_heads=heads, linear_value_head_dim=head_dim)
    if str(cfg.get("model_type", "")).startswith("llama4"):
        if cfg.get("interleave_moe_layer_step") and not cfg.get("decoder_sparse_step"):
            out["decoder_sparse_step"] = int(cfg["interleave_moe_layer_step"])
        if cfg.get("intermediate_size_mlp") and cfg.get("intermediate_size"):
            out["moe_intermediate_size"] = cfg.get("moe_intermediate_size") or cfg["intermediate_size"]
            out["intermediate_size"] = cfg["intermediate_size_mlp"]
        out.setdefault("n_shared_experts", 1)
    if cfg.get("num_key_value_heads") is None:
        kv = _get(cfg, "num_kv_heads", "n_head_kv", "multi_query_group_num")
        if kv is None and cfg.get("multi_query") is True:
            kv = 1
        if kv is not None:
            out["num_key_value_heads"] = kv
    if cfg.get("intermediate_size") is None and cfg.get("ffn_hidden_size"):
        out["intermediate_size"] = cfg["ffn_hidden_size"]
    if cfg.get("vocab_size") is None and cfg.get("padded_vocab_size"):
        out["vocab_size"] = cfg["padded_vocab_size"]
    out.update(_local_global(cfg))
    shared = _get(out, "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size")
    routed = _get(out, "moe_intermediate_size")
    if shared and routed:
        out["n_shared_experts"] = max(1, round(int(shared) * int(_get(cfg, "n_shared_experts") or 1) / int(routed)))
    return out


def _blocks(cfg: dict[str, Any]) -> list[str] | None:
    """One type per residual block when the config lists separate mixer and MLP blocks."""
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern and set(pattern) <= set(_PATTERN):
        return [_PATTERN[c] for c in pattern]
    for key in ("layers_block_type", "layer_types"):
        types = cfg.get(key)
        if isinstance(types, list) and any(str(t) in ("mlp", "moe") for t in types):
            return [str(t) for t in types]
    return None


def _local_global(cfg: dict[str, Any]) -> dict[str, Any]:
    """``layer_types`` for configs that alternate sliding-window and global attention without
    listing them (older Gemma 2/3 and Cohere 2 files): Gemma 2 slides on every other layer starting
    with the first; Gemma 3 and Cohere 2 have one global layer per ``sliding_window_pattern``
    (default 6 and 4), the last of each group. Without this every layer counted as sliding."""
    kind = str(cfg.get("model_type", ""))
    if cfg.get("layer_types") or not cfg.get("sliding_window") or not cfg.get("num_hidden_layers"):
        return {}
    n = int(cfg["num_hidden_layers"])
    if kind == "gemma2":
        return {"layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]}
    if kind.startswith(("gemma3", "cohere2")):
        p = int(cfg.get("sliding_window_pattern") or (6 if kind.startswith("gemma3") else 4))
        return {"layer_types": ["full_attention" if (i + 1) % p == 0 else "sliding_attention" for i in range(n)]}
    return {}
