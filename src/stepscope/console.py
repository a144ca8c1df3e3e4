"""The ``stepscope`` command's entry point (and ``python -m stepscope``'s).

It runs ``cli.main`` with ``pandas`` unimportable. pyarrow imports pandas, when it is installed, the
first time it builds or converts an array, only to check whether its input is a pandas object; the
command line never has one, and the import costs about 0.15 s and 40 MB per run (benchmarks/
bench_analyze.py). Without it pyarrow takes pandas for absent. The hook is set before anything
imports pyarrow and only in the command's own process (and the worker processes it forks):
library users and tests call ``cli.main``, which changes nothing.
"""

from __future__ import annotations

import importlib.abc
import sys


class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not used by the stepscope command")
        return None


def main() -> int:
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())
    from .cli import main as cli_main

    return cli_main()
