"""Model FLOPs per token from a Hugging Face ``config.json`` (training: forward + backward).

    flops_per_token = 6 * N_matmul + 6 * n_layers * seq_len * n_heads * head_dim * (1/2 if causal)

``N_matmul`` counts the weights every token multiplies (embedding lookups excluded, LM head
included): per layer the attention projections (q and o: d x H*hd; k and v: d x KV*hd, GQA) and the
MLP (gated SwiGLU: 3*d*f; plain: 2*d*f); for MoE layers, ``experts_per_token`` routed experts (plus
shared experts) and the router (d x E). The attention term is QK^T and PV (2 matmuls x 2 FLOPs x
3 for forward+backward = 12 per layer per token per key, halved for causal masks), as in the
PaLM paper's MFU appendix. Layers with linear attention or MLA are not modeled yet (they raise).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError


@dataclass(frozen=True)
class ModelShape:
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    vocab: int
    gated_mlp: bool
    n_experts: int = 0
    experts_per_token: int = 0
    d_ff_expert: int = 0
    n_shared_experts: int = 0
    first_dense_layers: int = 0  # leading dense layers in MoE models (DeepSeek first_k_dense_replace)

    def matmul_params_per_token(self) -> float:
        d, hd = self.d_model, self.head_dim
        attn = 2 * d * self.n_heads * hd + 2 * d * self.n_kv_heads * hd
        mlp_mult = 3 if self.gated_mlp else 2
        dense_mlp = mlp_mult * d * self.d_ff
        if self.n_experts:
            moe = mlp_mult * d * self.d_ff_expert * (self.experts_per_token + self.n_shared_experts) + d * self.n_experts
            moe_layers = self.n_layers - self.first_dense_layers
            layers = self.first_dense_layers * (attn + dense_mlp) + moe_layers * (attn + moe)
        else:
            layers = self.n_layers * (attn + dense_mlp)
        return float(layers + d * self.vocab)

    def flops_per_token(self, seq_len: int, causal: bool = True) -> float:
        attn = 12.0 * self.n_layers * seq_len * self.n_heads * self.head_dim * (0.5 if causal else 1.0)
        return 6.0 * self.matmul_params_per_token() + attn


def _get(cfg: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    return default


def from_hf_config(path: str | Path) -> ModelShape:
    try:
        cfg = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read model config ({exc.__class__.__name__})", path=str(path), fix="pass a Hugging Face config.json") from None
    if not isinstance(cfg, dict):
        raise ConfigError("model config is not a JSON object", path=str(path), fix="pass a Hugging Face config.json")
    return from_config_dict(cfg, str(path))


def from_config_dict(cfg: dict[str, Any], path: str = "model config") -> ModelShape:
    """A :class:`ModelShape` from Hugging Face config keys (see :func:`from_hf_config`)."""
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}
    if cfg.get("kv_lora_rank") or cfg.get("q_lora_rank"):
        raise ConfigError("MLA attention (DeepSeek-V2/V3) is not modeled yet", path=str(path), fix="pass --model-flops N")
    if cfg.get("layer_types") and any("linear" in str(t) for t in cfg["layer_types"]):
        raise ConfigError("linear-attention layers are not modeled yet", path=str(path), fix="pass --model-flops N")
    try:
        d = int(_get(cfg, "hidden_size", "d_model", "n_embd"))
        layers = int(_get(cfg, "num_hidden_layers", "n_layer", "num_layers"))
        heads = int(_get(cfg, "num_attention_heads", "n_head"))
    except (TypeError, ValueError):
        raise ConfigError("config lacks hidden_size / num_hidden_layers / num_attention_heads", path=str(path), fix="pass --model-flops N") from None
    n_experts = int(_get(cfg, "num_local_experts", "num_experts", "n_routed_experts", default=0) or 0)
    act = str(_get(cfg, "hidden_act", "activation_function", default="silu"))
    return ModelShape(
        d_model=d,
        n_layers=layers,
        n_heads=heads,
        n_kv_heads=int(_get(cfg, "num_key_value_heads", default=heads)),
        head_dim=int(_get(cfg, "head_dim", default=d // heads)),
        d_ff=int(_get(cfg, "intermediate_size", "n_inner", "ffn_dim", default=4 * d)),
        vocab=int(_get(cfg, "vocab_size", default=0)),
        gated_mlp=act in ("silu", "swiglu", "geglu", "gelu_pytorch_tanh") and "gpt2" not in str(cfg.get("model_type", "")),
        n_experts=n_experts,
        experts_per_token=int(_get(cfg, "num_experts_per_tok", "moe_topk", default=0) or 0),
        d_ff_expert=int(_get(cfg, "moe_intermediate_size", "expert_intermediate_size", default=_get(cfg, "intermediate_size", default=4 * d))),
        n_shared_experts=int(_get(cfg, "n_shared_experts", "num_shared_experts", default=0) or 0),
        first_dense_layers=int(_get(cfg, "first_k_dense_replace", default=0) or 0),
    )
