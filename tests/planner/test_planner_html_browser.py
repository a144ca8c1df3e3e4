"""The plan HTML page in a real browser (headless Chromium): it renders, its bars are drawn, the
notes (assumed settings, what fits instead) are shown, and a hostile model file name is text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stepscope.cli import main

EVIL = "<img src=x onerror=alert(1)>"


@pytest.mark.browser
def test_plan_html_renders_in_headless_chromium(tmp_path: Path, browser_page: tuple[Any, list[str]]) -> None:
    page, errors = browser_page
    config = tmp_path / f"{EVIL}.json"  # a model given by a config file whose name is markup
    config.write_text(
        json.dumps(
            {
                "hidden_size": 4096,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "intermediate_size": 14336,
                "vocab_size": 128256,
            }
        ),
        encoding="utf-8",
    )
    search, one = tmp_path / "search.html", tmp_path / "one.html"
    job = [
        "plan",
        "--model",
        str(config),
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--global-batch",
        "16",
        "--seq-len",
        "8192",
    ]
    assert main([*job, "--top", "5", "--html", str(search)]) == 0
    assert main([*job, "--evaluate", "dp=8,mb=2", "--html", str(one)]) == 0  # does not fit: followed by what does
    page.goto(search.as_uri())
    assert page.title() == "stepscope plan"
    assert page.locator("table tr").count() == 6  # header + the top 5
    assert page.locator("svg rect").count() >= 10  # stacked bars of time and memory
    body = page.locator("body").inner_text()
    assert EVIL in body and "assumed: fused vocab-parallel loss" in body  # the name as text; the settings shown
    page.goto(one.as_uri())
    assert "fits with:" in page.locator("body").inner_text()
    assert page.locator("img").count() == 0  # the markup in the name made no element
    assert errors == []
