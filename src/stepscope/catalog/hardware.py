"""Accelerator catalog (``data/hardware.yaml``, extendable with a user YAML) and detection from
the trace's device name."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, refuse_unknown_keys
from ..yamlio import safe_load

#: dtype name from the profiler's "Input type" strings -> (catalog dtype, bytes per element)
DTYPES: dict[str, tuple[str, int]] = {
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::half": ("fp16", 2),
    "half": ("fp16", 2),
    "c10::bfloat16": ("bf16", 2),
    "bfloat16": ("bf16", 2),
    "c10::float8_e4m3fn": ("fp8", 1),
    "c10::float8_e5m2": ("fp8", 1),
    "c10::float8_e4m3fnuz": ("fp8", 1),
    "c10::float8_e5m2fnuz": ("fp8", 1),
    "long int": ("int64", 8),
    "int": ("int32", 4),
    "signed char": ("int8", 1),
    "unsigned char": ("int8", 1),
    "bool": ("bool", 1),
    # CANN's names (Ascend kernel_details.csv "Input Data Types"; FLOAT is fp32 there too)
    "float16": ("fp16", 2),
    "float32": ("fp32", 4),
    "bf16": ("bf16", 2),
    "dt_bf16": ("bf16", 2),
    "int64": ("int64", 8),
    "int32": ("int32", 4),
    "int16": ("int16", 2),
    "int8": ("int8", 1),
    "uint8": ("int8", 1),
    "float8_e4m3fn": ("fp8", 1),
    "float8_e5m2": ("fp8", 1),
    "hifloat8": ("fp8", 1),
}


@dataclass(frozen=True)
class Hardware:
    name: str
    peak_tflops: dict[str, float | None]
    hbm_gb: float | None  # the vendor's memory size: binary units (see capacity_bytes)
    hbm_gbps: float
    intra_node_gbps: float | None = None
    # measured bus bandwidth of collectives inside one node, by kind (all_reduce, all_gather,
    # reduce_scatter); empty = unmeasured (the planner then uses intra_node_gbps)
    intra_node_busbw_gbps: dict[str, float] = field(default_factory=dict)
    inter_node_gbps: float | None = None
    host_gbps: float | None = None  # device <-> host memory, one direction (activation offload)
    # devices that share the intra-node link (TPU: the largest ICI slice; DCN beyond); None = 8
    node_devices: int | None = None
    # measured "maximum achievable matmul FLOPS" / peak by dtype (best GEMM shape); empty = unmeasured
    matmul_eff: dict[str, float] = field(default_factory=dict)
    # True: the matrix and vector units are issued from the same instruction bundles (TPU VLIW), so
    # elementwise work fused around the matmuls runs while they do (the planner then takes no
    # share of compute time outside GEMMs, planner/rates.efficiencies)
    elementwise_overlaps_matmul: bool = False
    cores: int = 1
    # True: the chip's TensorCores run as one device (TPU v4 and v5p megacore: the runtime, JAX and
    # a profile show one device a chip); False: each core is a device of its own (TPU v7x)
    megacore: bool = False
    # streaming multiprocessors (GPUs): what a communication kernel that takes some of them (DeepEP)
    # leaves the compute it overlaps; None where unknown
    sms: int | None = None
    # the shortest time a GEMM kernel takes, in us (its fixed cost beside the work: filling and
    # draining the device; planner/work.py); None where unmeasured (then not charged)
    gemm_kernel_us: float | None = None
    # True: the runtime assigns every buffer of a compiled program ahead of time (XLA on TPU): no
    # driver context, no caching allocator's slack and no collective library's own buffers come
    # out of the capacity the runtime reports, so the planner's framework reserve defaults to 0 and
    # its communicator-buffer prior to none (planner/buffers.py)
    static_memory: bool = False
    # measured memory the device runtime reports (cudaDeviceProp.totalGlobalMem / HIP's, as Kineto's
    # deviceProperties record it); None = unmeasured, capacity_bytes then derives it from hbm_gb
    hbm_bytes: int | None = None
    source: str = ""
    note: str = ""
    match: str = field(default="", repr=False)

    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s for a compute dtype; falls back bf16 -> fp16 -> fp32."""
        for d in (dtype, "bf16" if dtype == "fp16" else "fp16" if dtype == "bf16" else "", "fp32"):
            v = self.peak_tflops.get(d) if d else None
            if v:
                return float(v) * 1e12
        best = max((v for v in self.peak_tflops.values() if v), default=0.0)
        return float(best) * 1e12

    @property
    def runtime_devices(self) -> int:
        """Devices the runtime shows per chip: 1 under megacore, else one per core."""
        return 1 if self.megacore else self.cores

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_gbps * 1e9

    @property
    def capacity_bytes(self) -> float | None:
        """Device memory a framework can allocate from (its CUDA context and allocator slack still
        come out of it), in bytes: the measured ``hbm_bytes`` where the catalog has it, else
        ``hbm_gb`` GiB x HBM_VISIBLE. Vendors size HBM in binary units though they write "GB": an
        "80 GB" H100 reports 85,018,279,936 B = 79.18 GiB to CUDA (85.0 GB, not 80), a "180 GB"
        B200 191,503,138,816 B = 178.35 GiB (Kineto deviceProperties of the public traces the
        catalog cites)."""
        if self.hbm_bytes:
            return float(self.hbm_bytes)
        return self.hbm_gb * 2**30 * HBM_VISIBLE if self.hbm_gb else None


