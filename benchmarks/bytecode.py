"""Byte-code for the code under test, compiled before anything is timed.

An installed package has its byte-code (pip compiles a wheel at install; scripts/bootstrap.sh
compiles this checkout). A checkout run from a shell that sets PYTHONDONTWRITEBYTECODE has
none, and then every `rivet` process compiles the ~130 modules of its run path again: 0.10 s
of a 1 M-row export's 2.5 s (docs/benchmarks.md "Byte-code before timing"). Timing that
would measure the shell, not rivet, so every scenario compiles the trees it runs first.
Only stale or missing files are compiled (compileall compares the source's mtime in whole
seconds; a file it misses is still correct: the import compiles it in memory).
"""

from __future__ import annotations

import compileall
from pathlib import Path

PACKAGES = ("rivet_core", "rivet_dagster")


def compile_tree(root: Path) -> None:
    """Compile the project's packages under `root` (a checkout) in place; raises on a file
    that does not compile, which would fail the run being timed anyway. In this process, not
    a pool: forking a process that holds threads and connections (a test worker's Celery
    client did) can hang the child, and ~230 files take well under a second."""
    for package in PACKAGES:
        path = root / package
        if path.is_dir() and not compileall.compile_dir(str(path), quiet=1):
            raise SystemExit(f"byte-compiling {path} failed (see above)")
