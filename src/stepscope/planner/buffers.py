"""Communication buffers per device: what the collectives hold beyond the sharded states.

- ``COMM_BUFFER_BYTES`` for the communicators' own buffers (NCCL channels, bucket copies): a prior.
- ZeRO-3 / FSDP gathers a layer's weights whole before the layer runs and frees them after it.
  The next layer's all-gather is issued while the current layer computes (FSDP2's implicit
  prefetch; FSDP1's ``limit_all_gathers`` allows at most two in flight), so two layers' bf16
  weights are whole at the peak: 2 x 2 B per parameter of a layer on this device. In backward the
  layer's gradients come out whole in bf16 (2 B), and with fp32 reduction (FSDP2's
  ``reduce_dtype``, torchtitan's default) they are copied to fp32 for the reduce-scatter
  (``grad_bytes`` more; with bf16 reduction the bf16 gradients are reduced as they are). The peak
  is in backward: ``(4 + 2 + (grad_bytes if grad_bytes != 2 else 0)) x layer parameters``, 10 B
  with fp32 reduction.
- Weights kept gathered from forward to backward (``keep_params``) are counted whole under
  weights already; only the gradient part remains.
"""

from __future__ import annotations

import numpy as np

COMM_BUFFER_BYTES = 1e9  # prior: NCCL channel buffers and bucket copies
GATHERED_LAYERS = 2  # the running layer and the prefetched next one


def comm_buffer_bytes(zero: np.ndarray, keep: np.ndarray, layer_params_dev: np.ndarray, grad_bytes: float) -> np.ndarray:
    """Bytes per device; ``layer_params_dev``: one layer's parameters on this device (after TP and
    EP, before ZeRO sharding)."""
    grads = 2.0 + (grad_bytes if grad_bytes != 2 else 0.0)
    params = np.where(keep, 0.0, GATHERED_LAYERS * 2.0)
    gathered = np.where(zero >= 3, (params + grads) * layer_params_dev, 0.0)
    return COMM_BUFFER_BYTES + gathered