# share of the vendor's GiB the runtime reports, for devices without a measured hbm_bytes: the
# least of those measured in the public Kineto traces of tests/fixtures/traces (A100 40GB 0.985 and
# 0.990, A100 80GB 0.989, H100 80GB 0.990, B200 0.991, V100 32GB 0.992, MI300X 0.997 as a virtual
# function and 0.9999 bare), rounded down
HBM_VISIBLE = 0.984

_DEVICE_KEYS = sorted(f.name for f in fields(Hardware))


def _parse(doc: Any, where: str) -> list[Hardware]:
    if not isinstance(doc, dict) or not isinstance(doc.get("devices"), list):
        raise ConfigError(
            "hardware file needs a 'devices' list", path=where, fix="see src/stepscope/data/hardware.yaml"
        )
    out = []
    for d in doc["devices"]:
        if isinstance(d, dict):  # a misspelt optional figure (matmul_ef) was ignored without a word
            refuse_unknown_keys(d, _DEVICE_KEYS, path=where, owner=f"device {d.get('name', '?')}: ")
        try:
            out.append(
                Hardware(
                    name=str(d["name"]),
                    peak_tflops={str(k): (None if v is None else float(v)) for k, v in dict(d["peak_tflops"]).items()},
                    hbm_gb=d.get("hbm_gb"),
                    hbm_gbps=float(d["hbm_gbps"]),
                    intra_node_gbps=d.get("intra_node_gbps"),
                    intra_node_busbw_gbps={
                        str(k): float(v) for k, v in dict(d.get("intra_node_busbw_gbps") or {}).items()
                    },
                    inter_node_gbps=d.get("inter_node_gbps"),
                    host_gbps=d.get("host_gbps"),
                    node_devices=int(d["node_devices"]) if d.get("node_devices") else None,
                    matmul_eff={str(k): float(v) for k, v in dict(d.get("matmul_eff") or {}).items()},
                    elementwise_overlaps_matmul=bool(d.get("elementwise_overlaps_matmul", False)),
                    cores=int(d.get("cores", 1)),
                    megacore=bool(d.get("megacore", False)),
                    sms=int(d["sms"]) if d.get("sms") is not None else None,
                    gemm_kernel_us=float(d["gemm_kernel_us"]) if d.get("gemm_kernel_us") is not None else None,
                    static_memory=bool(d.get("static_memory", False)),
                    hbm_bytes=int(d["hbm_bytes"]) if d.get("hbm_bytes") else None,
                    source=str(d.get("source", "")),
                    note=str(d.get("note", "")),
                    match=str(d.get("match", re.escape(str(d["name"])))),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"bad device entry {d!r:.80} ({exc})", path=where, fix="each device needs name, peak_tflops, hbm_gbps"
            ) from None
        _check(out[-1], where)
    return out


def _check(hw: Hardware, where: str) -> None:
    """Figures no device has are refused, naming the field: a NaN or infinite peak passed into
    every MFU and roofline silently, and a zero peak divided by zero."""
    rates: dict[str, Any] = {f"peak_tflops.{k}": v for k, v in hw.peak_tflops.items() if v is not None}
    rates.update({f"intra_node_busbw_gbps.{k}": v for k, v in hw.intra_node_busbw_gbps.items()})
    rates.update(
        {
            "hbm_gbps": hw.hbm_gbps,
            "hbm_gb": hw.hbm_gb,
            "hbm_bytes": hw.hbm_bytes,
            "intra_node_gbps": hw.intra_node_gbps,
            "inter_node_gbps": hw.inter_node_gbps,
            "host_gbps": hw.host_gbps,
            "gemm_kernel_us": hw.gemm_kernel_us,
        }
    )
    for key, v in rates.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf):
            raise ConfigError(
                f"device {hw.name}: {key} is {v!r}, not a finite number > 0",
                path=where,
                fix="fix the figure, or leave an unknown optional one out",
            )
    if not rates.keys() & {
        f"peak_tflops.{k}" for k in hw.peak_tflops
    }:  # every MFU, roofline and step time divides by one
        raise ConfigError(
            f"device {hw.name}: peak_tflops gives no peak",
            path=where,
            fix="give at least the dense bf16 peak, e.g. peak_tflops: {bf16: 989.4}",
        )
    for key, v in hw.matmul_eff.items():
        if not 0 < v <= 1:
            raise ConfigError(
                f"device {hw.name}: matmul_eff.{key} is {v!r}, not a fraction of the peak in (0, 1]",
                path=where,
                fix="the measured matmul rate / the peak, e.g. 0.8",
            )
    if (hw.node_devices is not None and hw.node_devices < 1) or hw.cores < 1 or (hw.sms is not None and hw.sms < 1):
        raise ConfigError(
            f"device {hw.name}: node_devices, cores and sms must be at least 1", path=where, fix="fix the count"
        )
    try:
        re.compile(hw.match)
    except re.error as exc:
        raise ConfigError(
            f"device {hw.name}: match is not a regular expression ({exc})",
            path=where,
            fix="a Python regex for the profiler's device name, e.g. 'H100.*SXM'",
        ) from None


