"""The ``plan`` subcommand's options: the job, a handful of core flags, and the framework settings
by key (``--framework NAME``, ``--config FILE``, repeatable ``--set key=value``; the keys and what
they mean: docs/plan-settings.md, generated from config.py)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .. import jsonio
from ..argtypes import positive, positive_float
from ..errors import ConfigError, InputError
from ..yamlio import safe_load
from . import frameworks
from .config import BY_KEY


def _choices_text(key: str) -> str:
    """A choice setting's values as the declaration gives them: ``bf16 (default), fp16 or fp8``."""
    s = BY_KEY[key]
    named = [c + (" (default)" if c == s.default else "") for c in s.choices]
    return f"{', '.join(named[:-1])} or {named[-1]}"


def _job_args(pl: argparse.ArgumentParser) -> None:
    job = pl.add_argument_group("the job")
    job.add_argument("--model", help="catalog name (e.g. llama3-70b) or a Hugging Face config.json")
    job.add_argument("--hardware", help="device name or alias (h100, a100, mi300x, tpu-v5p, ...)")
    job.add_argument(
        "--hardware-file",
        metavar="YAML",
        help="your own devices (layout of data/hardware.yaml; rows may name their own)",
    )
    job.add_argument("--devices", type=int, help="number of devices")
    job.add_argument(
        "--devices-per-node", type=int, help="devices sharing the intra-node link (default: the catalog's)"
    )
    job.add_argument("--global-batch", type=int, help="sequences per step")
    job.add_argument(
        "--global-batch-tokens", type=int, metavar="T", help="or tokens per step (a multiple of --seq-len)"
    )
    job.add_argument("--seq-len", type=int, help="tokens per sequence")
    job.add_argument("--precision", help=f"{_choices_text('precision')} (= --set precision=...)")
    job.add_argument(
        "--network", metavar="NAME", help="a measured network: data/networks.yaml name or FILE.yaml[#NAME]"
    )


def _framework_args(pl: argparse.ArgumentParser) -> None:
    fw = pl.add_argument_group(
        "framework settings", "every setting, its values and sources: docs/plan-settings.md; --set wins over the rest"
    )
    fw.add_argument(
        "--framework",
        metavar="NAME",
        help=f"a preset: {', '.join(frameworks.catalog())} (data/frameworks.yaml); "
        "also only its recompute policies, schedules and ZeRO stages",
    )
    fw.add_argument(
        "--config", metavar="FILE", help="settings from a YAML/JSON mapping of keys (framework: a preset under them)"
    )
    fw.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one setting, e.g. --set loss=te --set tp_overlap=full (repeatable)",
    )


def _search_args(pl: argparse.ArgumentParser) -> None:
    what = pl.add_argument_group("what to plan")
    what.add_argument("--evaluate", metavar="STRATEGY", help='one configuration, e.g. "tp=8,pp=8,dp=16,vpp=2,mb=1"')
    what.add_argument("--top", type=positive, default=20, help="configurations to show (default 20)")
    what.add_argument(
        "--where", metavar="CONDITIONS", help='search only these, e.g. "tp=8,pp<=4,recompute=selective|full"'
    )
    rows = what.add_mutually_exclusive_group()
    rows.add_argument(
        "--distinct", action="store_true", help="one row per layout (TP, PP, DP, CP, EP, ZeRO, recompute): the default"
    )
    rows.add_argument(
        "--variants",
        action="store_true",
        help="also the slower variants of a layout (other micro-batches, schedules, offload...)",
    )
    what.add_argument("--batch", metavar="FILE.jsonl", help="evaluate many records, one JSON line out per record")
    what.add_argument(
        "--calibrate", metavar="RUNS.csv", help="fit efficiencies to measured runs first (docs/planner.md: Calibration)"
    )


