"""Only the optional C extension lives here; all metadata is in pyproject.toml.

The extensions are optional: without a C compiler stepscope installs and falls back to the
pure-Python readers (msgspec for Kineto, the protobuf runtime for XPlane), which give identical
tables, only slower.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "stepscope.trace._fastkineto",
            ["src/stepscope/trace/_fastkineto.c"],
            extra_compile_args=["-O3", "-std=c99", "-Wall", "-Wno-unused-function"],
            optional=True,
        ),
        Extension(
            "stepscope.trace._fastxplane",
            ["src/stepscope/trace/_fastxplane.c"],
            extra_compile_args=["-O3", "-std=c99", "-Wall", "-Wno-unused-function"],
            optional=True,
        ),
    ]
)
