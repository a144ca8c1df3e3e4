"""FLOPs and bytes of an Ascend NPU task from its own shapes (``kernel_details.csv``).

When no ATen operator with recorded shapes launched a task (``record_shapes`` off, the default),
the task's CANN operator type and its input shapes and types (``trace/ascend_kernels.py``) still
give its cost, by the formulas of ``flops.py``:
- the operator type is the task's name without its instance number, aclnn prefix and version
  (``MatMul46`` -> MatMul, ``aclnnMm_MatMulCommon_MatMulV2`` -> MatMul, ``trans_Cast_7`` -> Cast,
  ``LayerNormV3`` -> LayerNorm): the Name column of ``kernel_details.csv`` is built so;
- MatMul / BatchMatMul (V2, V3...): the files do not say which input is transposed, so the shared
  dimension k is found from the shapes: ``A[.., m, k] x B[.., k, n]`` first, then B transposed
  (``B[.., n, k]``), A transposed, both; 2*m*k*n per batch. A bias input is not counted.
- vector operators (Add, Mul, Cast...): the pointwise, norm, softmax and copy formulas.
Other types have no formula (not counted in the roofline's coverage).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from .flops import Dims, OpCost, bmm, copy, elementwise, mm, norm, op_cost, softmax, tensors

_INSTANCE = re.compile(r"[_\d]+$")
_VERSION = re.compile(r"V\d*$")
_MATMUL = re.compile(r"^(Batch)?Mat[Mm]ul$")
_POINTWISE = frozenset(
    "Add Adds Sub Mul Muls RealDiv Div Divs Square Sqrt Rsqrt Exp Log Relu ReluGrad Gelu GeluGrad "
    "FastGelu FastGeluGrad Sigmoid SigmoidGrad Tanh TanhGrad Swish SwiGlu Silu Neg Reciprocal Pow Maximum "
    "Minimum Axpy Addcmul Addcdiv Greater GreaterEqual Less LessEqual Equal LogicalNot LogicalAnd LogicalOr "
    "Select DropOutDoMask ApplyAdamW ZerosLike OnesLike Fill MemSet".split()
)
_NORM = frozenset("LayerNorm LayerNormGrad RmsNorm RmsNormGrad".split())
_SOFTMAX = frozenset("Softmax SoftmaxGrad ScaledMaskedSoftmax ScaledMaskedSoftmaxGrad LogSoftmax".split())
_COPY = frozenset("Cast Transpose TransData TensorMove Identity ViewCopy AsStrided StridedSliceD Slice".split())


def op_type(task_name: str) -> str:
    """The CANN operator type of a task name (see the module)."""
    base = _INSTANCE.sub("", task_name).rsplit("_", 1)[-1]
    return _VERSION.sub("", base) or base


def matmul(dims: Dims, types: list[str]) -> OpCost | None:
    """``(Batch)MatMul`` with the transposition found from the shapes (see the module)."""
    t = tensors(dims, types)
    if len(t) < 2 or len(t[0][0]) < 2 or len(t[1][0]) < 2:
        return None
    a, b = t[0][0], t[1][0]
    for ta, tb in ((False, False), (False, True), (True, False), (True, True)):
        m, k = (a[-1], a[-2]) if ta else (a[-2], a[-1])
        k2, n = (b[-1], b[-2]) if tb else (b[-2], b[-1])
        if k == k2:
            batch = max(math.prod(a[:-2]), math.prod(b[:-2]))
            pair = (types + ["", ""])[:2]
            if batch > 1:
                return bmm([[batch, m, k], [batch, k, n]], pair)
            return mm([[m, k], [k, n]], pair)
    return None


_FORMULAS: tuple[tuple[Callable[[str], bool], Callable[[Dims, list[str]], OpCost | None]], ...] = (
    (lambda s: bool(_MATMUL.match(s)), matmul),
    (lambda s: s in _POINTWISE, elementwise),
    (lambda s: s in _NORM, norm),
    (lambda s: s in _SOFTMAX, softmax),
    (lambda s: s in _COPY, copy),
)


def task_cost(task_name: str, dims_json: str | None, types_json: str | None) -> OpCost | None:
    """Cost of one task signature; None when its type has no formula or the shapes do not fit."""
    kind = op_type(task_name)
    fn = next((f for match, f in _FORMULAS if match(kind)), None)
    if fn is None:
        return None
    return op_cost("", dims_json, types_json, formula=fn)
