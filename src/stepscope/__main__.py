"""``python -m stepscope``: the command line. The monitor analyzes its captures this way, in a
background process with the job's own interpreter."""

from .console import main

raise SystemExit(main())
