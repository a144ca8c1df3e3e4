"""The bottleneck label of a configuration: the largest exposed part of its step, or memory when it
does not fit."""

from __future__ import annotations

import numpy as np

BOTTLENECKS = ("compute", "TP", "FSDP+DP", "EP", "CP", "PP bubble", "optimizer", "offload", "host", "memory")


def bottleneck_codes(compute_s: np.ndarray, parts: tuple[np.ndarray, ...], fits: np.ndarray) -> np.ndarray:
    """Index into BOTTLENECKS per configuration: the largest of ``parts`` (the exposed times in
    BOTTLENECKS order from TP), compute where none reaches a quarter of the compute, memory where
    the configuration does not fit. A running max: argmax over a stacked (parts, configs) array
    costs a third of a whole evaluation."""
    top = parts[0]
    bott = np.ones(compute_s.shape, dtype=np.int8)
    for code, part in enumerate(parts[1:], start=2):
        more = part > top
        bott[more] = code
        top = np.maximum(top, part)
    bott[top < 0.25 * compute_s] = 0
    bott[~fits] = len(BOTTLENECKS) - 1
    return bott
