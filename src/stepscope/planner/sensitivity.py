"""How far the predicted step moves when one term is 10% worse (``plan --evaluate``): which
efficiency a prediction leans on, and so what a calibration or a measurement should pin down first.

Each term is one of the calibration factors (calibrate.py) pushed 10% the wrong way: GEMM and
attention efficiency divided by 1.1, all communication times and the inter-node tier's times
multiplied by 1.1. All variants are evaluated in one vectorized call.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .cost import Job, evaluate

WORSE = 1.1
TERMS = ("gemm", "attention", "communication", "inter_node")


def sensitivity(job: Job, s: dict[str, np.ndarray]) -> dict[str, float]:
    """Relative step-time increase per term (0.05 = 5% slower) for the single strategy ``s``."""
    n = 1 + len(TERMS)
    tiled = {k: np.repeat(v[:1], n) for k, v in s.items()}
    factors = np.ones((len(TERMS), n))
    for i in range(len(TERMS)):
        factors[i, i + 1] = 1 / WORSE if i < 2 else WORSE  # efficiencies down, times up
    worse = replace(job, gemm_scale=job.gemm_scale * factors[0], attn_scale=job.attn_scale * factors[1],
                    comm_scale=job.comm_scale * factors[2], inter_scale=job.inter_scale * factors[3])
    step = evaluate(worse, tiled)["step_s"]
    return {t: float(step[i + 1] / step[0] - 1) for i, t in enumerate(TERMS)}
