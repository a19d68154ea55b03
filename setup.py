"""Build hook for the optional C extensions; all metadata lives in pyproject.toml.

- `rivet_core.source.mysql._mysqlframe` frames MySQL row packets without the GIL (see
  rivet_core/source/mysql/raw.py); without it the reader uses its pure-Python framing loop.
- `rivet_core.source.postgres._pgbinary` reads and decodes PostgreSQL binary COPY without the GIL
  (see rivet_core/source/postgres/binary.py); without it PostgreSQL reads take the ADBC path.

- `rivet_core.manifest._colsum` hashes Arrow columns for the Form B column checksums without
  Python objects (see rivet_core/manifest/xxh3_sum.py and column_checksums.py); without it
  the same values are computed one cell at a time through the `xxhash` package (and pandas
  for the older `rivet-colsum-v1`).

All three are optional: without a C compiler (or Python headers) the install still succeeds.
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
        Extension(
            "rivet_core.manifest._colsum",
            sources=["rivet_core/manifest/_colsum.c"],
            # xxHash 0.8.3, vendored unchanged (BSD-2-Clause): Rivet's `xxh3-64-sum-v2`.
            depends=["rivet_core/manifest/vendor/xxhash.h"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
