"""A background thread that follows a file while its writer appends to it.

Two jobs read a part while it is being encoded instead of after: fingerprinting it
(rivet_core/destination/checksums.py `AppendHasher`) and uploading it to S3
(rivet_core/destination/s3_multipart.py `EarlyUpload`). Both rest on the same fact — the
Parquet and CSV writers only append (rivet_core/format/base.py), so once the writer says
its first `n` bytes are flushed they are final — and on the same hand-off: the writer's
thread raises a *target* (`advance`), the follower's thread reads up to it through its own
descriptor (`os.pread`: page-cache reads, no seek shared with the writer) and waits for the
next one. This class holds that hand-off once; a subclass says what following means
(`_follow`) and how it ends.
"""

from __future__ import annotations

import os
import threading
from os import PathLike


class FileFollower:
    """The descriptor, the writer's target, the condition they share, and the thread.

    A subclass sets its own fields, then calls `_start()` at the end of its `__init__` (the
    thread must not see a half-built object). `_follow` runs on the thread; whatever it
    raises is kept in `_error` for the writer's side to re-raise (a follower never raises on
    a thread nobody joins)."""

    thread_name = "rivet-file-follower"

    def __init__(self, path: PathLike[str] | str) -> None:
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self._target = 0
        self._cancelled = False
        self._error: BaseException | None = None
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._guarded, name=self.thread_name, daemon=True)

    def _start(self) -> None:
        self._thread.start()

    # -- the writer's side -----------------------------------------------------------------
    def advance(self, flushed: int) -> None:
        """The first `flushed` bytes of the file are final: follow them when convenient."""
        with self._cond:
            if flushed > self._target:
                self._target = flushed
                self._cond.notify()

    def _cancel(self) -> bool:
        """Ask the thread to stop and wait for it; False when it was cancelled already."""
        with self._cond:
            if self._cancelled:
                return False
            self._cancelled = True
            self._cond.notify()
        self._thread.join()
        return True

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    # -- the follower's side -----------------------------------------------------------------
    def _guarded(self) -> None:
        try:
            self._follow()
        except BaseException as exc:  # error boundary: re-raised on the writer's side
            self._error = exc

    def _follow(self) -> None:
        raise NotImplementedError
