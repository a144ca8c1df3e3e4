"""Shared fixtures."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest

MISSING_MODULE = "could not import"  # how pytest.importorskip words its skip


def in_ci() -> bool:
    """CI (.ci/run sets CI=1) installs Chromium and every optional extra: there, a test that
    cannot find one fails instead of skipping."""
    return bool(os.environ.get("CI"))


def _fail_skip_for_missing_module(report: pytest.CollectReport | pytest.TestReport) -> None:
    if not (in_ci() and report.skipped):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if MISSING_MODULE in reason:
        report.outcome = "failed"
        report.longrepr = f"CI installs every optional dependency, yet: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """A module skipped at import (a module-level importorskip) fails in CI."""
    outcome = yield
    _fail_skip_for_missing_module(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A test skipped by pytest.importorskip (torch, jax, playwright, polars, ...) fails in CI."""
    outcome = yield
    _fail_skip_for_missing_module(outcome.get_result())


@pytest.fixture
def browser_page() -> Iterator[tuple[Any, list[str]]]:
    """A page of headless Chromium (the system's, driven by Playwright) and the list its console
    errors, page errors and dialogs are written to; skipped where Chromium is missing, except in
    CI, which installs it."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if in_ci():
            pytest.fail("chromium missing in CI")
        pytest.skip("chromium not installed")
    sync_api = pytest.importorskip("playwright.sync_api")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=exe,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
            ],
        )
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: errors.append("dialog opened: " + d.message))
        yield page, errors
        browser.close()


@pytest.fixture
def run_json(capsys: pytest.CaptureFixture[str]) -> Callable[..., Any]:
    """Run the CLI with these arguments (exit 0 expected) and return its JSON output."""
    import json

    from stepscope.cli import main

    def run(*args: str) -> Any:
        assert main(list(args)) == 0
        return json.loads(capsys.readouterr().out)

    return run


@pytest.fixture
def bench_module() -> Callable[[str], Any]:
    """Import a script of benchmarks/ by name (they import each other as top-level modules)."""
    import importlib
    import sys
    from pathlib import Path

    bench = str(Path(__file__).resolve().parents[1] / "benchmarks")

    def load(name: str) -> Any:
        sys.path.insert(0, bench)
        try:
            return importlib.import_module(name)
        finally:
            sys.path.remove(bench)

    return load