@lru_cache(maxsize=8)
def load_catalog(user_file: str | None = None) -> tuple[Hardware, ...]:
    """User devices first (they win on name and on match), then the bundled catalog."""
    bundled = _parse(
        safe_load(resources.files("stepscope.data").joinpath("hardware.yaml").read_text()), "hardware.yaml"
    )
    user: list[Hardware] = []
    if user_file:
        try:
            user = _parse(safe_load(Path(user_file).read_text()), user_file)
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(
                f"cannot read hardware file ({exc.__class__.__name__})",
                path=user_file,
                fix="pass a YAML like data/hardware.yaml",
            ) from None
    return tuple(_with_per_core(user + bundled))


def _with_per_core(devices: list[Hardware]) -> list[Hardware]:
    """Multi-core chips (TPU v4/v5p/v7x) also as ``<name>-core``: peak and HBM bandwidth / cores,
    for profiles that show one TensorCore per device."""
    out = list(devices)
    for hw in devices:
        if hw.cores > 1:
            out.append(
                Hardware(
                    name=f"{hw.name}-core",
                    peak_tflops={k: (v / hw.cores if v else v) for k, v in hw.peak_tflops.items()},
                    hbm_gb=hw.hbm_gb / hw.cores if hw.hbm_gb else None,
                    hbm_bytes=hw.hbm_bytes // hw.cores if hw.hbm_bytes else None,
                    hbm_gbps=hw.hbm_gbps / hw.cores,
                    intra_node_gbps=hw.intra_node_gbps,
                    intra_node_busbw_gbps=hw.intra_node_busbw_gbps,
                    inter_node_gbps=hw.inter_node_gbps,
                    host_gbps=hw.host_gbps / hw.cores if hw.host_gbps else None,
                    node_devices=hw.node_devices * hw.cores if hw.node_devices else None,
                    matmul_eff=hw.matmul_eff,
                    elementwise_overlaps_matmul=hw.elementwise_overlaps_matmul,
                    static_memory=hw.static_memory,
                    cores=1,
                    source=hw.source + f" (per TensorCore: chip / {hw.cores})",
                    note=hw.note,
                    match=r"(?!)",  # never matched by name: chosen with --hardware
                )
            )
    return out


# common short names (case-insensitive), for `plan --hardware` and `analyze --hardware` alike
ALIASES = {
    "a100": "A100-SXM-80GB",
    "a100-80gb": "A100-SXM-80GB",
    "a100-40gb": "A100-SXM-40GB",
    "h100": "H100-SXM",
    "h100-sxm": "H100-SXM",
    "h100-pcie": "H100-PCIe",
    "h100-96gb": "H100-SXM-96GB-500W",
    "h800": "H800-SXM",
    "h200": "H200",
    "b200": "B200",
    "gb200": "GB200",
    "mi300x": "MI300X",
    "mi250x": "MI250X",
    "mi355x": "MI355X",
    "mi350x": "MI350X",
    "tpu-v4": "TPU-v4",
    "tpu-v5e": "TPU-v5e",
    "tpu-v5p": "TPU-v5p",
    "tpu-v6e": "TPU-v6e",
    "tpu-v7x": "TPU-v7x",
    "ascend-910b": "Ascend-910B",
    "ascend-910c": "Ascend-910C",
    "c500": "MetaX-C500",
    "v100": "V100-SXM2",
    "l40s": "L40S",
}


