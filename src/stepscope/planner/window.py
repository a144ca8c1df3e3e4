"""The compute time that transfers hide under, shared by all of them (cost.py takes it in turn:
TP under its GEMMs, the MoE all-to-all, CP's ring exchange, the pipeline's steady-state hops,
DP/FSDP, activation offload). Two ways to hide:

- ``hide(raw, share, under)``: ``share x min(raw, under)``, a share of the transfer's own window
  (DP/FSDP under the last backward or one micro-batch; the MoE all-to-all, share 0 or 1);
- ``overlap(raw, share)``: ``min(share x raw, left)``, a share of the transfer anywhere in the
  window (CP, pipeline hops, offload), so a window-bound transfer uses all that is left.

Both never hide more than what the earlier transfers left of the window."""

from __future__ import annotations

import numpy as np


class Window:
    """The compute time transfers can still hide under, shared by all of them: the transfers run one
    after another on the communication stream, so what one hides under a stretch of compute another
    cannot hide there too. Without it, each transfer hid under the whole window, and faster compute
    could make the step slower (every window-bound transfer exposed the time compute saved)."""

    def __init__(self, busy_s: np.ndarray) -> None:
        self.left_s = busy_s.astype(np.float64, copy=True)
        self.hidden_s: dict[str, np.ndarray] = {}  # by part (HIDDEN_PARTS): seconds hidden

    def take(self, hidden_s: np.ndarray, part: str) -> np.ndarray:
        """Hide up to ``hidden_s`` of ``part`` under what is left of the window; returns what was hidden."""
        hidden_s = np.minimum(np.maximum(hidden_s, 0.0), self.left_s)
        self.left_s = self.left_s - hidden_s
        self.hidden_s[part] = self.hidden_s.get(part, 0.0) + hidden_s
        return hidden_s

    def hide(self, raw: np.ndarray, share: float | np.ndarray, under: np.ndarray, part: str) -> np.ndarray:
        """What stays exposed of ``raw`` when ``share`` of it can run under ``under`` (never more
        than ``under`` itself, nor than what is left of the shared window)."""
        return np.maximum(raw - self.take(share * np.minimum(raw, under), part), 0.0)

    def overlap(self, raw: np.ndarray, share: float, part: str) -> np.ndarray:
        """What stays exposed of ``raw`` when ``share`` of it can overlap anywhere in the shared
        window (CP's ring exchange, the pipeline's steady-state hops, offload): ``raw - min(share x
        raw, left)``. Unlike ``hide``'s ``share x min(raw, under)``, a window-bound transfer uses
        all that is left, so less compute never costs more than itself."""
        return np.maximum(raw - self.take(share * raw, part), 0.0)


HIDDEN_PARTS = (
    "tp",
    "ep",
    "cp",
    "pp_p2p",
    "dp",
    "offload",
)  # transfers that hide under compute, in the order they take it
