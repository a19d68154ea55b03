"""Build hook for the optional C extensions; all metadata lives in pyproject.toml.

- `rivet_core.source.mysql._mysqlframe` frames MySQL row packets without the GIL (see
  rivet_core/source/mysql/raw.py); without it the reader uses its pure-Python framing loop.
- `rivet_core.source.postgres._pgbinary` reads and decodes PostgreSQL binary COPY without the GIL
  (see rivet_core/source/postgres/binary.py); without it PostgreSQL reads take the ADBC path.

Both are optional: without a C compiler (or Python headers) the install still succeeds.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rivet_core.source.mysql._mysqlframe",
            sources=["rivet_core/source/mysql/_mysqlframe.c"],
            optional=True,
            # Portable code only (no -march=native: the build may move between machines).
            extra_compile_args=["-O2"],
        ),
        Extension(
            "rivet_core.source.postgres._pgbinary",
            sources=["rivet_core/source/postgres/_pgbinary.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
