"""The job a plan is for: model + hardware + cluster + batch + framework configuration +
calibration, each a frozen part, checked when built and never changed after. :func:`make_job`
resolves what depends on the parts (the framework reserve by the device's runtime, the gradient
dtype by the precision) before the Job is built."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..catalog.hardware import HBM_VISIBLE, Hardware, same_device
from ..catalog.model_flops import ModelShape
from ..errors import ConfigError
from .config import FrameworkConfig
from .network import NetworkProfile
from .vocab import LOSS_BYTES, MEMORY_MARGIN, RESERVE_GB, divisors

Array = float | np.ndarray


def _whole(name: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
        raise ConfigError(
            f"{name.replace('_', ' ')} must be a whole number >= 1, not {v!r}",
            fix=f"pass a positive --{name.replace('_', '-')}",
        )


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """The devices: how many, how many share a node's intra-node link, and a measured network
    profile (network.py: collective bandwidth by the nodes a group spans) or None for the
    catalog's nominal links."""

    devices: int
    devices_per_node: int
    network: NetworkProfile | None = None

    def __post_init__(self) -> None:
        _whole("devices", self.devices)
        _whole("devices_per_node", self.devices_per_node)
        if self.devices > self.devices_per_node and self.devices % self.devices_per_node:
            # the link tiers (intra-node, inter-node) and TP-within-a-node assume whole nodes
            fits = max(d for d in divisors(self.devices) if d <= self.devices_per_node)
            raise ConfigError(
                f"{self.devices} devices do not fill whole nodes of {self.devices_per_node}",
                fix=f"pass the devices per node the job really has as --devices-per-node (e.g. {fits}; TPUs: its slice size)",
            )


@dataclass(frozen=True, kw_only=True)
class Batch:
    global_batch: int  # sequences per step
    seq_len: int  # tokens per sequence

    def __post_init__(self) -> None:
        _whole("global_batch", self.global_batch)
        _whole("seq_len", self.seq_len)


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """What a calibration or a trace measured, replacing the priors. Efficiencies are achieved /
    bf16 peak (None: the priors from the device's matmul_eff); the scales multiply the
    efficiencies (gemm, attention) and divide the links' bandwidth (comm; inter: inter-node links
    only, on top); ``layer_overhead_s`` (seconds the device waits on the host per layer and
    micro-batch) and ``measured_dp_overlap`` (share of DP/FSDP traffic a trace hid), when given,
    replace the framework's ``host_wait_us`` and ``dp_overlap``. Any of them may be an array with one value per
    configuration (a calibration's grid, evaluated in one pass)."""

    gemm_eff: Array | None = None
    attn_eff: Array | None = None
    gemm_scale: Array = 1.0
    attn_scale: Array = 1.0
    comm_scale: Array = 1.0
    inter_scale: Array = 1.0
    # op classes the priors know least (calibrate_ops.py): the linear-attention kernels' and the
    # routed experts' grouped GEMMs' efficiency (x), the MoE token exchange's time (x)
    linear_attn_scale: Array = 1.0
    expert_scale: Array = 1.0
    ep_scale: Array = 1.0
    layer_overhead_s: Array | None = None
    measured_dp_overlap: Array | None = None

    def block(self, n: int, start: int, stop: int) -> Calibration:
        """The calibration of configurations start..stop of n (per-configuration arrays sliced)."""
        part = {
            f.name: v[start:stop]
            for f in dataclasses.fields(self)
            if isinstance(v := getattr(self, f.name), np.ndarray) and v.shape == (n,)
        }
        return dataclasses.replace(self, **part) if part else self


