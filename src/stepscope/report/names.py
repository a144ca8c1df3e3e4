"""Kernel and op names a person can read: demangled, then shortened to the part that tells them
apart (the full name stays in the JSON and on hover in the HTML report).

``readable(name)``:
1. an Itanium-mangled name (``_Z...``) is demangled with LLVM's demangler (``pydemumble``; left
   as it is when the package is absent or the name does not demangle);
2. the return type (``void``), the parameter list and the namespaces go;
3. template arguments are reduced to the one that distinguishes the kernel: the function named in
   them (``direct_copy_kernel_cuda`` in an elementwise kernel's lambda), else the innermost functor
   or op type (``MulFunctor``), else the first argument naming a type that is not a plain scalar;
   a generic kernel name (``Kernel``, ``kentry``, ``elementwise_kernel``...) gives way to it.

So ``void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float,
float, at::native::binary_internal::MulFunctor<float> >, ...>(...)`` reads
``vectorized_elementwise_kernel<MulFunctor>`` and ``void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align4>(...)``
reads ``cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align4``. Names without templates or
parameters (``attn_fwd``, Tensile's ``Cijk_...``, ``aten::mm``) are kept whole.
"""

from __future__ import annotations

import re
from functools import lru_cache

#: kernel names that say nothing by themselves: the template argument that does replaces them
_GENERIC = frozenset(("Kernel", "Kernel2", "kentry", "kernel", "device_kernel", "global_kernel", "launch_kernel"))
#: identifiers in template arguments that never distinguish a kernel
_PLAIN = frozenset(
    """void bool char short int long unsigned signed float double half float2 float4 int2 int4 size_t
    const auto decltype nullptr true false Array array TensorListMetadata OpaqueType BFloat16 Half
    bfloat16_t float16_t bfloat16 __nv_bfloat16 __half operator lambda gpu_kernel_impl
    gpu_kernel_impl_nocast anonymous namespace std at native detail cuda c10 cub at_cuda_detail
    RestrictPtrTraits GenericPackedTensorAccessor TensorIteratorBase TensorIterator Scalar
    multiplies plus minus divides""".split()
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CALLED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_FUNCTOR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:Functor|Op|Ops|_op|Impl)(?![A-Za-z0-9_])")


@lru_cache(maxsize=1)
def _demangler():  # type: ignore[no-untyped-def]
    try:
        import pydemumble
    except ImportError:
        return None
    return pydemumble.demangle


def demangled(name: str) -> str:
    """``name`` demangled when it is an Itanium-mangled symbol that demangles, else as it is."""
    if not name.startswith("_Z"):
        return name
    fn = _demangler()
    if fn is None:
        return name
    try:
        out = fn(name)
    except Exception:  # a demangler failure only leaves the name mangled
        return name
    return out if isinstance(out, str) and out else name


def _top_level(s: str) -> list[tuple[int, str]]:
    """(index, character) of the characters of ``s`` outside any ``<...>``; a ``<`` or ``>``
    inside parentheses (``enable_if<(8 > 0)>``) is an operator, not a bracket."""
    out, depth, paren = [], 0, 0
    for i, ch in enumerate(s):
        if ch in "<>" and paren == 0:
            depth = depth + 1 if ch == "<" else max(depth - 1, 0)
            continue
        if depth > 0:
            paren += (ch == "(") - (ch == ")")
            paren = max(paren, 0)
            continue
        out.append((i, ch))
    return out


def _split(s: str) -> tuple[str, str]:
    """(qualified function name, its template arguments) of a demangled signature: the parameter
    list (from the first top-level ``(``) and a return type (up to the last top-level space before
    the name) go."""
    top = _top_level(s)
    paren = next((i for i, ch in top if ch == "("), len(s))
    head = s[:paren]
    space = max((i for i, ch in top if ch == " " and i < paren), default=-1)
    head = head[space + 1 :]
    lt = head.find("<")
    if lt < 0:
        return head, ""
    close = head.rfind(">")
    return head[:lt], head[lt + 1 : close if close > lt else len(head)]


def _first_arg_name(targs: str) -> str | None:
    """The name of the first template argument that names a type (its last path component)."""
    for arg in targs.split(","):
        name = arg.split("<", 1)[0].strip().rsplit("::", 1)[-1]
        if _IDENT.fullmatch(name) and name not in _PLAIN:
            return name
    return None


def _hint(targs: str) -> str | None:
    """The template argument that distinguishes the kernel (module docstring), or None."""
    for m in _CALLED.finditer(targs):
        word = m.group(1)
        if word not in _PLAIN and not word.startswith("lambda"):
            return word
    functors = [f for f in _FUNCTOR.findall(targs) if f not in _PLAIN]
    if functors:
        return functors[-1]
    for word in _IDENT.findall(targs):
        if word not in _PLAIN and not word[0].isdigit() and len(word) > 2:
            return word
    return None


@lru_cache(maxsize=65536)
def readable(name: str) -> str:
    """The short readable form of a kernel or op name (module docstring)."""
    s = demangled(name).strip().replace("(anonymous namespace)::", "")
    if "(" not in s:  # not a signature (``attn_fwd``, ``aten::mm``, Tensile's names): kept whole
        return s
    qual, targs = _split(s)
    base = qual.rsplit("::", 1)[-1].strip() or s
    if not targs:
        return base
    if base in _GENERIC:
        return _first_arg_name(targs) or _hint(targs) or base
    hint = _hint(targs)
    return base if hint is None or hint == base else f"{base}<{hint}>"
