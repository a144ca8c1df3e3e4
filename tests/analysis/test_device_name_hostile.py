"""A device name of 80,000 characters: the catalog's match patterns (``A100.*80GB``) are
quadratic in the text they search, so only the first 256 characters are searched."""

from __future__ import annotations

import re

import pytest

from stepscope.catalog import hardware


def test_detect_searches_a_bounded_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    searched: list[int] = []
    real = re.search

    def recording(pattern: str, text: str, flags: int = 0) -> re.Match[str] | None:
        searched.append(len(text))
        return real(pattern, text, flags)

    monkeypatch.setattr(hardware.re, "search", recording)
    hw = hardware.detect("NVIDIA " + "A100 " * 16_000)
    assert hw is not None and hw.name.startswith("A100")
    assert searched and max(searched) <= hardware.MAX_DEVICE_NAME
