"""Facts about where the monitor runs: the rank and world size, and the device's peak FLOP/s for
MFU. Neither initializes a framework."""

from __future__ import annotations

import os
import sys


def detect_rank() -> tuple[int, int]:
    """(rank, world size): from an initialized ``torch.distributed``, else ``RANK`` /
    ``WORLD_SIZE`` (torchrun, many launchers), else ``SLURM_PROCID`` / ``SLURM_NTASKS``, else a
    started ``jax.distributed``, else (0, 1). Never initializes a framework."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_rank()), int(dist.get_world_size())
    for r, w in (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
        if os.environ.get(r, "").isdigit():
            return int(os.environ[r]), int(os.environ.get(w, "0") or 0) or int(os.environ[r]) + 1
    jax = sys.modules.get("jax")
    if jax is not None:
        try:
            return int(jax.process_index()), int(jax.process_count())
        except Exception:
            pass
    return 0, 1


def catalog_peak(name: str, dtype: str, *, by: str) -> tuple[float | None, str | None]:
    """(FLOP/s, source) of ``dtype`` on a catalog device, by catalog name or by a device's name."""
    from ..catalog import hardware

    hw = hardware.by_name(name) if by == "name" else hardware.detect(name)
    if hw is None:
        return None, None
    tflops = hw.peak_tflops.get(dtype)
    return (tflops * 1e12, f"catalog: {hw.name} {dtype}") if tflops else (None, None)