def _what_if_args(pl: argparse.ArgumentParser) -> None:
    wi = pl.add_argument_group("a measured run: what-if against it (with --evaluate), calibration from its trace")
    wi.add_argument(
        "--baseline",
        metavar="STRATEGY",
        help="the strategy of the measured run; with --from-analysis, the traced run's, from which its profile's "
        "op classes (linear attention, grouped GEMMs, all-to-all) and exposed communication are calibrated",
    )
    wi.add_argument("--measured-step-s", type=positive_float, metavar="S", help="its measured step time")
    wi.add_argument(
        "--from-analysis",
        metavar="REPORT.json",
        help="efficiencies and step time from a stepscope analyze --json report",
    )
    wi.add_argument("--rank", type=int, help="with --from-analysis: which rank of the report (default: the first)")


def add_plan_parser(sub: Any) -> argparse.ArgumentParser:
    pl = sub.add_parser(
        "plan",
        help="search parallel/memory strategies; predict memory, step time and MFU",
        description="Search parallel and memory strategies of a training job, or evaluate one, predicting "
        "memory, step time and MFU.",
    )
    _job_args(pl)
    _framework_args(pl)
    _search_args(pl)
    _what_if_args(pl)
    out = pl.add_argument_group("output")
    out.add_argument(
        "-o",
        "--output",
        action="append",
        default=[],
        metavar="OUT",
        help="write the plan, its format chosen by the extension (.json, .html, ...: the plan renderers of "
        "report/registry.py); repeatable; - for standard output, with --format NAME",
    )
    out.add_argument("--format", metavar="NAME", help="the format of -o -, e.g. json")
    out.add_argument("--json", action="store_true", help="print JSON instead of the table")
    out.add_argument("--html", metavar="OUT", help="write stacked memory/time bars of the rows as HTML")
    return pl


@dataclass(frozen=True, kw_only=True)
class CliSettings:
    """The framework settings the command line gives (``--config`` under ``--set`` and
    ``--precision``), by key, and the preset named (``--framework``, else the file's)."""

    values: dict[str, Any]
    framework: str | None


def _read_config(path: str) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=path, fix="pass a YAML or JSON file") from None
    try:
        doc = jsonio.loads(text) if path.endswith(".json") else safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:  # jsonio: too deep is a JSONDecodeError
        raise ConfigError(
            f"not a YAML/JSON mapping ({exc.__class__.__name__})", path=path, fix="key: value lines"
        ) from None
    if not isinstance(doc, dict):
        raise ConfigError("not a mapping of settings", path=path, fix="key: value lines, e.g. loss: te")
    unknown = sorted(str(k) for k in doc if k not in BY_KEY and k != "framework")
    if unknown:
        raise ConfigError(
            f"unknown setting {', '.join(unknown)}", path=path, fix="the keys of docs/plan-settings.md, or framework"
        )
    return {str(k): v for k, v in doc.items()}


def _assignments(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in BY_KEY:
            raise ConfigError(
                f"--set {item!r}: {'unknown setting ' + repr(key) if eq else 'not key=value'}",
                fix="--set KEY=VALUE with a key of docs/plan-settings.md",
            )
        if key in out:
            raise ConfigError(f"--set {key} given twice ({out[key]}, {value.strip()})", fix="keep one of them")
        out[key] = value.strip()
    return out


def cli_settings(ns: argparse.Namespace) -> CliSettings:
    """The settings of ``--config``, ``--set`` and ``--precision`` (--set and the flag win over the
    file; a key given by both --set and a flag is an error)."""
    from_file = _read_config(ns.config) if getattr(ns, "config", None) else {}
    sets = _assignments(getattr(ns, "settings", None) or [])
    if getattr(ns, "precision", None) is not None:
        if "precision" in sets:
            raise ConfigError("precision given by --precision and --set", fix="keep one of them")
        sets["precision"] = ns.precision
    framework = getattr(ns, "framework", None) or from_file.pop("framework", None)
    from_file.pop("framework", None)
    return CliSettings(values={**from_file, **sets}, framework=str(framework) if framework else None)
