"""What the advisor says: a finding is a bottleneck with its evidence, cause, the change that fixes
it and the saving estimated from the trace. Frozen records; the JSON report is their primary form.

Saving methods, best evidence first:
- ``measured``: the time the trace shows the cause holding on the step (device idle while waiting for
  input, exposed communication...): the step is a partition of the device timeline, so that time is on
  the step's critical path;
- ``critical_path``: a rank's excess over the median rank on the cluster's critical path (stragglers);
- ``roofline``: an op's time above its roofline time;
- ``heuristic``: a fraction of a measured share where the trace cannot say how much a fix recovers;
- ``none``: no estimate.
``high`` is the ceiling (all of the basis recovered); ``low`` and ``mid`` are the parts a fix usually
recovers (fractions stated per rule in ``data/advisor_rules.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Category = Literal["parallel", "io", "cpu", "compute", "communication", "memory"]
SavingMethod = Literal["measured", "critical_path", "roofline", "heuristic", "none"]
Confidence = Literal["high", "medium", "low"]
CATEGORIES: tuple[Category, ...] = ("parallel", "io", "cpu", "compute", "communication", "memory")
SAVING_METHODS: tuple[SavingMethod, ...] = ("measured", "critical_path", "roofline", "heuristic", "none")


@dataclass(frozen=True, kw_only=True)
class Action:
    """One concrete change in one stack (``pytorch``, ``fsdp``, ``megatron``, ``deepspeed``, ``jax``)."""

    stack: str
    change: str
    reference: str = ""


@dataclass(frozen=True, kw_only=True)
class Saving:
    """Estimated saving per step, ns: ``low <= mid <= high``."""

    low_ns: int
    mid_ns: int
    high_ns: int

    def __post_init__(self) -> None:
        if not 0 <= self.low_ns <= self.mid_ns <= self.high_ns:
            raise ValueError(f"saving bounds out of order: {self.low_ns}, {self.mid_ns}, {self.high_ns}")

    @classmethod
    def scaled(cls, basis_ns: float, fractions: tuple[float, float, float]) -> Saving:
        """``fractions`` (low, mid, high) of ``basis_ns`` (a negative basis saves nothing)."""
        b = max(0.0, basis_ns)
        low, mid, high = fractions
        return cls(low_ns=int(low * b), mid_ns=int(mid * b), high_ns=int(high * b))


NO_SAVING = Saving(low_ns=0, mid_ns=0, high_ns=0)


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One bottleneck. ``evidence``: the figures that triggered it (ns per steady step, ratios 0-1,
    counts), of the median firing rank. ``step_ns``: that rank's mean steady step, the saving's
    denominator. ``group``: findings of one group share time (their savings must not be added)."""

    id: str
    category: Category
    title: str
    ranks: tuple[int, ...]
    evidence: dict[str, float]
    cause: str
    actions: tuple[Action, ...]
    saving: Saving
    saving_method: SavingMethod
    confidence: Confidence
    step_ns: float
    group: str
    references: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"unknown category {self.category!r}")
        if self.saving_method not in SAVING_METHODS:
            raise ValueError(f"unknown saving method {self.saving_method!r}")

    @property
    def saving_ratio(self) -> float:
        """The mid saving as a share of the step."""
        return self.saving.mid_ns / self.step_ns if self.step_ns > 0 else 0.0