def by_name(name: str, user_file: str | None = None) -> Hardware:
    """A device by its name or an alias (ALIASES), case-insensitive; a device of ``user_file`` with
    the exact name wins over an alias."""
    catalog = load_catalog(user_file)
    for want in (name, ALIASES.get(name.lower(), name)):
        for hw in catalog:
            if hw.name.lower() == want.lower():
                return hw
    names = ", ".join(h.name for h in catalog)
    raise ConfigError(f"unknown hardware {name!r}", fix=f"use one of: {names}; or add it with --hardware-file")


def canonical_name(name: str, user_file: str | None = None) -> str:
    """The catalog's spelling of a device name or alias (``h100`` -> ``H100-SXM``), the one place
    aliases are resolved for comparisons; a name the catalog lacks is returned as given."""
    try:
        return by_name(name, user_file).name
    except ConfigError:
        return name


def same_device(a: str, b: str, user_file: str | None = None) -> bool:
    """Whether two device names or aliases name one device (canonical names, case-insensitive)."""
    return canonical_name(a, user_file).lower() == canonical_name(b, user_file).lower()


MAX_DEVICE_NAME = 256


def detect(device_name: str | None, user_file: str | None = None) -> Hardware | None:
    """The first catalog entry whose ``match`` regex finds the profiler's device name (its first
    ``MAX_DEVICE_NAME`` characters: a match pattern like ``A100.*80GB`` is quadratic in the text
    it searches, and real device names are under 100 characters)."""
    if not device_name or not device_name.strip():
        return None
    device_name = device_name[:MAX_DEVICE_NAME]
    for hw in load_catalog(user_file):
        if re.search(hw.match, device_name, re.IGNORECASE):
            return hw
    return None


#: (computeMajor, computeMinor, numSms) -> catalog name, for traces whose device name is empty
_BY_PROPERTIES: dict[tuple[int, int, int], str] = {
    (9, 0, 132): "H100-SXM",
    # ROCm reports gfx9xx as major 9 / minor x and CUs as SMs (e.g. vLLM traces with an empty name)
    (9, 5, 256): "MI355X",  # gfx950, 256 CUs (an MI350X names itself: its name is matched first)
    (9, 4, 304): "MI300X",  # gfx942, 304 CUs
    (9, 0, 114): "H100-PCIe",
    (10, 0, 148): "B200",
    (8, 0, 108): "A100-SXM-40GB",
    (7, 0, 80): "V100-SXM2",
    (8, 9, 142): "L40S",
    (9, 0, 110): "MI250X",
}


# a device memory size a trace may report, bytes: anything outside is a damaged or foreign field
REPORTED_MEMORY_RANGE = (1e8, 1e13)


def plausible_memory_bytes(m: Any) -> float | None:
    """``m`` as a device memory size in bytes, or None when it is not a number in
    REPORTED_MEMORY_RANGE: trace and report fields are untrusted input."""
    if isinstance(m, bool) or not isinstance(m, (int, float)):
        return None
    lo, hi = REPORTED_MEMORY_RANGE
    return float(m) if lo <= m <= hi else None


def reported_memory_bytes(props: dict[str, Any]) -> float | None:
    """The device memory a trace's ``deviceProperties`` entry reports (``totalGlobalMem``), if plausible."""
    return plausible_memory_bytes(props.get("totalGlobalMem"))


def detect_from_properties(props: dict[str, Any], user_file: str | None = None) -> Hardware | None:
    """Fallback when the name is empty: compute capability + SM count (+ memory for A100 80GB)."""
    try:
        key = (int(props["computeMajor"]), int(props["computeMinor"]), int(props["numSms"]))
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    name = _BY_PROPERTIES.get(key)
    if name == "A100-SXM-40GB" and (reported_memory_bytes(props) or 0.0) > 60e9:
        name = "A100-SXM-80GB"
    return by_name(name, user_file) if name else None


def dtype_of(type_str: str | None) -> tuple[str, int]:
    """(catalog dtype, bytes) for a profiler "Input type" string; unknown -> fp32, 4 bytes."""
    if not type_str:
        return ("fp32", 4)
    return DTYPES.get(type_str.strip().lower(), ("fp32", 4))
