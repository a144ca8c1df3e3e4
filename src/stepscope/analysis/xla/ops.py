"""Categories of XLA ops (from JAX/XLA profiles), on the same vocabulary as GPU kernels.

Rules are data (``data/xla_rules.yaml``); each is tried once per *distinct* (op_class, op, name)
triple, never per event. Categories: ``gemm`` (dot / convolution fusions), ``attention``,
``linear_attention``, ``grouped_gemm`` (named custom calls), ``custom_call`` (other Pallas /
Mosaic / FFI kernels), ``comm:<type>`` (sync and async collectives), ``data_formatting`` (copy,
transpose, bitcast, reshape, pad, slices), ``reduction``, ``elementwise``, ``infeed_outfeed``,
``host_transfer``, ``memcpy_d2d`` (copy-start/done), ``other``.

Fusion kind: ``kLoop`` / ``kInput`` / ``kOutput`` / ``kCustom`` when the op class says so (from the
HLO text), else from XLA's naming (``loop_*fusion`` = kLoop, ``input_*fusion`` = kInput,
``*gemm_fusion*`` / ``triton*`` = kCustom, ``output*fusion`` = kOutput), else unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from ...yamlio import safe_load
from ..classify import COMM_PREFIX

_ASYNC_DONE = re.compile(r"-done(\.\d+)?$")


@dataclass(frozen=True)
class XlaRules:
    collectives: tuple[tuple[str, re.Pattern[str]], ...]
    comm: re.Pattern[str]
    custom_calls: tuple[tuple[str, re.Pattern[str]], ...]
    categories: tuple[tuple[str, re.Pattern[str]], ...]


@lru_cache(maxsize=1)
def rules() -> XlaRules:
    doc = safe_load(resources.files("stepscope.data").joinpath("xla_rules.yaml").read_text())

    def comp(items: list[dict[str, str]], key: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
        return tuple((str(r[key]), re.compile(str(r["pattern"]), re.IGNORECASE)) for r in items)

    return XlaRules(
        comp(doc["collectives"], "type"),
        re.compile(doc["comm"], re.IGNORECASE),
        comp(doc["custom_calls"], "category"),
        comp(doc["categories"], "category"),
    )


def category(op_class: str | None, op: str | None, name: str | None, scope: str | None = None) -> str:
    r = rules()
    text = f"{op_class or ''}|{op or ''}|{name or ''}"
    if r.comm.search(text):
        return COMM_PREFIX + next((t for t, p in r.collectives if p.search(text)), "other")
    custom = bool(re.search(r"custom-call|custom_call|pallas|mosaic|_ffi|__cudnn", text, re.IGNORECASE))
    if custom or not op_class:
        full = f"{text}|{scope or ''}" if custom else text
        for cat, pat in r.custom_calls:
            if pat.search(full):
                return cat
    for cat, pat in r.categories:
        if pat.search(text):
            return cat
    return "other"


def fusion_kind(op_class: str | None, op: str | None) -> str | None:
    oc, o = (op_class or "").lower(), (op or "").lower()
    m = re.search(r"fusion:k(loop|input|output|custom)", oc)
    if m:
        return "k" + m.group(1).capitalize()
    if "fusion" not in o and "fusion" not in oc:
        return None
    if o.startswith("loop_") or "loop fusion" in oc:
        return "kLoop"
    if o.startswith("input_") or "input fusion" in oc:
        return "kInput"
    if "gemm_fusion" in o or o.startswith("triton") or "custom fusion" in oc or o.startswith("ynn_fusion"):
        return "kCustom"
    if o.startswith("output") or "output fusion" in oc or "convolution fusion" in oc:
        return "kOutput"
    return "unknown"


def is_async_done(op: str | None) -> bool:
    return bool(op and _ASYNC_DONE.search(op))
