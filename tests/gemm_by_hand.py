"""The planner's GEMM shape efficiency and kernel floor written out from their definitions
(planner/rates.py gemm_rate and linear_shape; hardware.yaml gemm_kernel_us), for tests that
compute step times by hand."""

from __future__ import annotations

H100_KERNEL_S = 5.3e-6  # hardware.yaml: H100's gemm_kernel_us


def gemm_rate(outputs: float, depth: float) -> float:
    """ref / ((1 + (642^2 / outputs)^1.5) (1 + 202 / depth)), ref its value at 4096^3, at most 1."""
    ref = (1 + (642.0**2 / 4096**2) ** 1.5) * (1 + 202.0 / 4096)
    return min(ref / ((1 + (642.0**2 / outputs) ** 1.5) * (1 + 202.0 / depth)), 1.0)


def linear_shape(tokens: float, d_in: float, d_out: float, groups: float = 1.0) -> float:
    """Forward, input and weight gradients at their harmonic mean (equal FLOPs each)."""
    return 3 / (
        1 / gemm_rate(groups * tokens * d_out, d_in)
        + 1 / gemm_rate(groups * tokens * d_in, d_out)
        + 1 / gemm_rate(groups * d_in * d_out, tokens)
    )
