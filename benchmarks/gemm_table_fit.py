"""Refit the planner's GEMM-rate curve (planner/rates.py gemm_rate) to XLA's measured H100 table.

    python benchmarks/gemm_table_fit.py [--table benchmarks/gemm/xla_sm100_bf16_b1.txt]

Data: ``benchmarks/gemm/xla_sm90_bf16_b1.txt`` (the bf16 rates of the 125 b = 1 entries of
openxla's ``matmul_interpolator_data.h``, sm_90; ``xla_sm100_bf16_b1.txt``: the same for B200). Model of a GEMM's kernel time:
``t = t0 + 2 m n k / s x (1 + (A / (m n))^1.5) x (1 + c / k)``, fitted on the 64 entries with m, n,
k >= 512 (below that the fixed t0 is most of the time). For each (A, c) on a grid, t0 and 1 / s
are the least-squares solution of the relative errors (linear in them); then the grid point with
the least rms log error wins, refined once on a finer grid. Prints the fit, its errors, and the
errors of the constants the planner uses (``GEMM_OUT0``, ``GEMM_K0`` with the H100's
``gemm_kernel_us``). numpy only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from stepscope.planner.rates import GEMM_K0, GEMM_OUT0

DATA = Path(__file__).resolve().parent / "gemm" / "xla_sm90_bf16_b1.txt"


def _solve(
    m: np.ndarray, n: np.ndarray, k: np.ndarray, t: np.ndarray, a: float, c: float
) -> tuple[float, float, float]:
    """(t0, s, rms log error) for shape constants a, c: t0 and 1/s by least squares on t_pred / t - 1."""
    shape = 2 * m * n * k * (1 + (a / (m * n)) ** 1.5) * (1 + c / k)
    x = np.stack([1 / t, shape / t], axis=1)  # t_pred / t = t0 / t + (1/s) shape / t
    (t0, inv_s), *_ = np.linalg.lstsq(x, np.ones_like(t), rcond=None)
    pred = t0 + inv_s * shape
    return float(t0), float(1 / inv_s), float(np.sqrt(np.mean(np.log(pred / t) ** 2)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--table", type=Path, default=DATA, help="m n k TFLOP/s per line (# comments)")
    m, n, k, tflops = np.loadtxt(ap.parse_args().table).T
    t = 2 * m * n * k / (tflops * 1e12)
    fit = (m >= 512) & (n >= 512) & (k >= 512)
    mf, nf, kf, tf = m[fit], n[fit], k[fit], t[fit]
    best = min(
        ((a, c, *_solve(mf, nf, kf, tf, a, c)) for a in np.geomspace(1e4, 1e7, 61) for c in np.geomspace(10, 2000, 61)),
        key=lambda r: r[4],
    )
    a0, c0 = best[0], best[1]
    best = min(
        (
            (a, c, *_solve(mf, nf, kf, tf, a, c))
            for a in np.geomspace(a0 / 1.2, a0 * 1.2, 41)
            for c in np.geomspace(c0 / 1.2, c0 * 1.2, 41)
        ),
        key=lambda r: r[4],
    )
    a, c, t0, s, rms = best
    pred = t0 + 2 * m * n * k / s * (1 + (a / (m * n)) ** 1.5) * (1 + c / k)
    err = np.log(pred / t)
    print(
        json.dumps(
            {
                "fit": {
                    "sqrt_A": round(float(np.sqrt(a)), 1),
                    "c": round(float(c), 1),
                    "t0_us": round(t0 * 1e6, 2),
                    "s_tflops": round(s / 1e12, 1),
                },
                "fit_rms_log_error": round(rms, 4),
                "fit_max_log_error": round(float(np.abs(err[fit]).max()), 4),
                "rows": int(fit.sum()),
            }
        )
    )
    # the planner's constants with the fit's kernel time, s refitted (the planner takes the
    # device's measured ceiling instead)
    t0_p = t0
    shape = 2 * mf * nf * kf * (1 + (GEMM_OUT0 / (mf * nf)) ** 1.5) * (1 + GEMM_K0 / kf)
    inv_s = float(np.sum(shape * (tf - t0_p) / tf**2) / np.sum(shape**2 / tf**2))
    e = np.log((t0_p + inv_s * shape) / tf)
    print(
        json.dumps(
            {
                "planner": {"sqrt_A": round(float(np.sqrt(GEMM_OUT0)), 1), "c": GEMM_K0, "t0_us": round(t0 * 1e6, 2)},
                "rms_log_error": round(float(np.sqrt(np.mean(e**2))), 4),
                "max_log_error": round(float(np.abs(e).max()), 4),
            }
        )
    )


if __name__ == "__main__":
    main()
