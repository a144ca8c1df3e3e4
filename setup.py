"""Only the optional C extension lives here; all metadata is in pyproject.toml.

The extension is optional: without a C compiler stepscope installs and falls back to the
pure-Python (msgspec) reader, which gives identical tables, only slower.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "stepscope.trace._fastkineto",
            ["src/stepscope/trace/_fastkineto.c"],
            extra_compile_args=["-O3", "-std=c99", "-Wall", "-Wno-unused-function"],
            optional=True,
        )
    ]
)
