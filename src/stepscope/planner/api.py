"""``stepscope.plan``: the planner from Python, with the command line's semantics.

The job is given by the same keys as a ``--batch`` record (docs/plan-settings.md lists every
framework setting); ``framework`` names a preset (data/frameworks.yaml) whose settings fill what
``settings`` does not give (a search without one runs under frameworks.default_for the device:
Megatron-LM, MindSpeed-LLM on Ascend, MaxText on TPUs). Without ``evaluate`` the search returns
the ``top`` fastest configurations that fit; with it, that one configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import frameworks
from .plans import evaluate_result, framework_of, search_result
from .record import job_from_record
from .result import PlanResult


def plan(
    *,
    model: str,
    hardware: str,
    devices: int,
    global_batch: int,
    seq_len: int,
    devices_per_node: int | None = None,
    precision: str | None = None,
    framework: str | None = None,
    settings: Mapping[str, Any] | None = None,
    network: str | None = None,
    hardware_file: str | None = None,
    evaluate: str | None = None,
    top: int = 20,
    where: str = "",
    distinct: bool = True,
) -> PlanResult:
    """Search (or, with ``evaluate="tp=8,pp=2,..."``, evaluate one strategy) for a training job.

    ``model``: a catalog name or a Hugging Face ``config.json``; ``hardware``: a catalog device or
    alias; ``settings``: framework settings by key (``{"loss": "unfused"}``); ``distinct``: only the
    fastest of each layout (False: its slower variants too). Returns a frozen
    ``PlanResult``: ``records`` (one dict per configuration, fastest that fit first, with the
    fields of docs/plan-json-schema.md) and the ``lines`` the terminal prints under them.
    Raises ``ConfigError`` (a ``StepscopeError``) with the fix for a bad job or setting.
    """
    record: dict[str, Any] = {
        "model": model,
        "hardware": hardware,
        "devices": devices,
        "global_batch": global_batch,
        "seq_len": seq_len,
        "devices_per_node": devices_per_node,
        "precision": precision,
        "framework": framework,
        "network": network,
        "hardware_file": hardware_file,
        **dict(settings or {}),
    }
    job = job_from_record(record)
    if not framework and not evaluate:  # a search's rows are runnable in one named framework
        record["framework"] = framework = frameworks.default_for(job.hw.name)
        job = job_from_record(record)
    fw = framework_of(framework)
    if evaluate:
        return evaluate_result(job, fw, evaluate, model_name=model)
    return search_result(job, fw, model_name=model, top=top, where=where, distinct=distinct)
