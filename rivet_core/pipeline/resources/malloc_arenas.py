"""Cap glibc's malloc arenas for a rivet process (`limit_malloc_arenas`).

Why: glibc gives each thread that allocates under contention its own arena (up to 8 per
core) and keeps freed memory in it. An export runs several threads that allocate megabytes
at a time (read-ahead readers fetching 1–4 MiB of rows, chunk workers, the fingerprint
hasher), so each arena ends up holding its own high-water mark. Two arenas keep most of
the saving of one without its malloc lock contention between Python threads
(docs/benchmarks.md "Figures once carried by the pipeline's docstrings"). Arrow's buffers
come from its own allocator (jemalloc/mimalloc) and are not affected.

A user's own `MALLOC_ARENA_MAX` wins (glibc read it at start-up; we do not override it).
Anything other than glibc on Linux: no-op.

The same call also makes jemalloc (bundled with the Linux pyarrow wheels) Arrow's default
pool instead of mimalloc (the encoder's scratch and the Parquet writer's buffers); a user's
`ARROW_DEFAULT_MEMORY_POOL` wins: a lower peak and less CPU than mimalloc on the same run.
A fixed glibc mmap threshold was tried and not kept: it cost system CPU in page faults
(both measured in docs/benchmarks.md, the same section).
"""

from __future__ import annotations

import ctypes
import os
import sys

#: glibc's mallopt parameter number for M_ARENA_MAX (malloc.h).
_M_ARENA_MAX = -8
DEFAULT_ARENAS = 2

_applied = False


def limit_malloc_arenas(arenas: int = DEFAULT_ARENAS) -> bool:
    """Cap the arenas and pick Arrow's pool (once per process, before worker threads start;
    see the module docstring); True if the arena cap was applied."""
    global _applied
    if _applied:
        return False
    if not sys.platform.startswith("linux"):
        return False
    _use_jemalloc_pool()  # Linux wheels bundle jemalloc (measured only there)
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 - glibc only (musl has no M_ARENA_MAX)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    _applied = mallopt(_M_ARENA_MAX, arenas) == 1
    return _applied


def _use_jemalloc_pool() -> None:
    """Arrow's default pool → jemalloc, unless the user chose a pool. Through the variable
    Arrow reads when its default pool is first used, so a command that never touches Arrow
    does not import pyarrow here (start-up time); worker processes inherit it."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"
    pa = sys.modules.get("pyarrow")
    if pa is not None:  # already imported: its default pool may be fixed already
        try:
            pa.set_memory_pool(pa.jemalloc_memory_pool())
        except (NotImplementedError, AttributeError, pa.ArrowException):
            pass  # a build without jemalloc keeps its default


def release_free_memory() -> None:
    """Hand freed heap pages back to the OS (glibc `malloc_trim`, Arrow's pool `release_unused`).

    Why: after an extract the fetch and encode buffers are free but stay in the process (glibc
    trims only the top of the heap), and the commit step that follows imports and allocates
    anew, so the run's peak RSS was the extract's high-water mark plus the commit's. Measured
    on 1 M bench `orders` rows: RSS at the end of the extract 221 → 132 MB, the run's peak
    328 → 282 MB. Best effort; no-op off glibc."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


__all__ = ["DEFAULT_ARENAS", "limit_malloc_arenas", "release_free_memory"]
