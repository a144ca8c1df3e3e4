"""FLOPs and bytes per CPU op from recorded shapes (``Input Dims``/``Input type``).

Conventions (the same as ``torch.utils.flop_counter`` where it counts the op):
- a multiply-add is 2 FLOPs; ``mm(A[m,k], B[k,n])`` = ``2*m*k*n``.
- bytes = every input tensor read once + the output written once (an ideal-cache lower bound).
Each formula below states its assumptions. Ops with no formula return ``None`` (not counted in
coverage). Called once per distinct (name, dims, types) signature, never per event.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

from ...catalog.hardware import dtype_of

Dims = list[list[int]]


@dataclass(frozen=True)
class OpCost:
    flops: float
    bytes: float
    dtype: str  # compute dtype for the roofline peak (fp32, bf16, fp16, fp8...)


def _numel(shape: list[int]) -> int:
    return math.prod(shape) if shape else 1


def tensors(dims: Dims, types: list[str]) -> list[tuple[list[int], int, str]]:
    """(shape, bytes per element, dtype) of each tensor input (lists of ints; scalars skipped)."""
    out = []
    for i, d in enumerate(dims):
        if isinstance(d, list) and d and all(isinstance(x, int) for x in d):
            dt, size = dtype_of(types[i] if i < len(types) else None)
            out.append((d, size, dt))
    return out


def _io_bytes(ins: list[tuple[list[int], int, str]], out_numel: int, out_size: int) -> float:
    return float(sum(_numel(s) * b for s, b, _ in ins) + out_numel * out_size)


def mm(dims: Dims, types: list[str]) -> OpCost | None:
    """``mm/_scaled_mm(A[m,k], B[k,n])``: 2*m*k*n FLOPs."""
    t = tensors(dims, types)
    if len(t) < 2 or len(t[0][0]) != 2 or len(t[1][0]) != 2:
        return None
    (m, k), (_, n) = t[0][0], t[1][0]
    return OpCost(2.0 * m * k * n, _io_bytes(t[:2], m * n, t[0][1]), t[0][2])


def addmm(dims: Dims, types: list[str]) -> OpCost | None:
    """``addmm(bias, A[m,k], B[k,n])``: 2*m*k*n (the bias add is not counted, as in torch)."""
    t = tensors(dims, types)
    if len(t) < 3:
        return None
    a, b = t[1][0], t[2][0]
    if len(a) != 2 or len(b) != 2:
        return None
    m, k, n = a[0], a[1], b[1]
    return OpCost(2.0 * m * k * n, _io_bytes(t[:3], m * n, t[1][1]), t[1][2])


def bmm(dims: Dims, types: list[str]) -> OpCost | None:
    """``bmm(A[b,m,k], B[b,k,n])``: 2*b*m*k*n."""
    t = tensors(dims, types)
    if len(t) < 2 or len(t[0][0]) != 3 or len(t[1][0]) != 3:
        return None
    (b, m, k), (_, _, n) = t[0][0], t[1][0]
    return OpCost(2.0 * b * m * k * n, _io_bytes(t[:2], b * m * n, t[0][1]), t[0][2])


def baddbmm(dims: Dims, types: list[str]) -> OpCost | None:
    """``baddbmm(C, A[b,m,k], B[b,k,n])``: 2*b*m*k*n."""
    t = tensors(dims, types)
    if len(t) < 3:
        return None
    return bmm([t[1][0], t[2][0]], [types[1] if len(types) > 1 else "", types[2] if len(types) > 2 else ""])


def linear(dims: Dims, types: list[str]) -> OpCost | None:
    """``linear(x[..., k], W[n, k], bias)``: 2 * prod(x.shape[:-1]) * k * n."""
    t = tensors(dims, types)
    if len(t) < 2 or len(t[1][0]) != 2:
        return None
    x, (n, k) = t[0][0], t[1][0]
    rows = _numel(x[:-1])
    return OpCost(2.0 * rows * k * n, _io_bytes(t, rows * n, t[0][1]), t[0][2])


def matmul(dims: Dims, types: list[str]) -> OpCost | None:
    """``matmul(A[..., m, k], B[..., k, n])`` with broadcast batch: 2 * batch * m * k * n
    (1-D operands are treated as a row/column vector)."""
    t = tensors(dims, types)
    if len(t) < 2:
        return None
    a, b = list(t[0][0]), list(t[1][0])
    if len(a) == 1:
        a = [1] + a
    if len(b) == 1:
        b = b + [1]
    m, k, n = a[-2], a[-1], b[-1]
    ba, bb = a[:-2], b[:-2]
    width = max(len(ba), len(bb))
    ba, bb = [1] * (width - len(ba)) + ba, [1] * (width - len(bb)) + bb
    batch = math.prod(max(x, y) for x, y in zip(ba, bb)) if width else 1
    return OpCost(2.0 * batch * m * k * n, _io_bytes(t[:2], batch * m * n, t[0][1]), t[0][2])


def convolution(dims: Dims, types: list[str]) -> OpCost | None:
    """``convolution(x[N,Cin,*S], w[Cout,Cin/g,*K], ...)`` forward, stride/padding unknown from dims:
    FLOPs = 2 * N * Cout * prod(S_out) * Cin/g * prod(K), with S_out = S (stride 1, same padding)."""
    t = tensors(dims, types)
    if len(t) < 2 or len(t[0][0]) < 3 or len(t[1][0]) != len(t[0][0]):
        return None
    x, w = t[0][0], t[1][0]
    n, spatial = x[0], x[2:]
    cout, cin_g, kernel = w[0], w[1], w[2:]
    out = n * cout * _numel(spatial)
    return OpCost(2.0 * out * cin_g * _numel(kernel), _io_bytes(t[:2], out, t[0][1]), t[0][2])


def sdpa(dims: Dims, types: list[str], backward: bool = False) -> OpCost | None:
    """Attention ``q[b,h,sq,d], k[b,hk,sk,d], v[b,hk,sk,dv]`` (GQA: hk divides h): forward
    = 2*b*h*sq*sk*d (QK^T) + 2*b*h*sq*sk*dv (PV); backward = 2.5x forward: dV, dP, dQ, dK plus
    the recomputed QK^T that flash-style kernels execute (torch's flop counter counts the same).
    Not halved for causal masks (the shapes do not say; torch's counter does the same)."""
    t = tensors(dims, types)
    if len(t) < 3 or len(t[0][0]) != 4:
        return None
    (b, h, sq, d), (_, _, sk, _), (_, _, _, dv) = t[0][0], t[1][0], t[2][0]
    f = 2.0 * b * h * sq * sk * d + 2.0 * b * h * sq * sk * dv
    out = b * h * sq * dv
    return OpCost(2.5 * f if backward else f, _io_bytes(t[:3], out, t[0][1]) * (2 if backward else 1), t[0][2])


def flash_varlen_or_bshd(dims: Dims, types: list[str], backward: bool = False) -> OpCost | None:
    """flash-attn ``q[b,s,h,d]`` layout (``_flash_attention_forward``/``flash_attn`` ops): same
    counts as :func:`sdpa` after moving heads before sequence."""
    t = tensors(dims, types)
    if len(t) < 3 or len(t[0][0]) != 4:
        return None
    perm = [[s[0], s[2], s[1], s[3]] for s, _, _ in t[:3]]
    return sdpa(perm, types, backward)


def norm(dims: Dims, types: list[str]) -> OpCost | None:
    """layer/RMS/batch/group norm: ~5 FLOPs per element (mean, var, normalize, scale, shift);
    memory-bound: reads x (+ weights) and writes y."""
    t = tensors(dims, types)
    if not t:
        return None
    n = _numel(t[0][0])
    return OpCost(5.0 * n, _io_bytes(t, n, t[0][1]), t[0][2])


def softmax(dims: Dims, types: list[str]) -> OpCost | None:
    """softmax/log_softmax: ~5 FLOPs per element (max, sub, exp, sum, div)."""
    t = tensors(dims, types)
    if not t:
        return None
    n = _numel(t[0][0])
    return OpCost(5.0 * n, _io_bytes(t[:1], n, t[0][1]), t[0][2])


def elementwise(dims: Dims, types: list[str]) -> OpCost | None:
    """Pointwise ops: 1 FLOP per output element; output = broadcast of the tensor inputs."""
    t = tensors(dims, types)
    if not t:
        return None
    width = max(len(s) for s, _, _ in t)
    shape = [1] * width
    for s, _, _ in t:
        for i, x in enumerate([1] * (width - len(s)) + s):
            shape[i] = max(shape[i], x)
    n = _numel(shape)
    return OpCost(float(n), _io_bytes(t, n, t[0][1]), t[0][2])


def copy(dims: Dims, types: list[str]) -> OpCost | None:
    """copy_/to/contiguous/clone: no FLOPs; read and write the tensor."""
    t = tensors(dims, types)
    if not t:
        return None
    n = _numel(t[0][0])
    return OpCost(0.0, 2.0 * n * t[0][1], t[0][2])


def embedding(dims: Dims, types: list[str]) -> OpCost | None:
    """``embedding(weight[V,d], indices[...])``: no FLOPs; gathers prod(indices)*d rows."""
    t = tensors(dims, types)
    if len(t) < 2:
        return None
    (_, d), idx = t[0][0][-2:], t[1][0]
    rows = _numel(idx)
    return OpCost(0.0, float(rows * d * t[0][1] * 2 + rows * t[1][1]), t[0][2])


def cross_entropy(dims: Dims, types: list[str]) -> OpCost | None:
    """cross_entropy/nll over logits[N, V]: log-softmax (~5/elem) + gather: ~6 FLOPs per logit."""
    t = tensors(dims, types)
    if not t:
        return None
    n = _numel(t[0][0])
    return OpCost(6.0 * n, _io_bytes(t[:1], 0, 0), t[0][2])


def grouped_mm(dims: Dims, types: list[str]) -> OpCost | None:
    """MoE grouped GEMM ``_grouped_mm(A[T,k], B[E,k,n], offs)``: each token row meets one expert:
    2*T*k*n (``A[G,m,k] x B[G,k,n]`` batched form: 2*G*m*k*n)."""
    t = tensors(dims, types)
    if len(t) < 2:
        return None
    a, b = t[0][0], t[1][0]
    if len(a) == 2 and len(b) == 3:
        (tok, k), n = a, b[2]
        return OpCost(2.0 * tok * k * n, _io_bytes(t[:2], tok * n, t[0][1]), t[0][2])
    if len(a) == 3 and len(b) == 3:
        return bmm([a, b], types)
    return None


_EXACT: dict[str, Callable[[Dims, list[str]], OpCost | None]] = {
    "aten::mm": mm,
    "aten::_scaled_mm": mm,
    "aten::addmm": addmm,
    "aten::bmm": bmm,
    "aten::baddbmm": baddbmm,
    "aten::linear": linear,
    "aten::matmul": matmul,
    "aten::convolution": convolution,
    "aten::_convolution": convolution,
    "aten::cudnn_convolution": convolution,
    "aten::scaled_dot_product_attention": sdpa,
    "aten::_scaled_dot_product_flash_attention": sdpa,
    "aten::_scaled_dot_product_efficient_attention": sdpa,
    "aten::_scaled_dot_product_cudnn_attention": sdpa,
    "aten::_scaled_dot_product_flash_attention_backward": lambda d, t: sdpa(d[1:], t[1:], backward=True),
    "aten::_scaled_dot_product_efficient_attention_backward": lambda d, t: sdpa(d[1:], t[1:], backward=True),
    "aten::_scaled_dot_product_cudnn_attention_backward": lambda d, t: sdpa(d[1:], t[1:], backward=True),
    "aten::_flash_attention_forward": flash_varlen_or_bshd,
    "aten::_flash_attention_backward": lambda d, t: flash_varlen_or_bshd(d[1:], t[1:], backward=True),
    "aten::_grouped_mm": grouped_mm,
    "aten::layer_norm": norm,
    "aten::native_layer_norm": norm,
    "aten::rms_norm": norm,
    "aten::_fused_rms_norm": norm,
    "aten::batch_norm": norm,
    "aten::cudnn_batch_norm": norm,
    "aten::native_batch_norm": norm,
    "aten::group_norm": norm,
    "aten::native_group_norm": norm,
    "aten::softmax": softmax,
    "aten::_softmax": softmax,
    "aten::log_softmax": softmax,
    "aten::_log_softmax": softmax,
    "aten::embedding": embedding,
    "aten::cross_entropy_loss": cross_entropy,
    "aten::nll_loss": cross_entropy,
    "aten::copy_": copy,
    "aten::clone": copy,
    "aten::contiguous": copy,
}
_POINTWISE = {
    "add",
    "add_",
    "sub",
    "sub_",
    "mul",
    "mul_",
    "div",
    "div_",
    "relu",
    "relu_",
    "gelu",
    "silu",
    "silu_",
    "sigmoid",
    "tanh",
    "exp",
    "pow",
    "neg",
    "rsqrt",
    "sqrt",
    "where",
    "threshold_backward",
    "gelu_backward",
    "silu_backward",
    "sigmoid_backward",
    "tanh_backward",
    "native_dropout",
    "addcmul_",
    "addcdiv_",
    "lerp_",
    "fill_",
    "zero_",
    "clamp",
}


def op_cost(
    name: str,
    dims_json: str | None,
    types_json: str | None,
    *,
    formula: Callable[[Dims, list[str]], OpCost | None] | None = None,
) -> OpCost | None:
    """Cost of one op signature; ``None`` when there is no formula or the shapes do not fit it.
    ``formula`` overrides the lookup by name (the caller knows the op's kind)."""
    fn = formula or _EXACT.get(name)
    if fn is None and name.startswith("aten::") and name[6:] in _POINTWISE:
        fn = elementwise
    if fn is None or not dims_json:
        return None
    try:
        dims = json.loads(dims_json)
        types = json.loads(types_json) if types_json else []
    except ValueError:
        return None
    if not isinstance(dims, list):
        return None
    types = [t if isinstance(t, str) else "" for t in types] if isinstance(types, list) else []
    try:
        return fn(dims, types)
    except (TypeError, ValueError, IndexError):
        return None
