"""docs/plan-settings.md, the table of every framework setting, written from the settings'
declarations (config.py): ``python -m stepscope.planner.settings_doc [OUT]`` (default
docs/plan-settings.md); a test checks that the committed file is what this writes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .config import SETTINGS
from .knobs import Setting

HEADER = """# `stepscope plan` framework settings

Every setting of the framework configuration a plan assumes, by the key that names it everywhere:
`--set KEY=VALUE` (repeatable), a `--config FILE` (a YAML or JSON mapping of keys, with an
optional `framework:` preset under them), a `--framework` preset (`data/frameworks.yaml`), a
`--batch` record and a `--calibrate` CSV column. A value given with `--set` wins over `--config`,
which wins over the preset; a `--batch` record's or CSV row's own value wins over all of them.
Values are given in the key's unit. The JSON `settings` of a prediction and its `assumed:` line
report the settings as the job runs them.

Generated from `src/stepscope/planner/config.py` by `python -m stepscope.planner.settings_doc`;
do not edit by hand.

| group | key | type / choices | unit | default | meaning | source |
|---|---|---|---|---|---|---|
"""


def _default(s: Setting) -> str:
    v: Any = s.default
    if v is None:
        return "none"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v * s.meta.unscale:g}"
    return f"`{v}`" if v != "" else '`""`'


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def settings_table() -> str:
    """The Markdown page: the header, then one row per setting in declaration order."""
    rows = [
        "| "
        + " | ".join(
            (
                s.group,
                f"`{s.key}`",
                _cell(s.type_text()),
                _cell(s.meta.unit),
                _default(s),
                _cell(s.meta.help),
                _cell(s.meta.source),
            )
        )
        + " |"
        for s in SETTINGS
    ]
    return HEADER + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "docs/plan-settings.md")
    out.write_text(settings_table(), encoding="utf-8")
    print(f"wrote {out} ({len(SETTINGS)} settings)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
