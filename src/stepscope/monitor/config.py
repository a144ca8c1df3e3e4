"""The monitor's settings, declared once: what the job measures (``MonitorConfig``) and how the
detectors decide (``DetectConfig``, shared by the in-job detector and ``stepscope monitor report``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..errors import ConfigError

Level = Literal[0, 1, 2]


def _check(cond: bool, what: str, fix: str) -> None:
    if not cond:
        raise ConfigError(what, fix=fix)


@dataclass(frozen=True, kw_only=True)
class DetectConfig:
    """How anomalies are decided.

    - Fluctuation: a step is *slow* when its time exceeds the median of the previous ``window``
      usable steps of its rank by ``fluctuation_ratio`` and by ``noise_mads`` times the window's
      noise (its interquartile range / 1.349: a standard deviation for normal noise), so a noisy
      machine is not a stream of anomalies; an episode opens when ``persist_k`` of
      ``persist_m`` consecutive steps are slow and closes after ``persist_m`` steps that are not.
    - Regression: a change point where the median of the ``regression_window`` steps after it
      exceeds the median of the ``regression_window`` before it by ``regression_ratio`` (effect
      size) and a Mann-Whitney rank test gives probability ``regression_probability`` that the
      later steps are slower (Greyhound's two conditions: a probability and an effect size).
    - Straggler: a rank's own time (step minus collective wait) exceeds the median of its peers'
      on the same step by ``straggler_ratio`` and by ``noise_mads`` times the noise of all ranks'
      ratios, for ``persist_k`` of ``persist_m`` steps.
    - Warm-up: leading steps over ``warmup_ratio`` x the median of the rest are kept out.
    """

    fluctuation_ratio: float = 0.10
    noise_mads: float = 3.0
    window: int = 20
    min_history: int = 5
    persist_k: int = 3
    persist_m: int = 5
    straggler_ratio: float = 0.10
    regression_ratio: float = 0.10
    regression_probability: float = 0.999
    regression_window: int = 20
    warmup_ratio: float = 3.0
    worst_ranks: int = 3

    def __post_init__(self) -> None:
        for name in ("fluctuation_ratio", "straggler_ratio", "regression_ratio"):
            _check(0 < getattr(self, name) < 10, f"{name} must be a ratio above 0", f"e.g. {name}=0.1 for 10%")
        _check(self.noise_mads >= 0, "noise_mads must be >= 0", "e.g. 3.0; 0 turns the noise condition off")
        _check(0.5 <= self.regression_probability < 1, "regression_probability must be in [0.5, 1)", "e.g. 0.999")
        _check(1 <= self.persist_k <= self.persist_m, "persist_k must be in 1..persist_m", "e.g. 3 of 5")
        _check(self.window >= 3 and self.min_history >= 2, "window >= 3 and min_history >= 2", "e.g. 20 and 5")
        _check(self.regression_window >= 5, "regression_window must be >= 5", "e.g. 20")
        _check(self.warmup_ratio > 1, "warmup_ratio must exceed 1", "e.g. 3.0")


@dataclass(frozen=True, kw_only=True)
class CaptureConfig:
    """Coarse-to-fine: on an anomaly, ``torch.profiler`` records ``steps`` steps on the implicated
    ranks and one healthy peer. Every rank starts at the same step, the first multiple of
    ``round_to`` at least ``lead_steps`` after the last step seen (no collective needed: each rank
    reads the plan from the run directory). At most ``max_captures`` per run, ``cooldown_s`` apart;
    a trace over ``max_trace_bytes`` is deleted and the capture marked failed. ``backend``: the
    profiler, ``torch.profiler`` or ``jax.profiler`` (``auto``: torch when the job imported it)."""

    enabled: bool = True
    backend: Literal["auto", "torch", "jax"] = "auto"
    steps: int = 3
    round_to: int = 10
    lead_steps: int = 5
    max_captures: int = 3
    cooldown_s: float = 300.0
    max_trace_bytes: int = 512 << 20
    analyze: bool = True

    def __post_init__(self) -> None:
        _check(1 <= self.steps <= 50, "capture steps must be in 1..50", "e.g. 3")
        _check(self.round_to >= 1 and self.lead_steps >= 1, "round_to and lead_steps must be >= 1", "e.g. 10 and 5")
        _check(self.max_captures >= 0 and self.cooldown_s >= 0, "max_captures and cooldown_s must be >= 0", "e.g. 3")


@dataclass(frozen=True, kw_only=True)
class MonitorConfig:
    """What the job measures and where it goes.

    ``level`` 0: step time, GC pauses, peak memory, tokens; 1: plus phases (data, forward, backward,
    optimizer) from the wrapped loader and hooks on the model and optimizer; 2: plus every
    collective call. ``sink="auto"``: SQLite when every rank runs on this node (``LOCAL_WORLD_SIZE``
    equals the world size, or is unset), else JSON lines: SQLite's WAL mode needs its readers on the
    writer's host, and the leader reads every rank's file. ``queue_size`` bounds the records waiting for the writer thread (beyond it
    records are dropped and counted). ``warmup_steps`` first steps are tagged ``warmup``.
    ``detect`` runs the live detector in a process beside rank ``leader_rank``, every
    ``detect_interval_s``; at the end ``close()`` waits ``detector_wait_s`` for its last pass and
    the analyses of captures (0: it finishes on its own).
    MFU (in the report) needs ``flops_per_token`` and the device's peak: ``peak_flops`` (FLOP/s),
    else the ``mfu_dtype`` peak of ``hardware`` (a catalog name: ``h100``, ``mi300x``...), else of
    the CUDA device the job runs on, found in the catalog by its name.
    """

    level: Level = 0
    sink: Literal["auto", "sqlite", "jsonl"] = "auto"
    flush_interval_s: float = 1.0
    queue_size: int = 10_000
    warmup_steps: int = 3
    detect: bool = True
    detect_interval_s: float = 5.0
    detector_wait_s: float = 0.0
    leader_rank: int = 0
    history_steps: int = 400
    tokens_per_step: int | None = None
    flops_per_token: float | None = None
    peak_flops: float | None = None
    hardware: str | None = None
    mfu_dtype: str = "bf16"
    prometheus_port: int | None = None
    prometheus_host: str = "127.0.0.1"
    job: str = ""
    thresholds: DetectConfig = field(default_factory=DetectConfig)
    capture: CaptureConfig = field(default_factory=CaptureConfig)

    def __post_init__(self) -> None:
        _check(self.level in (0, 1, 2), f"level must be 0, 1 or 2, not {self.level!r}", "Monitor(run_dir, level=1)")
        _check(
            self.sink in ("auto", "sqlite", "jsonl"),
            f"sink must be auto, sqlite or jsonl, not {self.sink!r}",
            "sink='auto'",
        )
        _check(self.flush_interval_s > 0 and self.detect_interval_s > 0, "intervals must be > 0", "e.g. 1.0 s")
        _check(self.queue_size >= 16, "queue_size must be >= 16", "e.g. 10000")
        _check(self.warmup_steps >= 0 and self.history_steps >= 20, "warmup_steps >= 0, history_steps >= 20", "")
