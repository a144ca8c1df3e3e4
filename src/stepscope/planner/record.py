"""A ``--batch`` record, a ``--calibrate`` row or the ``plan`` flags (as one record) -> the Job it
describes: keys as in ``RECORD_KEYS``, values as JSON or CSV gives them; a bad value is a
ConfigError naming the key, never a truncation or Python's truthiness."""

from __future__ import annotations

import math
from typing import Any

from ..errors import ConfigError
from . import frameworks
from .cost import Job
from .job import DP_OVERLAP
from .network import by_name as network_by_name
from .search import hardware, model

__all__ = ["RECORD_KEYS", "ignored_keys", "job_from_record"]


def job_from_record(d: dict[str, Any]) -> Job:
    """The job a ``--batch`` record (or the flags, as one) describes: keys as in RECORD_KEYS, values
    as JSON or CSV gives them; bad values are a ConfigError naming the key."""
    if d.get("global_batch") not in (None, "") and d.get("global_batch_tokens") not in (None, ""):
        raise ConfigError(
            "give the batch in sequences or in tokens, not both", fix="drop --global-batch or --global-batch-tokens"
        )
    if (
        d.get("global_batch") in (None, "")
        and d.get("global_batch_tokens") not in (None, "")
        and d.get("seq_len") not in (None, "")
    ):
        tokens, seq = _whole(d, "global_batch_tokens", 2**53), _whole(d, "seq_len")
        if tokens % seq:
            raise ConfigError(
                f"--global-batch-tokens {tokens} is not a multiple of --seq-len {seq}", fix="pass whole sequences"
            )
        d = {**d, "global_batch": tokens // seq}
    missing = [k for k in ("model", "hardware", "devices", "global_batch", "seq_len") if d.get(k) in (None, "")]
    if missing:
        raise ConfigError(
            f"plan needs {', '.join('--' + m.replace('_', '-') for m in missing)} (a --batch record or --calibrate row: "
            f"{', '.join(missing)})",
            fix="see stepscope plan --help",
        )
    prec = str(d.get("precision") or "bf16").lower()
    if prec not in ("bf16", "fp16", "fp8"):
        raise ConfigError(f"precision must be bf16, fp16 or fp8, not {prec!r}", fix="e.g. --precision fp8")
    grad = str(d.get("grad_dtype") or "")
    if grad not in ("", "fp32", "bf16", "fp16"):
        raise ConfigError(f"grad_dtype must be fp32, bf16 or fp16, not {grad!r}", fix="e.g. --grad-dtype bf16")
    if d.get("framework") not in (None, ""):
        d = frameworks.apply(d, frameworks.by_name(str(d["framework"])))
    hw = hardware(str(d["hardware"]), str(d["hardware_file"]) if d.get("hardware_file") else None)
    return Job(
        model=model(str(d["model"])),
        hw=hw,
        devices=_whole(d, "devices"),
        devices_per_node=_whole(d, "devices_per_node")
        if d.get("devices_per_node") not in (None, "")
        else hw.node_devices or 8,
        global_batch=_whole(d, "global_batch"),
        seq_len=_whole(d, "seq_len"),
        precision=prec,
        flash_attention=_bool(d, "flash_attention", True),
        fused_elementwise=_bool(d, "fused_elementwise", True),
        eager_swiglu=_bool(d, "eager_swiglu", False),
        pipeline_split_embedding=_bool(d, "pipeline_split_embedding", False),
        pipeline_split_cost=_bool(d, "pipeline_split_cost", False),
        hidden_dropout=_bool(d, "hidden_dropout", False),
        param_gather_overlap=_bool(d, "param_gather_overlap", False),
        zero_sync_after_backward=_bool(d, "zero_sync_after_backward", False),
        fused_projections=_bool(d, "fused_projections", True),
        kv_repeated=_bool(d, "kv_repeated", False),
        # the loss by name, or the older flag: "fused_loss": false is "unfused"
        loss=str(d.get("loss") or ("fused" if _bool(d, "fused_loss", True) else "unfused")).lower(),
        fp8_recipe=str(d.get("fp8_recipe") or "tensorwise").lower(),
        fp8_weight_cache=_bool(d, "fp8_weight_cache", True),
        fp8_saved_inputs=str(d.get("fp8_saved_inputs") or "fp8"),
        fp8_all_gather=_bool(d, "fp8_all_gather", False),
        fp8_gain_thresholds=_bool(d, "fp8_gain_thresholds", False),
        zero3_prefetch=_bool(d, "zero3_prefetch", False),
        sp_saves_gathered=_bool(d, "sp_saves_gathered", False),
        sp_regather=_bool(d, "sp_regather", False),
        attention_kernel=str(d.get("attention_kernel") or "").lower(),
        reserve_gb=None if d.get("reserve_gb") in (None, "") else _number(d, "reserve_gb", 3.0),
        zero3_gather=str(d.get("zero3_gather") or "layer").lower(),
        ep_dispatch=str(d.get("ep_dispatch") or "all_to_all").lower(),
        deepep_sms=int(_number(d, "deepep_sms", 20.0)),
        grad_bytes={"": 0, "fp32": 4}.get(grad, 2),
        dp_bucket_mb=_number(d, "dp_bucket_mb", 0.0),
        zero_gather_copy_s=_number(d, "zero_gather_copy_us", 0.0) * 1e-6,
        grad_accum_bytes=_number(d, "grad_accum_bytes", 0.0),
        optimizer_bytes=_number(d, "optimizer_bytes", 12.0),
        moe_imbalance=_number(d, "moe_imbalance", 1.0),
        layer_overhead_s=_host_wait_s(d),
        dp_overlap=_number(d, "dp_overlap", DP_OVERLAP),
        network=network_by_name(str(d["network"])) if d.get("network") not in (None, "") else None,
    )


# the keys a --batch record or a --calibrate row may carry (besides its measurement)
RECORD_KEYS = frozenset(
    {
        "model",
        "hardware",
        "hardware_file",
        "devices",
        "devices_per_node",
        "global_batch",
        "global_batch_tokens",
        "seq_len",
        "precision",
        "reserve_gb",
        "grad_dtype",
        "flash_attention",
        "fused_elementwise",
        "eager_swiglu",
        "param_gather_overlap",
        "zero_sync_after_backward",
        "fused_projections",
        "kv_repeated",
        "fused_loss",
        "loss",
        "fp8_recipe",
        "fp8_weight_cache",
        "fp8_saved_inputs",
        "fp8_all_gather",
        "fp8_gain_thresholds",
        "zero3_prefetch",
        "sp_saves_gathered",
        "sp_regather",
        "attention_kernel",
        "dp_bucket_mb",
        "moe_imbalance",
        "zero3_gather",
        "ep_dispatch",
        "deepep_sms",
        "zero_gather_copy_us",
        "grad_accum_bytes",
        "optimizer_bytes",
        "network",
        "framework",
        "strategy",
        "pipeline_split_embedding",
        "pipeline_split_cost",
        "hidden_dropout",
        "host_wait_us",
        "dp_overlap",
    }
)


def ignored_keys(rec: dict[str, Any]) -> list[str]:
    """The keys of a record the planner does not read. They are reported, not refused (a run's
    id or notes belong there too), so that a misspelt framework flag (``zero_sync_after_backwrd``)
    no longer passes unseen."""
    return sorted(str(k) for k in rec if k not in RECORD_KEYS)


def _whole(d: dict[str, Any], key: str, limit: int = 2**31) -> int:
    """A count of a --batch record or a flag (devices, sequences, tokens): a whole number up to
    ``limit``, written as an integer, a float without a fraction or a string of one; 8.5 devices,
    1e400 (JSON's infinity) or a 400-digit integer is an error rather than truncated or a
    traceback."""
    v = d[key]
    x: int | None = None
    if isinstance(v, int) and not isinstance(v, bool):
        x = v
    elif not isinstance(v, bool):
        try:
            f = float(v)
            x = int(f) if math.isfinite(f) and f == int(f) else None
        except (TypeError, ValueError):
            x = None
    if x is None or x > limit:
        raise ConfigError(
            f"{key} must be a whole number up to {limit:,}, not {v!r}", fix=f"e.g. --{key.replace('_', '-')} 8"
        )
    return x


def _host_wait_s(d: dict[str, Any]) -> float:
    """--host-wait-us / the batch key host_wait_us, in seconds: 0 up to (not including) a second per
    layer and micro-batch, beyond which it is surely a typo."""
    us = _number(d, "host_wait_us", 0.0)
    if not 0 <= us < 1e6:
        raise ConfigError(
            f"host wait must be >= 0 and under a second per layer and micro-batch, not {us:g} us",
            fix="e.g. --host-wait-us 200",
        )
    return us * 1e-6


def _number(d: dict[str, Any], key: str, default: float) -> float:
    """An optional real-valued setting of a --batch record or a flag (blank = the default)."""
    v = d.get(key)
    if v in (None, ""):
        return default
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{key} must be a number, not {v!r}", fix=f"e.g. --{key.replace('_', '-')} {default:g}"
        ) from None


def _bool(d: dict[str, Any], key: str, default: bool) -> bool:
    """A framework flag of a --batch record (JSON true/false, 0/1 or the strings); anything else is
    an error rather than Python's truthiness (the string "false" is true)."""
    v = d.get(key, default)
    if v is None or v == "":  # absent, or a blank optional CSV cell
        return default
    if isinstance(v, bool) or v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("true", "false", "1", "0"):
        return v.strip().lower() in ("true", "1")
    raise ConfigError(f"{key} must be true or false, not {v!r}", fix=f'e.g. "{key}": false')
