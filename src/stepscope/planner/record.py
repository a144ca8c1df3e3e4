"""A ``--batch`` record, a ``--calibrate`` row or the ``plan`` command line (as one record) -> the
Job it describes: the job's own keys (CORE_KEYS), the framework settings by their keys
(config.BY_KEY), ``framework`` (a preset under the record's own settings) and ``strategy``; values
as JSON, CSV or the command line gives them. A bad value is a ConfigError naming the key, never a
truncation or Python's truthiness."""

from __future__ import annotations

import math
from typing import Any

from ..errors import ConfigError
from . import frameworks
from .config import BY_KEY, FrameworkConfig
from .job import Job, make_job
from .network import by_name as network_by_name
from .search import hardware, model

__all__ = ["CORE_KEYS", "RECORD_KEYS", "ignored_keys", "job_from_record"]

# the job's own keys: what it trains, on what, at which batch
CORE_KEYS = (
    "model",
    "hardware",
    "hardware_file",
    "devices",
    "devices_per_node",
    "global_batch",
    "global_batch_tokens",
    "seq_len",
    "network",
)
RECORD_KEYS = frozenset({*CORE_KEYS, *BY_KEY, "framework", "strategy"})


def _given(d: dict[str, Any], key: str) -> bool:
    return d.get(key) not in (None, "")


def _batch(d: dict[str, Any]) -> dict[str, Any]:
    """The record with the batch in sequences (``global_batch_tokens`` / ``seq_len``); every key the
    job needs present."""
    if _given(d, "global_batch") and _given(d, "global_batch_tokens"):
        raise ConfigError(
            "give the batch in sequences or in tokens, not both", fix="drop --global-batch or --global-batch-tokens"
        )
    if not _given(d, "global_batch") and _given(d, "global_batch_tokens") and _given(d, "seq_len"):
        tokens, seq = _whole(d, "global_batch_tokens", 2**53), _whole(d, "seq_len")
        if tokens % seq:
            raise ConfigError(
                f"--global-batch-tokens {tokens} is not a multiple of --seq-len {seq}", fix="pass whole sequences"
            )
        d = {**d, "global_batch": tokens // seq}
    missing = [k for k in ("model", "hardware", "devices", "global_batch", "seq_len") if not _given(d, k)]
    if missing:
        raise ConfigError(
            f"plan needs {', '.join('--' + m.replace('_', '-') for m in missing)} (a --batch record or --calibrate row: "
            f"{', '.join(missing)})",
            fix="see stepscope plan --help",
        )
    return d


def job_from_record(d: dict[str, Any]) -> Job:
    """The job a record (or the command line, as one) describes; a ``framework`` preset fills the
    settings the record does not give (frameworks.apply)."""
    d = _batch(d)
    if _given(d, "framework"):
        d = frameworks.apply(d, frameworks.by_name(str(d["framework"])))
    hw = hardware(str(d["hardware"]), str(d["hardware_file"]) if _given(d, "hardware_file") else None)
    return make_job(
        model(str(d["model"])),
        hw,
        _whole(d, "devices"),
        _whole(d, "devices_per_node") if _given(d, "devices_per_node") else hw.node_devices or 8,
        _whole(d, "global_batch"),
        _whole(d, "seq_len"),
        framework=FrameworkConfig.from_keys(d),
        network=network_by_name(str(d["network"])) if _given(d, "network") else None,
    )


def ignored_keys(rec: dict[str, Any]) -> list[str]:
    """The keys of a record the planner does not read. They are reported, not refused (a run's
    id or notes belong there too), so that a misspelt setting (``zero_sync_after_backwrd``) does
    not pass unseen."""
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
