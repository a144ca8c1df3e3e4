"""Fused attention kernels' speed from published measurements (data/attention_kernels.yaml), as a
share of the device's matmul ceiling, so that the planner's attention time follows the kernel a
framework runs (FlashAttention-2, cuDNN, FlashAttention-3) instead of one prior for all.

The source times forward and backward separately and counts the backward as 2.5 x the forward's
FLOPs; the planner counts attention as forward + 2 x forward (planner/cost.py), so one pass of
forward and backward at the kernel's speeds takes 1 / F + 2.5 / B per forward FLOP, and the
combined speed in the planner's FLOPs is ``3 / (1 / F + 2.5 / B)``. Divided by the matmul ceiling
of the device the kernels were timed on, that is a share which other devices of the architecture
(another clock or power limit) multiply by their own ceiling. Between the measured sequence
lengths the share is interpolated in log2(sequence); outside them it is held at the end points.
The sequence a kernel call sees is the job's sequence over the context-parallel degree (each rank
attends with its chunk of queries). Sliding windows and head dims other than the measured one are
not distinguished."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, get_args

import numpy as np

from ..errors import ConfigError
from ..yamlio import safe_load
from .vocab import AttentionKernel

_PATH = "stepscope/data/attention_kernels.yaml"
KERNELS: tuple[str, ...] = tuple(k for k in get_args(AttentionKernel) if k)  # "" = no kernel named
BACKWARD_FLOPS = 2.5  # the source's backward FLOPs per forward FLOP (it recomputes the scores)


@dataclass(frozen=True)
class Architecture:
    devices: frozenset[str]  # lower-case device names (hardware.yaml)
    log2_seq: np.ndarray  # increasing
    shares: dict[str, np.ndarray]  # kernel -> forward + backward speed / the reference matmul ceiling, by log2_seq


def combined_tflops(forward: float | np.ndarray, backward: float | np.ndarray) -> float | np.ndarray:
    """Speed of one forward and backward pass in the planner's FLOPs (forward + 2 x forward) from the
    source's forward and backward speeds (backward counted as 2.5 x forward)."""
    return 3.0 / (1.0 / np.asarray(forward, dtype=np.float64) + BACKWARD_FLOPS / np.asarray(backward, dtype=np.float64))


def _floats(v: Any, n: int | None, what: str) -> np.ndarray:
    """A list of positive numbers (n of them, when given)."""
    if (
        not isinstance(v, list)
        or not v
        or (n is not None and len(v) != n)
        or not all(isinstance(x, int | float) and not isinstance(x, bool) and x > 0 for x in v)
    ):
        raise ConfigError(f"{what} must list {n or 'some'} positive numbers", path=_PATH, fix="one per entry of seq")
    return np.asarray(v, dtype=np.float64)


@lru_cache(maxsize=1)
def architectures() -> tuple[Architecture, ...]:
    raw = safe_load(resources.files("stepscope.data").joinpath("attention_kernels.yaml").read_text(encoding="utf-8"))
    out = []
    for name, a in (raw.get("architectures") or {}).items():
        seq = _floats(a.get("seq"), None, f"{name}: seq")
        if np.any(np.diff(seq) <= 0):
            raise ConfigError(
                f"{name}: seq must increase", path=_PATH, fix="list the measured sequence lengths in order"
            )
        ref = float(_floats([a.get("reference_matmul_tflops")], 1, f"{name}: reference_matmul_tflops")[0])
        shares = {}
        for kernel, k in (a.get("kernels") or {}).items():
            if kernel not in KERNELS:
                raise ConfigError(f"{name}: unknown kernel {kernel!r}", path=_PATH, fix=f"one of {', '.join(KERNELS)}")
            fwd = _floats(k.get("forward_causal"), len(seq), f"{name} {kernel} forward_causal")
            bwd = _floats(k.get("backward"), len(seq), f"{name} {kernel} backward")
            shares[kernel] = np.asarray(combined_tflops(fwd, bwd)) / ref
        out.append(Architecture(frozenset(str(d).lower() for d in a.get("devices") or ()), np.log2(seq), shares))
    return tuple(out)


def kernel_share(kernel: str, device: str, seq_per_rank: float | np.ndarray) -> np.ndarray | None:
    """The kernel's forward + backward speed as a share of the device's matmul ceiling at this many
    tokens per sequence and rank; None when the catalog has no measurements of the kernel on the
    device's architecture (the planner then keeps its prior)."""
    for arch in architectures():
        if device.lower() in arch.devices and kernel in arch.shares:
            x = np.log2(np.maximum(np.asarray(seq_per_rank, dtype=np.float64), 1.0))
            return np.asarray(np.interp(x, arch.log2_seq, arch.shares[kernel]))
    return None
