"""How far the predicted step moves when one term is 10% worse (``plan --evaluate``): which
efficiency a prediction leans on, and so what a calibration or a measurement should pin down first.

Each term is one of the calibration factors (calibrate.py) pushed 10% the wrong way: GEMM and
attention efficiency divided by 1.1, all communication times and the inter-node tier's times
multiplied by 1.1. All variants are evaluated in one vectorized call.
"""

from __future__ import annotations

import numpy as np

from .cost import evaluate
from .job import Job

WORSE = 1.1
# each term's calibration factor and which way is worse: efficiencies down, transfer times up
TERMS = {
    "gemm": ("gemm_scale", 1 / WORSE),
    "attention": ("attn_scale", 1 / WORSE),
    "communication": ("comm_scale", WORSE),
    "inter_node": ("inter_scale", WORSE),
}


def sensitivity(job: Job, s: dict[str, np.ndarray]) -> dict[str, float]:
    """Relative step-time increase per term (0.05 = 5% slower) for the single strategy ``s``."""
    n = 1 + len(TERMS)
    tiled = {k: np.repeat(v[:1], n) for k, v in s.items()}
    scaled = {}
    for i, (field, worse) in enumerate(TERMS.values()):  # configuration 0 as given, i + 1 with term i worse
        factor = np.ones(n)
        factor[i + 1] = worse
        scaled[field] = getattr(job.calibration, field) * factor
    step = evaluate(job.calibrated(**scaled), tiled, keys=("step_s",))["step_s"]
    return {t: float(step[i + 1] / step[0] - 1) for i, t in enumerate(TERMS)}