@dataclass(frozen=True, kw_only=True)
class Job:
    model: ModelShape
    hw: Hardware
    cluster: Cluster
    batch: Batch
    framework: FrameworkConfig = field(default_factory=FrameworkConfig)
    calibration: Calibration = field(default_factory=Calibration)

    def __post_init__(self) -> None:
        fw, net = self.framework, self.cluster.network
        if fw.memory.reserve_gb is None or fw.precision.grads is None:
            raise ConfigError(
                "the job's framework reserve and gradient dtype are not resolved",
                fix="build the job with planner.job.make_job",
            )
        if fw.precision.compute == "fp8" and not self.hw.peak_tflops.get("fp8"):
            raise ConfigError(
                f"{self.hw.name} has no fp8 peak in the hardware catalog (its matrix units do not run fp8)",
                fix="use --precision bf16, or add the device's fp8 peak to data/hardware.yaml",
            )
        if net is not None and net.device and not same_device(net.device, self.hw.name):
            raise ConfigError(
                f"network {net.name} was measured on {net.device} nodes, not {self.hw.name}",
                fix=f"pass --hardware {net.device}, or leave --network out",
            )
        if net is not None and net.devices_per_node != self.cluster.devices_per_node:
            raise ConfigError(
                f"network {net.name} was measured with {net.devices_per_node} devices per node, "
                f"not {self.cluster.devices_per_node}",
                fix=f"pass --devices-per-node {net.devices_per_node}, or leave --network out",
            )

    @property
    def devices(self) -> int:
        return self.cluster.devices

    @property
    def devices_per_node(self) -> int:
        return self.cluster.devices_per_node

    @property
    def network(self) -> NetworkProfile | None:
        return self.cluster.network

    @property
    def global_batch(self) -> int:
        return self.batch.global_batch

    @property
    def seq_len(self) -> int:
        return self.batch.seq_len

    @property
    def precision(self) -> str:
        return self.framework.precision.compute

    @property
    def grad_bytes(self) -> int:
        """Bytes per gradient kept and reduced: 4 in fp32, 2 in bf16 or fp16."""
        return 4 if self.framework.precision.grads == "fp32" else 2

    @property
    def reserve_gb(self) -> float:
        return float(self.framework.memory.reserve_gb or 0.0)

    @property
    def capacity_bytes(self) -> float:
        """Memory per device the strategies must fit in, bytes (Hardware.capacity_bytes; a device
        without a memory size is taken as an 80 GiB part)."""
        return self.hw.capacity_bytes or 80 * 2**30 * HBM_VISIBLE

    @property
    def memory_margin(self) -> float:
        """Share of the device a search keeps free beyond the reserve (the memory_margin setting)."""
        return float(self.framework.memory.memory_margin or 0.0)

    @property
    def reserve_bytes(self) -> float:
        return self.reserve_gb * 1e9

    @property
    def loss_run(self) -> str:
        """The loss's kernels as the job runs them: the configured loss, except that a compiled loss
        in an eager job (fused_elementwise false: no torch.compile) runs unfused."""
        kind, fused = self.framework.loss.kind, self.framework.kernels.fused_elementwise
        return "unfused" if kind == "compiled" and not fused else kind

    @property
    def loss_bytes(self) -> tuple[float, float]:
        """(bytes per logit held at the loss's peak, bytes per logit moved): LOSS_BYTES of loss_run."""
        return LOSS_BYTES[self.loss_run]

    @property
    def swiglu_eager(self) -> bool:
        """The gated MLP's activation runs as separate eager ops (eager_swiglu, or every
        elementwise op eager)."""
        return self.framework.kernels.eager_swiglu or not self.framework.kernels.fused_elementwise

    @property
    def layer_overhead_s(self) -> Array:
        """Seconds per layer and micro-batch the device waits on the host: the calibration's, else
        the framework's host_wait_us."""
        measured = self.calibration.layer_overhead_s
        return self.framework.host.wait_s if measured is None else measured

    @property
    def dp_overlap(self) -> Array:
        """Share of the DP/FSDP traffic hidden: a trace's measured share, else the framework's."""
        measured = self.calibration.measured_dp_overlap
        return self.framework.zero.dp_overlap if measured is None else measured

    def with_settings(self, **keys: Any) -> Job:
        """The job with framework settings replaced, by key (values in the keys' units)."""
        return dataclasses.replace(self, framework=self.framework.with_keys(keys))

    def calibrated(self, **values: Any) -> Job:
        """The job with calibration fields replaced (scalars or per-configuration arrays)."""
        return dataclasses.replace(self, calibration=dataclasses.replace(self.calibration, **values))

    def replaced(self, **changes: Any) -> Job:
        """The job with any of its parts' fields replaced by name: framework settings by key,
        calibration fields, devices / devices_per_node / network, global_batch / seq_len, model, hw."""
        parts: dict[str, Any] = {"cluster": self.cluster, "batch": self.batch, "calibration": self.calibration}
        by_part: dict[str, dict[str, Any]] = {}
        keys: dict[str, Any] = {}
        for name, v in changes.items():
            part = next((p for p, obj in parts.items() if name in {f.name for f in dataclasses.fields(obj)}), None)
            if name in ("model", "hw"):
                by_part.setdefault("", {})[name] = v
            elif part is None:
                keys[name] = v
            else:
                by_part.setdefault(part, {})[name] = v
        new = {p: dataclasses.replace(parts[p], **kw) for p, kw in by_part.items() if p}
        job = dataclasses.replace(self, **by_part.get("", {}), **new)
        return job.with_settings(**keys) if keys else job


def make_job(
    model: ModelShape,
    hw: Hardware,
    devices: int,
    devices_per_node: int,
    global_batch: int,
    seq_len: int,
    *,
    framework: FrameworkConfig | None = None,
    network: NetworkProfile | None = None,
    **values: Any,
) -> Job:
    """A job with its defaults resolved: the framework reserve (None: RESERVE_GB under CUDA/ROCm,
    0 where the runtime assigns memory statically, Hardware.static_memory), the search's memory
    margin (None: MEMORY_MARGIN, 0 there too) and the gradient dtype
    (None: fp16 with fp16 precision, else fp32). ``values``: framework settings by key (in the keys'
    units) and calibration fields by name, on top of ``framework``."""
    calib_names = {f.name for f in dataclasses.fields(Calibration)}
    calib = Calibration(**{k: v for k, v in values.items() if k in calib_names})
    fw = (framework or FrameworkConfig()).with_keys({k: v for k, v in values.items() if k not in calib_names})
    resolved: dict[str, Any] = {}
    if fw.memory.reserve_gb is None:
        resolved["reserve_gb"] = 0.0 if hw.static_memory else RESERVE_GB
    if fw.memory.memory_margin is None:
        resolved["memory_margin"] = 0.0 if hw.static_memory else MEMORY_MARGIN
    if fw.precision.grads is None:
        resolved["grad_dtype"] = "fp16" if fw.precision.compute == "fp16" else "fp32"
    return Job(
        model=model,
        hw=hw,
        cluster=Cluster(devices=devices, devices_per_node=devices_per_node, network=network),
        batch=Batch(global_batch=global_batch, seq_len=seq_len),
        framework=fw.with_keys(resolved) if resolved else fw,
        calibration=calib,
    )
