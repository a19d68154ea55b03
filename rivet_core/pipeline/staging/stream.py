"""`stream_to_parts`: the one batch → staged-file loop every runner's read goes through.

A single-query extract (extract.py), a chunk window (facade/chunk_commit.py `stage_window`)
and a time range's one read split by window (pipeline/time_range.py) each stream a source's
batches into staged part files. The order of the steps is the same for all of them and lives
here: each batch as read is checked and shaped by the runner (`shape`: the memory guard, the
cursor's or the key's high-water mark, helper columns stripped, meta columns added, the
quality tracker fed), written by its sink (a `PartRotator`, or a range's splitter that cuts
the batch at window boundaries), the progress feed told the running totals, then
`after_batch` (a fault point, the governor's or the throttle's pause).

Finishing the parts (I1) and aborting them on an error stay with the caller: each knows what
else must hold before its parts count as staged (a reconcile count, a quality verdict), and a
facade's commit order (docs/adr/0001-write-ordering-facades.md) is not touched by the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from rivet_core.reporting.progress import ProgressFeed


class PartSink(Protocol):
    """Where shaped batches are written, with the running totals the progress feed reports."""

    @property
    def rows_written(self) -> int: ...

    @property
    def bytes_written(self) -> int: ...

    def write_batch(self, batch: pa.RecordBatch) -> None: ...


def stream_to_parts(batches: Iterable[pa.RecordBatch], sink: PartSink, feed: ProgressFeed, *,
                    shape: Callable[[pa.RecordBatch], pa.RecordBatch],
                    after_batch: Callable[[pa.RecordBatch], None] | None = None) -> None:
    """Write every batch of `batches` to `sink` in the runners' one order (module docstring).

    The source's stream is closed here, on the way out, whatever ends the loop: an error (or
    an interrupt) raised in this frame keeps the frame, and with it the stream, alive in its
    traceback, so without the close the caller's session would end its read transaction while
    the server is still sending the result — the rollback then waits forever behind the
    PostgreSQL COPY in flight, and a run terminated mid-read never ended."""
    try:
        for batch in batches:
            shaped = shape(batch)
            sink.write_batch(shaped)
            feed.update(sink.rows_written, sink.bytes_written)
            if after_batch is not None:
                after_batch(shaped)
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()
