"""Build hook for the optional C extension; all metadata lives in pyproject.toml.

`rivet_core.source._mysqlframe` frames MySQL row packets without the GIL (see
rivet_core/source/mysql_raw.py). It is optional: without a C compiler (or Python headers)
the install still succeeds and the reader uses its pure-Python framing loop.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rivet_core.source._mysqlframe",
            sources=["rivet_core/source/_mysqlframe.c"],
            optional=True,
            # Portable code only (no -march=native: the build may move between machines).
            extra_compile_args=["-O2"],
        )
    ]
)
