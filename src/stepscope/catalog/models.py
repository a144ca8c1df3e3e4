"""The model catalog (data/models.yaml): a model given by catalog name, a Hugging Face config.json
or a model directory holding one, as one ModelShape. ``plan --model`` and ``analyze --model`` (for
MFU) resolve names the same way."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..yamlio import safe_load
from .model_flops import ModelShape, from_config_dict, from_hf_config


@lru_cache(maxsize=1)
def catalog() -> dict[str, dict[str, Any]]:
    doc = safe_load(resources.files("stepscope.data").joinpath("models.yaml").read_text(encoding="utf-8"))
    return {k.lower(): v for k, v in doc["models"].items()}


def resolve(name_or_path: str) -> ModelShape:
    """A catalog name (case-insensitive), a config.json path, or a directory with a config.json."""
    cat = catalog()
    if name_or_path.lower() in cat:
        return from_config_dict(cat[name_or_path.lower()], name_or_path)
    try:
        is_file, is_dir_model = Path(name_or_path).is_file(), (Path(name_or_path) / "config.json").is_file()
    except OSError as exc:  # a name the OS refuses (too long, ...): is_file raises rather than says no
        raise ConfigError(
            f"cannot use this model path ({exc.strerror})",
            path=name_or_path[:200],
            fix=f"check the path, or use one of: {', '.join(sorted(cat))}",
        ) from None
    if is_file:
        return from_hf_config(name_or_path)
    if is_dir_model:  # a Hugging Face model directory
        return from_hf_config(str(Path(name_or_path) / "config.json"))
    if name_or_path.endswith(".json") or "/" in name_or_path or "\\" in name_or_path:  # meant as a file
        raise ConfigError(
            "no such model config file",
            path=name_or_path,
            fix=f"check the path, or use one of: {', '.join(sorted(cat))}",
        )
    raise ConfigError(
        f"unknown model {name_or_path!r}", fix=f"use a config.json path or one of: {', '.join(sorted(cat))}"
    )
