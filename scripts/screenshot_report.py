"""The README's picture of the HTML report: the quick-start trace's report, its first rank from the
header to the step timeline, rendered by headless Chromium (needs playwright and a chromium).

    python scripts/screenshot_report.py [--out docs/img/report.png] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "img" / "report.png"))
    p.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    a = p.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from stepscope.cli import main as stepscope

    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "report.html"
        os.chdir(ROOT)  # the report shows the path as given: a relative one
        if stepscope(["analyze", "examples/traces/a100_nccl_rank0.json.gz", "-o", str(html), "-q"]) != 0:
            return 1
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=a.chromium, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1240, "height": 1000}, device_scale_factor=1)
            page.goto(html.as_uri())
            page.wait_for_selector("[data-drawn='1']")
            top = page.locator("section.rank h2").first.bounding_box()
            bottom = page.locator("div.chart.timeline").first.bounding_box()
            assert top is not None and bottom is not None
            clip = {"x": 0, "y": top["y"] - 8, "width": 1240, "height": bottom["y"] + bottom["height"] - top["y"] + 16}
            page.screenshot(path=a.out, clip=clip, full_page=True)
            browser.close()
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
