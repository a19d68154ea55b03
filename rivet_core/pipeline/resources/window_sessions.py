"""Source sessions reused across a chunked run's windows: a pool of idle sessions.

Why: every window used to open a source session of its own — a connection, which on
PostgreSQL is a new server process with its authentication and settings — so a 32-window
run connected 32 times (a profile of a 32-window run showed 160 connection set-up calls in
the workers). A window's read is still its own transaction with its own snapshot: when a
window's read is done its session ends that transaction (`SourceSession.finish_read`: no
snapshot is held while the window is written and committed) and goes back to the pool, and
the next window to read takes it and starts a new one (`begin_read`). A window that fails
closes its session, rolled back — a broken connection is never handed to another window,
and a retried window gets a healthy or a new one. The runner closes the rest once its windows
are drained (`close`).

A pool rather than one session per thread: a window's read runs on a reader thread of its
own (chunk_commit.py `stage_window`), so the threads that read change from window to window;
the pool holds at most as many sessions as reads ran at once (the export's `parallel`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import best_effort
from rivet_core.source import open_source
from rivet_core.source.base import SourceSession

log = logging.getLogger("rivet.source")


class WindowSessions:
    """The open source sessions of one run's windows: each is either lent to one read or idle."""

    def __init__(self, source_url: str, tuning: ResolvedTuning) -> None:
        self._url, self._tuning = source_url, tuning
        self._lock = threading.Lock()
        self._idle: list[SourceSession] = []
        self._open: list[SourceSession] = []
        #: Sessions opened (connections made), for the tests and the curious.
        self.opened = 0

    @contextlib.contextmanager
    def session(self) -> Iterator[SourceSession]:
        """An idle session with a new read started (else a new session); the read is
        finished and the session returned on a clean exit, the session closed on an error.
        The exit may run on another thread than the entry (a reader abandoned by its window)."""
        with self._lock:
            src = self._idle.pop() if self._idle else None
        try:
            if src is None:
                src = open_source(self._url, self._tuning)
                src.__enter__()  # connects and starts the first read
                with self._lock:
                    self._open.append(src)
                    self.opened += 1
            else:
                src.begin_read()
            yield src
            src.finish_read()
        except BaseException as exc:
            if src is not None:
                self._drop(src, exc)
            raise
        with self._lock:
            self._idle.append(src)

    def _drop(self, src: SourceSession, exc: BaseException) -> None:
        """Close a session whose window failed (rolled back), so no later window reuses it."""
        with self._lock:
            if src in self._open:
                self._open.remove(src)
        # The window's own error is the one to report; the close of its session is a footnote.
        with best_effort("close a failed window's source session", logger=log, level=logging.DEBUG):
            src.__exit__(type(exc), exc, exc.__traceback__)

    def close(self) -> None:
        """Close every session still open (their reads are finished: nothing to roll back)."""
        with self._lock:
            sessions, self._open, self._idle = self._open, [], []
        for src in sessions:  # their reads are finished: a failing close loses nothing
            with best_effort("close a source session kept between windows", logger=log, level=logging.DEBUG):
                src.__exit__(None, None, None)
