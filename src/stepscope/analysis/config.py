"""The options of an analysis, validated once at construction."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError


@dataclass(frozen=True)
class AnalyzeConfig:
    """Options of ``analyze``; validated at construction."""

    step_marker: str | None = None
    rules_file: str | None = None
    top_k: int = 20
    fluctuation_threshold_ratio: float = 0.10
    short_kernel_ns: int = 10_000
    hardware: str | None = None  # catalog name; default: detected from the trace
    hardware_file: str | None = None  # extra/overriding devices (YAML like data/hardware.yaml)
    model_flops_per_step: float | None = None  # model FLOPs per step per rank, for MFU
    mfu_dtype: str = "bf16"
    hlo_files: tuple[str, ...] = ()  # HLO text joined to XLA ops by name (name stacks, FLOPs, bytes)
    straggler_threshold: float = 3.0  # robust z-score over which a rank is called a straggler
    split_devices: bool = True  # a JAX/XLA host file with several devices gives one rank per device
    gpus_per_node: int | None = None  # ranks per node in the cluster view; None: the device's, else 8
    skip_steps: int | None = None  # the first N steps are warm-up; None: detected (steps/warmup.py)
    advisor_rules: tuple[str, ...] = ()  # extra advisor rule files (layout of data/advisor_rules.yaml)

    def __post_init__(self) -> None:
        if self.model_flops_per_step is not None and not 0 < self.model_flops_per_step < float("inf"):
            raise ConfigError(
                f"model FLOPs per step must be a finite number > 0, not {self.model_flops_per_step}",
                fix="e.g. --model-flops 3.2e15",
            )
        if self.top_k < 1:
            raise ConfigError("top_k must be >= 1", fix="pass --top 1 or more")
        if not 0 < self.fluctuation_threshold_ratio < 10:
            raise ConfigError("fluctuation threshold must be in (0, 10)", fix="e.g. 0.1 for 10%")
        if self.short_kernel_ns < 0:
            raise ConfigError("short kernel threshold must be >= 0")
        if not self.straggler_threshold > 0:
            raise ConfigError("straggler threshold must be > 0", fix="e.g. --straggler-z 3")
        if self.skip_steps is not None and self.skip_steps < 0:
            raise ConfigError("skip steps must be >= 0", fix="e.g. --skip-steps 2")
        if self.gpus_per_node is not None and self.gpus_per_node < 1:
            raise ConfigError("gpus per node must be >= 1", fix="e.g. --gpus-per-node 8")
