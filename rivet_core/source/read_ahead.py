"""Read the next record batch on a thread while the consumer works on the current one.

Why: an export is read → convert → encode → write. The fast read paths spend their time in
code that releases the GIL (ADBC's C++ decode of binary COPY rows, the C framing and
numpy/Arrow casts of MySQL rows), and the Parquet encode + zstd in the consumer releases
the GIL too, so on two cores reading batch N+1 while batch N is encoded takes the encode
(a third to a half of the client's CPU) off the critical path. Measured on the 5 M-row bench
`orders` table (PostgreSQL, ADBC path): 20.1 s → 16.0 s wall.

Bounded memory: one item being consumed plus, produced or queued, at most `depth` items
and — when a `budget_bytes` and `size_of` are given — no new item once the queued ones
hold `budget_bytes` (one item is always allowed, however large). Why a byte budget and not
just one item: the consumer works in row groups, several batches at a time; a reader that
may only be one batch ahead idles while a row group is encoded, the socket fills and the
server stalls. Measured on the 5 M-row bench `orders` (PostgreSQL, ADBC): one batch ahead
16.2–18.8 s, four batches ahead 14.2–15.0 s (same machine, alternating runs).

Thread ownership: the source iterator runs only on the reader thread until `close()`,
which stops it after the batch in flight (calling `cancel`, when given, to interrupt a
blocking read), waits for the thread, and then closes the iterator on the caller's thread —
so a generator's cleanup (drain a result, end a transaction) runs where the connection is
used afterwards, never concurrently with it.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from rivet_core.lazy_modules import pa

_T = TypeVar("_T")
_END = object()

#: Record batches a reader may hold ahead of the consumer: at most 8, and none beyond the
#: first once those queued hold 32 MiB. Measured (bench `orders`, PG/ADBC, 4 MiB batches):
#: 16 MiB 14.7–15.0 s, 32 MiB 14.3–14.5 s, 48 MiB 14.3 s; peak RSS 336 / 348 / 360–383 MB.
#: The budget is per process: readers running at the same time (chunked `parallel: N`)
#: share it, so N streams do not hold N × 32 MiB (each keeps its one-item minimum).
BATCH_DEPTH = 8
BATCH_BUDGET_BYTES = 32 * 1024 * 1024

_budget_users = 0  # ReadAhead instances with a byte budget that are not closed yet
_budget_lock = threading.Lock()


def _share(budget: int) -> int:
    with _budget_lock:
        return budget // max(_budget_users, 1)


def batch_budget() -> dict[str, Any]:
    """`ReadAhead` keyword arguments for record-batch sources (the bound above)."""
    return {"depth": BATCH_DEPTH, "budget_bytes": BATCH_BUDGET_BYTES, "size_of": _batch_nbytes}


def _batch_nbytes(batch: pa.RecordBatch) -> int:
    return int(batch.nbytes)


class ReadAhead(Generic[_T]):
    """Iterate `source` ahead on a thread (see module doc). Use as a context manager, or
    call `close()`; iterating yields the items and re-raises the source's exception at the
    point it happened."""

    def __init__(self, source: Iterator[_T], *, cancel: Callable[[], None] | None = None,
                 depth: int = 1, budget_bytes: int | None = None,
                 size_of: Callable[[_T], int] | None = None, name: str = "rivet-read-ahead") -> None:
        if depth < 1:
            raise ValueError(f"read-ahead depth must be >= 1, got {depth}")
        self._source = source
        self._cancel = cancel
        self._depth = depth
        self._budget = budget_bytes if size_of is not None else None
        self._size_of = size_of
        self._ready: collections.deque[tuple[object, int]] = collections.deque()
        self._queued_bytes = 0
        # Items produced or being produced beyond the one the consumer holds: the reader
        # counts an item before producing it, so `depth` bounds items *in flight*.
        self._in_flight = 0
        self._stop = False
        self._closed = False
        self._cond = threading.Condition()
        if self._budget is not None:
            global _budget_users
            with _budget_lock:
                _budget_users += 1
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _may_produce(self) -> bool:
        if self._in_flight >= self._depth:
            return False
        return (self._budget is None or self._in_flight == 0
                or self._queued_bytes < _share(self._budget))

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._stop or self._may_produce())
                    if self._stop:
                        return
                    self._in_flight += 1
                try:
                    item: object = next(self._source)
                except StopIteration:
                    item = _END
                size = self._size_of(item) if self._size_of is not None and item is not _END else 0  # type: ignore[arg-type]
                with self._cond:
                    self._ready.append((item, size))
                    self._queued_bytes += size
                    self._cond.notify_all()
                if item is _END:
                    return
        except BaseException as exc:  # error boundary: re-raised on the consumer's thread
            with self._cond:
                self._ready.append((exc, 0))
                self._cond.notify_all()

    def __iter__(self) -> Iterator[_T]:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._ready))
                item, size = self._ready.popleft()
                self._queued_bytes -= size
                self._in_flight -= 1
                self._cond.notify_all()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]

    def close(self) -> None:
        """Stop the reader thread, wait for it, then close the source on this thread."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
            release, self._closed = self._budget is not None and not self._closed, True
        if release:
            global _budget_users
            with _budget_lock:
                _budget_users -= 1
        if self._thread.is_alive() and self._cancel is not None:
            self._cancel()
        self._thread.join()
        with self._cond:
            self._ready.clear()
            self._queued_bytes = 0
        close = getattr(self._source, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> ReadAhead[_T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
