"""Start writing a staged part's final bytes to disk while the rest of it is still encoded.

I1 has the writer fsync a part before anything may publish it (rivet_core/format/base.py
`_sync_and_close`). Left to itself the kernel writes dirty pages back lazily, so that fsync
found most of the file still in memory and waited for the disk on the run's critical path:
0.14 s of a 1 M-row export's 4.5 s here (docs/benchmarks.md "Parquet dictionaries only
where values repeat"). The part's fingerprinting thread (checksums.py `AppendHasher`) reads
every range the writer declares final; after hashing one it asks the kernel to start
writing that range back (`sync_file_range(SYNC_FILE_RANGE_WRITE)`: it queues the write and
returns, it waits for nothing), so by the final fsync only the last row group is left.

This only moves when the disk write starts; durability still rests on the fsync, which is
why a platform without `sync_file_range` (not Linux) or a failing call changes nothing but
the timing.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

#: <linux/fs.h>: start writeback of the dirty pages in the range, without waiting.
SYNC_FILE_RANGE_WRITE = 2


@functools.cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """libc's sync_file_range, or None where there is none (ctypes releases the GIL for
    the call)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # here, not at import: off the run path before the first query

    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def start_writeback(fd: int, offset: int, length: int) -> bool:
    """Ask the kernel to start writing bytes [offset, offset + length) of `fd` to disk;
    whether it accepted (False where it cannot: see the module docstring)."""
    fn = _sync_file_range()
    if fn is None or length <= 0:
        return False
    return fn(fd, offset, length, SYNC_FILE_RANGE_WRITE) == 0
