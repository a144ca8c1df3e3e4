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
_MIXER = {
    "linear_attention": "linear_attention",
    "mamba": "linear_attention",
    "m": "linear_attention",
    "full_attention": "full_attention",
    "attention": "full_attention",
    "*": "full_attention",
}


def first_key(cfg: dict[str, Any], *keys: str, default: Any = None) -> Any:
    """The value of the first of ``keys`` the config sets (not None), else ``default``."""
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def normalize(cfg: dict[str, Any], path: str = "model config") -> dict[str, Any]:
    """The config with each family's own keys rewritten to the common ones (module docstring);
    other configs unchanged. A non-numeric value under one of those keys is a one-line error."""
    if cfg.get("model_type") == "jamba" or "attn_layer_period" in cfg or "mamba_dt_rank" in cfg:
        # Mamba-1 (selective scan, per-channel state, x_proj/dt_proj) has no linear-attention form
        # here; read as a transformer it would be silently wrong (every layer attention, every one MoE)
        raise ConfigError(
            "Mamba-1 layers (Jamba) are not modeled",
            path=path,
            fix="for analyze pass --model-flops N; the planner covers Mamba-2 and linear-attention hybrids",
        )
    out = dict(cfg)
    try:
        for family in (_paired_blocks, _mamba2_heads, _llama4, _aliases, _local_global):
            out.update(family(cfg))
        out.update(_shared_width(out, cfg))
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"a model dimension is not a number ({exc})", path=path, fix="fix the config's value"
        ) from None
    return out


def _paired_blocks(cfg: dict[str, Any]) -> dict[str, Any]:
    """Separate mixer and MLP blocks as mixer layers with the MLP widths scaled (module docstring)."""
    blocks = _blocks(cfg)
    mixers = [_MIXER[b] for b in blocks or () if b in _MIXER]
    if not blocks or not mixers:
        return {}
    n_mlp, n_moe = blocks.count("mlp"), blocks.count("moe")
    scale = (n_mlp + n_moe) / len(mixers)
    out: dict[str, Any] = {"num_hidden_layers": len(mixers), "layer_types": mixers, "full_attention_interval": None}
    if n_moe:
        out["first_k_dense_replace"] = round(len(mixers) * n_mlp / (n_mlp + n_moe))
        for k in ("moe_intermediate_size", "moe_shared_expert_intermediate_size"):
            if cfg.get(k):
                out[k] = round(int(cfg[k]) * scale)
    if cfg.get("intermediate_size"):
        out["intermediate_size"] = round(int(cfg["intermediate_size"]) * scale)
    return out


def _mamba2_heads(cfg: dict[str, Any]) -> dict[str, Any]:
    """Mamba-2 heads under the linear-attention names (state-space duality, module docstring)."""
    heads, head_dim = (
        first_key(cfg, "mamba_num_heads", "mamba_n_heads"),
        first_key(cfg, "mamba_head_dim", "mamba_d_head"),
    )
    state = first_key(cfg, "ssm_state_size", "mamba_d_state", "state_size")
    if not (heads or head_dim) or not state:
        return {}
    d = int(first_key(cfg, "hidden_size", "d_model") or 0)
    head_dim = int(head_dim or 64)
    heads = int(heads or int(first_key(cfg, "mamba_expand", "expand") or 2) * d // head_dim)
    return {
        "linear_num_key_heads": int(first_key(cfg, "n_groups", "mamba_n_groups") or 1),
        "linear_key_head_dim": int(state),
        "linear_num_value_heads": heads,
        "linear_value_head_dim": head_dim,
    }


def _llama4(cfg: dict[str, Any]) -> dict[str, Any]:
    if not str(cfg.get("model_type", "")).startswith("llama4"):
        return {}
    out: dict[str, Any] = {"n_shared_experts": cfg.get("n_shared_experts", 1)}
    if cfg.get("interleave_moe_layer_step") and not cfg.get("decoder_sparse_step"):
        out["decoder_sparse_step"] = int(cfg["interleave_moe_layer_step"])
    if cfg.get("intermediate_size_mlp") and cfg.get("intermediate_size"):
        out["moe_intermediate_size"] = cfg.get("moe_intermediate_size") or cfg["intermediate_size"]
        out["intermediate_size"] = cfg["intermediate_size_mlp"]
    return out


def _aliases(cfg: dict[str, Any]) -> dict[str, Any]:
    """Falcon's and ChatGLM's names for the key/value heads, MLP width and vocabulary."""
    out: dict[str, Any] = {}
    if cfg.get("num_key_value_heads") is None:
        kv = first_key(cfg, "num_kv_heads", "n_head_kv", "multi_query_group_num")
        if kv is None and cfg.get("multi_query") is True:
            kv = 1
        if kv is not None:
            out["num_key_value_heads"] = kv
    if cfg.get("intermediate_size") is None and cfg.get("ffn_hidden_size"):
        out["intermediate_size"] = cfg["ffn_hidden_size"]
    if cfg.get("vocab_size") is None and cfg.get("padded_vocab_size"):
        out["vocab_size"] = cfg["padded_vocab_size"]
    return out


def _shared_width(out: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    """Shared experts wider than a routed one as that many routed widths (after the rewrites)."""
    shared = first_key(out, "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size")
    routed = first_key(out, "moe_intermediate_size")
    if not (shared and routed):
        return {}
    return {"n_shared_experts": max(1, round(int(shared) * int(first_key(cfg, "n_shared_experts") or 1) / int(routed)))}


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
