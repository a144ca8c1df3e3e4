"""``python -m stepscope``: the command line (used to analyze a monitor's capture in a background
process with the interpreter the job runs)."""

from .cli import main

raise SystemExit(main())
