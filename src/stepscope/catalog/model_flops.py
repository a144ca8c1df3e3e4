"""Model FLOPs per token from a Hugging Face ``config.json`` (training: forward + backward).

    flops_per_token = 6 * N_matmul + 6 * n_layers * seq_len * n_heads * head_dim * (1/2 if causal)

``N_matmul`` counts the weights every token multiplies (embedding lookups excluded, LM head
included): per layer the attention projections (q and o: d x H*hd; k and v: d x KV*hd, GQA) and the
MLP (gated SwiGLU: 3*d*f; plain: 2*d*f); for MoE layers, ``experts_per_token`` routed experts (plus
shared experts) and the router (d x E). The attention term is QK^T and PV (2 matmuls x 2 FLOPs x
3 for forward+backward = 12 per layer per token per key, halved for causal masks), as in the
PaLM paper's MFU appendix. With attention dims d_qk (query/key) and d_v (value) per head the
attention term is 6 * n_layers * seq_len * n_heads * (d_qk + d_v) * (1/2 if causal).
MLA (DeepSeek-V2/V3): q = d x q_lora + q_lora x H*(nope+rope) (or d x H*(nope+rope) without
q_lora), kv = d x (kv_lora + rope) + kv_lora x H*(nope + v), o = H*v x d; d_qk = nope + rope,
d_v = v. Multi-token-prediction modules (``num_nextn_predict_layers``) count as extra layers
plus their 2d x d projection.

Hybrid models (``layer_types`` with ``linear_attention``, e.g. Qwen3-Next, GLA/Gated-DeltaNet
stacks): a linear-attention layer has projections q, k (d x Hk*dk each), v and the output gate
(d x Hv*dv each) and o (Hv*dv x d) instead of softmax attention, and a sequence term that does not
grow with the context: chunked form with chunk C = 64, per value head and token, the state update
and readout (2 x 2*dk*dv) plus the intra-chunk products (2*C*(dk+dv)), x3 for forward + backward:
``6 * Hv * (2*dk*dv + C*(dk+dv))`` per layer per token. Short convolutions and gates are ignored.
Sliding-window layers (GPT-OSS, Gemma, Mistral): a query attends to at most ``w`` keys, on average
``(w(w+1)/2 + (s-w)w)/s`` under the causal mask instead of ``s/2``.
Dense layers inside MoE models: the first ``first_k_dense_replace`` layers, or the ones listed in
``mlp_only_layers``, or all but every ``decoder_sparse_step``-th.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import jsonio
from ..errors import ConfigError
from .hf_config_keys import first_key as _get
from .hf_config_keys import normalize


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
    mla: tuple[int, int, int, int, int] | None = None  # (q_lora_rank, kv_lora_rank, qk_nope, qk_rope, v_head_dim)
    mtp_layers: int = 0  # multi-token-prediction modules (DeepSeek-V3 num_nextn_predict_layers)
    linear_layers: int = 0  # of n_layers, how many use linear attention (hybrid models)
    linear_attn: tuple[int, int, int, int] | None = None  # (key heads, key dim, value heads, value dim)
    # group-limited routing (DeepSeek-V3 n_group / topk_group): the experts form routing_groups groups
    # and a token's experts come from at most routing_group_topk of them (0: no limit)
    routing_groups: int = 0
    routing_group_topk: int = 0
    sliding_layers: int = 0  # of the softmax-attention layers, how many attend to a sliding window
    sliding_window: int = 0

    LINEAR_CHUNK = 64

    @property
    def qk_dim(self) -> int:
        return self.mla[2] + self.mla[3] if self.mla else self.head_dim

    @property
    def v_dim(self) -> int:
        return self.mla[4] if self.mla else self.head_dim

    def attn_params(self) -> float:
        d, h = self.d_model, self.n_heads
        if self.mla:
            q_lora, kv_lora, nope, rope, v = self.mla
            q = d * q_lora + q_lora * h * (nope + rope) if q_lora else d * h * (nope + rope)
            return float(q + d * (kv_lora + rope) + kv_lora * h * (nope + v) + h * v * d)
        return float(2 * d * h * self.head_dim + 2 * d * self.n_kv_heads * self.head_dim)

    def linear_attn_params(self) -> float:
        if not self.linear_attn:
            return 0.0
        hk, dk, hv, dv = self.linear_attn
        return float(self.d_model * (2 * hk * dk + 3 * hv * dv))

    def mixer_params_total(self) -> float:
        """Attention-block matmul weights summed over the layers (softmax + linear attention)."""
        return (
            self.n_layers - self.linear_layers
        ) * self.attn_params() + self.linear_layers * self.linear_attn_params()

    def dense_mlp_params(self) -> float:
        return float((3 if self.gated_mlp else 2) * self.d_model * self.d_ff)

    def moe_active_params(self) -> float:
        """Per MoE layer and token: routed + shared experts, and the router."""
        mult = 3 if self.gated_mlp else 2
        return float(
            mult * self.d_model * self.d_ff_expert * (self.experts_per_token + self.n_shared_experts)
            + self.d_model * self.n_experts
        )

    def matmul_params_per_token(self) -> float:
        attn = self.attn_params()
        mixers = self.mixer_params_total()
        if self.n_experts:
            moe_layers = self.n_layers - self.first_dense_layers
            layers = mixers + self.first_dense_layers * self.dense_mlp_params() + moe_layers * self.moe_active_params()
            mtp = self.mtp_layers * (attn + self.moe_active_params() + 2 * self.d_model * self.d_model)
        else:
            layers = mixers + self.n_layers * self.dense_mlp_params()
            mtp = self.mtp_layers * (attn + self.dense_mlp_params() + 2 * self.d_model * self.d_model)
        return float(layers + mtp + self.d_model * self.vocab)

    def flops_per_token(self, seq_len: int, causal: bool = True) -> float:
        layers = self.n_layers - self.linear_layers + self.mtp_layers
        keys = seq_len * (0.5 if causal else 1.0)  # keys per query, averaged over the sequence
        w = min(self.sliding_window, seq_len)
        # a causal window: query t sees min(t + 1, w) keys
        keys_sw = (w * (w + 1) / 2 + (seq_len - w) * w) / seq_len if causal else float(w)
        softmax = (layers - self.sliding_layers) * keys + self.sliding_layers * keys_sw
        attn = 6.0 * self.n_heads * (self.qk_dim + self.v_dim) * softmax
        return 6.0 * self.matmul_params_per_token() + attn + self.linear_attention_flops_per_token()

    def linear_attention_flops_per_token(self) -> float:
        """Training FLOPs per token of the linear-attention kernels (chunked: the state update and
        read, 2 dk dv, and the intra-chunk attention over LINEAR_CHUNK tokens), 0 without them."""
        if not (self.linear_attn and self.linear_layers):
            return 0.0
        _, dk, hv, dv = self.linear_attn
        return 6.0 * self.linear_layers * hv * (2 * dk * dv + self.LINEAR_CHUNK * (dk + dv))


def from_hf_config(path: str | Path) -> ModelShape:
    try:
        cfg = jsonio.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read model config ({exc.__class__.__name__})",
            path=str(path),
            fix="pass a Hugging Face config.json",
        ) from None
    if not isinstance(cfg, dict):
        raise ConfigError("model config is not a JSON object", path=str(path), fix="pass a Hugging Face config.json")
    return from_config_dict(cfg, str(path))


def from_config_dict(cfg: dict[str, Any], path: str = "model config") -> ModelShape:
    """A :class:`ModelShape` from Hugging Face config keys (see :func:`from_hf_config`)."""
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}
    _check_whole(cfg, path)
    explicit_head_dim = cfg.get("head_dim") is not None
    cfg = normalize(cfg, path)  # block patterns, Mamba-2 heads, wide shared experts (hf_config_keys.py)
    try:
        d = int(_get(cfg, "hidden_size", "d_model", "n_embd"))
        layers = int(_get(cfg, "num_hidden_layers", "n_layer", "num_layers"))
        heads = int(_get(cfg, "num_attention_heads", "n_head"))
    except (TypeError, ValueError):
        names = (
            ("hidden_size", "d_model", "n_embd"),
            ("num_hidden_layers", "n_layer", "num_layers"),
            ("num_attention_heads", "n_head"),
        )
        missing = [keys[0] for keys in names if not isinstance(_get(cfg, *keys), (int, float))]
        raise ConfigError(
            f"config lacks {' / '.join(missing) or 'numeric model dimensions'}",
            path=str(path),
            fix="add them under their Hugging Face names, or for analyze pass --model-flops N",
        ) from None
    for key, value in (("hidden_size", d), ("num_hidden_layers", layers), ("num_attention_heads", heads)):
        if value < 1:
            raise ConfigError(f"{key} is {value}; it must be at least 1", path=str(path), fix="fix the config")
    act = str(_get(cfg, "mlp_hidden_act", "hidden_act", "activation_function", default="silu"))
    linear_layers, linear_attn = _linear_layers(cfg, layers, heads, path)
    try:
        n_experts = int(_get(cfg, "num_local_experts", "num_experts", "n_routed_experts", default=0) or 0)
        shape = ModelShape(
            d_model=d,
            n_layers=layers,
            n_heads=heads,
            n_kv_heads=int(_get(cfg, "num_key_value_heads", default=heads)),
            head_dim=int(_get(cfg, "head_dim", default=d // heads)),
            d_ff=int(_get(cfg, "intermediate_size", "n_inner", "ffn_dim", default=4 * d)),
            vocab=int(_get(cfg, "vocab_size", default=0)),
            gated_mlp=act in ("silu", "swiglu", "geglu", "gelu_pytorch_tanh")
            and "gpt2" not in str(cfg.get("model_type", "")),
            n_experts=n_experts,
            experts_per_token=int(_get(cfg, "num_experts_per_tok", "experts_per_token", "moe_topk", default=0) or 0),
            d_ff_expert=int(
                _get(
                    cfg,
                    "moe_intermediate_size",
                    "expert_intermediate_size",
                    default=_get(cfg, "intermediate_size", default=4 * d),
                )
            ),
            n_shared_experts=int(_get(cfg, "n_shared_experts", "num_shared_experts", default=0) or 0),
            first_dense_layers=_dense_layers(cfg, layers) if n_experts else 0,
            mla=(
                (
                    int(cfg.get("q_lora_rank") or 0),
                    int(cfg["kv_lora_rank"]),
                    int(cfg.get("qk_nope_head_dim") or 128),
                    int(cfg.get("qk_rope_head_dim") or 64),
                    int(cfg.get("v_head_dim") or 128),
                )
                if cfg.get("kv_lora_rank")
                else None
            ),
            mtp_layers=int(_get(cfg, "num_nextn_predict_layers", "num_mtp_layers", default=0) or 0),
            **_routing_groups(cfg, n_experts),
            linear_layers=linear_layers,
            linear_attn=linear_attn,
            **_sliding(cfg, layers - linear_layers, path),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"a model dimension is not a number ({exc})", path=str(path), fix="fix the config's value"
        ) from None
    if shape.n_experts and shape.experts_per_token <= 0:
        raise ConfigError(
            f"a MoE config ({shape.n_experts} experts) without experts per token",
            path=str(path),
            fix="add num_experts_per_tok",
        )
    _check_shape(shape, explicit_head_dim, str(path))
    return shape


# dimension keys that must hold whole numbers (read before the family rewrites, which may scale widths)
_WHOLE_KEYS = (
    "hidden_size",
    "d_model",
    "n_embd",
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "num_attention_heads",
    "n_head",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "n_inner",
    "ffn_dim",
    "vocab_size",
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "num_experts_per_tok",
    "experts_per_token",
    "moe_topk",
    "moe_intermediate_size",
    "expert_intermediate_size",
    "n_shared_experts",
    "num_shared_experts",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "num_nextn_predict_layers",
    "first_k_dense_replace",
    "sliding_window",
    "full_attention_interval",
    "decoder_sparse_step",
    "linear_num_key_heads",
    "linear_key_head_dim",
    "linear_num_value_heads",
    "linear_value_head_dim",
)
_MAX_DIM = 2**31  # larger than any model's dimension; products of such values would overflow int64


def _check_whole(cfg: dict[str, Any], path: str) -> None:
    """A dimension that is a fraction, negative, a boolean or beyond 2^31 is refused: ``int()``
    would truncate 4.5 layers to 4 and read ``true`` as 1 without a word; JSON's 1e400 reads as
    infinity, which no later step can turn into an integer."""
    for key, v in cfg.items():
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"{key} is {v!r}, not a finite number", path=path, fix="fix the config's value")
    for key in _WHOLE_KEYS:
        v = cfg.get(key)
        if v is None or isinstance(v, str):  # strings: int() below says whether they are numbers
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v > _MAX_DIM or float(v) != int(v):
            raise ConfigError(
                f"{key} is {v!r}, not a whole number from 0 to 2^31", path=path, fix="fix the config's value"
            )


def _check_shape(m: ModelShape, explicit_head_dim: bool, path: str) -> None:
    """Shapes no model has: zero sizes (an MLP width of 0 is a model without MLPs), more key/value
    heads than query heads (or a count that does not divide them), a hidden size the heads do not
    divide when ``head_dim`` is not given, more experts per token than experts."""
    for name, v in (
        ("hidden_size", m.d_model),
        ("num_hidden_layers", m.n_layers),
        ("num_attention_heads", m.n_heads),
        ("num_key_value_heads", m.n_kv_heads),
        ("head_dim", m.head_dim),
    ):  # d_ff 0: no MLP (Mamba-2 stacks)
        if v < 1:
            raise ConfigError(f"{name} is {v}; it must be at least 1", path=path, fix="fix the config's value")
    if m.n_kv_heads > m.n_heads or m.n_heads % m.n_kv_heads:
        raise ConfigError(
            f"num_key_value_heads {m.n_kv_heads} does not divide num_attention_heads {m.n_heads}",
            path=path,
            fix="grouped-query attention shares each key/value head among a whole number of query heads",
        )
    if not explicit_head_dim and m.d_model % m.n_heads:
        raise ConfigError(
            f"hidden_size {m.d_model} is not a multiple of num_attention_heads {m.n_heads}",
            path=path,
            fix="add head_dim",
        )
    if m.n_experts and m.experts_per_token > m.n_experts:
        raise ConfigError(
            f"{m.experts_per_token} experts per token out of {m.n_experts} experts",
            path=path,
            fix="fix num_experts_per_tok or the number of experts",
        )


def _sliding(cfg: dict[str, Any], softmax_layers: int, path: str) -> dict[str, int]:
    """Sliding-window attention layers: those named ``sliding_attention`` in ``layer_types``
    (GPT-OSS, Gemma 2/3), or every layer when ``sliding_window`` is set without ``layer_types``
    and not switched off by ``use_sliding_window: false`` (Mistral; Qwen2 configs carry a window
    they do not use)."""
    window = cfg.get("sliding_window")
    if not window:
        return {}
    try:
        w = int(window)
    except (TypeError, ValueError):
        raise ConfigError(f"sliding_window {window!r} is not an integer", path=path, fix="fix the config") from None
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        n = sum(1 for t in types if "sliding" in str(t))
    elif cfg.get("use_sliding_window", True) is False:
        return {}
    else:
        n = softmax_layers
    return {"sliding_layers": min(n, softmax_layers), "sliding_window": w} if n else {}


def _linear_layers(
    cfg: dict[str, Any], layers: int, heads: int, path: str
) -> tuple[int, tuple[int, int, int, int] | None]:
    """(number of linear-attention layers, their head shape) from ``layer_types`` or
    ``full_attention_interval`` (every k-th layer full attention, the rest linear)."""
    types = cfg.get("layer_types") or cfg.get("layers_block_type")  # Bamba, Granite-4.0-H: layers_block_type
    if isinstance(types, list) and types:
        n = sum(1 for t in types if "linear" in str(t) or str(t) in ("mamba", "gla", "deltanet"))
    elif cfg.get("full_attention_interval"):
        k = int(cfg["full_attention_interval"])
        n = layers - layers // max(k, 1)
    else:
        return 0, None
    if n == 0:
        return 0, None
    try:
        hk = int(_get(cfg, "linear_num_key_heads", default=heads))
        dk = int(_get(cfg, "linear_key_head_dim", default=128))
        hv = int(_get(cfg, "linear_num_value_heads", default=hk))
        dv = int(_get(cfg, "linear_value_head_dim", default=dk))
    except (TypeError, ValueError):
        raise ConfigError(
            "linear-attention head sizes are not integers",
            path=str(path),
            fix="check linear_num_key_heads / linear_key_head_dim",
        ) from None
    return min(n, layers), (hk, dk, hv, dv)


def _routing_groups(cfg: dict[str, Any], n_experts: int) -> dict[str, int]:
    """DeepSeek's group-limited routing (``n_group`` expert groups, ``topk_group`` of them per
    token), kept only when it limits anything: a MoE model whose groups split the experts evenly
    and fewer groups chosen than there are."""
    groups, chosen = int(cfg.get("n_group") or 0), int(cfg.get("topk_group") or 0)
    if n_experts and groups > 1 and 0 < chosen < groups and n_experts % groups == 0:
        return {"routing_groups": groups, "routing_group_topk": chosen}
    return {}


def _dense_layers(cfg: dict[str, Any], layers: int) -> int:
    """How many layers of a MoE model have a dense MLP."""
    if cfg.get("first_k_dense_replace"):
        return int(cfg["first_k_dense_replace"])
    dense = {int(i) for i in cfg.get("mlp_only_layers") or [] if 0 <= int(i) < layers}
    step = int(cfg.get("decoder_sparse_step") or 1)
    if step > 1:
        dense |= {i for i in range(layers) if (i + 1) % step != 0}
    return len(dense)
