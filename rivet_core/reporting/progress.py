"""Run progress: a small model fed by the extraction loop, rendered by pluggable sinks.

Why a model of its own: the same numbers (rows, bytes staged, elapsed, rate, ETA from a row
estimate, chunk n/N) must reach three very different places — a live single line on a
terminal, periodic log lines when stderr is a file or a pipe, and an orchestrator's run log — and
the extraction loop must not know which. The loop updates a `ProgressFeed` once per *batch*
(never per row), the `ProgressTracker` aggregates the feeds of concurrent chunk workers,
and each sink decides for itself how often it renders (throttled by its own interval).

Sinks:
- `TtySink`: carriage-return updates of one line on a terminal (~5/s), cleared at the end;
- `LineSink`: one plain line every N seconds through any callable — `logging` for the CLI,
  an orchestrator's run-log method (the adapter passes the callable in).

`RIVET_PROGRESS_INTERVAL` (seconds, float) overrides every sink's interval; tests set it to
0 or 0.01 so that each batch renders and no test needs to sleep.

The row estimate behind the ETA comes from the run, not from here: the runner that opened
the source for the export asks it once on that session (`introspect.estimate.export_row_estimate`)
and hands the figure to `ProgressTracker.set_expected_rows` — this module opens no connection.
A tracker built with `estimate=False` (a run that reads a slice) ignores it.

The math (`rate`, `percent`, `eta_seconds`) is pure and total: never negative, never
infinite, percent capped at 100 when the estimate was too low.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol

from rivet_core.errors import best_effort

log = logging.getLogger("rivet.progress")

#: Logger of the plain progress lines (the CLI raises it to INFO when it picks the log sink).
PROGRESS_LOGGER = "rivet.progress"
TTY_INTERVAL_S = 0.2
LOG_INTERVAL_S = 10.0
PROGRESS_MODES = ("auto", "tty", "log", "none")


# ------------------------------------------------------------------------------ math
def rate(rows: int, elapsed_s: float) -> float:
    """Rows per second; 0.0 before any time has passed (never inf or NaN)."""
    if rows <= 0 or not (elapsed_s > 0) or not math.isfinite(elapsed_s):
        return 0.0
    value = rows / elapsed_s
    return value if math.isfinite(value) else 0.0


def percent(rows: int, expected: int | None) -> float | None:
    """Share of the estimate done, 0–100 (capped: estimates are often low); None if unknown."""
    if not expected or expected <= 0:
        return None
    return max(0.0, min(100.0, 100.0 * rows / expected))


def eta_seconds(rows: int, expected: int | None, rows_per_s: float) -> float | None:
    """Seconds left at the current rate; 0 once the estimate is reached; None if unknown."""
    if not expected or expected <= 0:
        return None
    remaining = expected - rows
    if remaining <= 0:
        return 0.0
    if not (rows_per_s > 0) or not math.isfinite(rows_per_s):
        return None
    value = remaining / rows_per_s
    return value if math.isfinite(value) else None


# --------------------------------------------------------------------------- snapshot
@dataclass(frozen=True)
class ProgressSnapshot:
    """What a sink renders: one consistent reading of the tracker."""

    export_name: str
    rows: int
    bytes_written: int
    elapsed_s: float
    expected_rows: int | None = None
    chunks_done: int | None = None
    chunks_total: int | None = None
    finished: bool = False

    @property
    def rate(self) -> float:
        return rate(self.rows, self.elapsed_s)

    @property
    def percent(self) -> float | None:
        return percent(self.rows, self.expected_rows)

    @property
    def eta_s(self) -> float | None:
        return eta_seconds(self.rows, self.expected_rows, self.rate)

    def line(self) -> str:
        """The one-line rendering shared by every sink (no credentials: numbers only)."""
        if self.finished:
            return (f"{self.export_name}: done, {self.rows:,} rows, {_mb(self.bytes_written)} in "
                    f"{_duration(self.elapsed_s)} ({self.rate:,.0f} rows/s)")
        rows = f"{self.rows:,}"
        if self.expected_rows:
            rows += f" / ~{self.expected_rows:,}"
        parts = [f"{rows} rows"]
        pct = self.percent
        if pct is not None:
            parts[0] += f" ({pct:.0f}%)"
        parts += [_mb(self.bytes_written), f"{self.rate:,.0f} rows/s"]
        eta = self.eta_s
        parts.append(f"ETA {_duration(eta)}" if eta is not None else "ETA ?")
        if self.chunks_total:
            parts.append(f"chunk {self.chunks_done or 0}/{self.chunks_total}")
        parts.append(f"elapsed {_duration(self.elapsed_s)}")
        return f"{self.export_name}: " + ", ".join(parts)


def _mb(nbytes: int) -> str:
    """Human size in decimal units (what `ls -h --si` and S3 consoles show)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{max(0, nbytes)} B"


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


# ------------------------------------------------------------------------------ sinks
class ProgressSink(Protocol):
    #: Minimum seconds between two renders (the tracker enforces it).
    interval: float

    def render(self, snap: ProgressSnapshot) -> None: ...

    def close(self, snap: ProgressSnapshot) -> None: ...


def interval_override(default: float) -> float:
    """`RIVET_PROGRESS_INTERVAL` if set to a number ≥ 0, else `default`."""
    raw = os.environ.get("RIVET_PROGRESS_INTERVAL", "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        log.warning("RIVET_PROGRESS_INTERVAL=%r is not a number of seconds; using %s", raw, default)
        return default
    return value if value >= 0 and math.isfinite(value) else default


class TtySink:
    """A live line on a terminal: `\\r` + text + erase-to-end-of-line, cleared at the end.

    The last rendering before the clear carries the final totals, so a terminal recording
    (or a test reading the pty) sees them; the per-export summary block follows anyway.
    """

    def __init__(self, stream: IO[str] | None = None, interval: float | None = None) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval_override(TTY_INTERVAL_S) if interval is None else interval
        self._drawn = False
        self._handlers: list[logging.Handler] = []

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # terminal gone / closed: progress is best effort
            pass

    def attach_to_logging(self) -> None:
        """Erase the live line before any log record reaches the same terminal, so a warning
        in mid-run starts on a clean line instead of being glued to the progress text (the
        next update redraws it)."""
        for handler in logging.getLogger().handlers:
            if getattr(handler, "stream", None) is self.stream:
                handler.addFilter(self._erase_before_record)
                self._handlers.append(handler)

    def _erase_before_record(self, _record: logging.LogRecord) -> bool:
        if self._drawn:
            self._drawn = False
            self._write("\r\x1b[K")
        return True

    def render(self, snap: ProgressSnapshot) -> None:
        width = max(20, shutil.get_terminal_size((120, 24)).columns - 1)
        self._write("\r" + snap.line()[:width] + "\x1b[K")
        self._drawn = True

    def close(self, snap: ProgressSnapshot) -> None:
        self.render(snap)
        self._write("\r\x1b[K")
        self._drawn = False
        for handler in self._handlers:
            handler.removeFilter(self._erase_before_record)
        self._handlers.clear()


class LineSink:
    """Plain lines through `emit` (a logger method, or an orchestrator's run-log method)."""

    def __init__(self, emit: Callable[[str], Any], interval: float | None = None) -> None:
        self.emit = emit
        self.interval = interval_override(LOG_INTERVAL_S) if interval is None else interval

    def render(self, snap: ProgressSnapshot) -> None:
        # A failing sink must never fail the export; DEBUG, since the sink may be the log itself.
        with best_effort("progress sink", logger=log, level=logging.DEBUG):
            self.emit(snap.line())

    def close(self, snap: ProgressSnapshot) -> None:
        self.render(snap)


# ---------------------------------------------------------------------------- tracker
class ProgressFeed:
    """One stream of batches (an extraction attempt, a chunk window) reporting its running
    totals. Absolute totals, not deltas: Parquet only grows on disk at row-group flushes, so
    the writer's byte count is the truth and deltas would drift."""

    __slots__ = ("_tracker", "rows", "nbytes", "_open")

    def __init__(self, tracker: ProgressTracker | None) -> None:
        self._tracker = tracker
        self.rows = 0
        self.nbytes = 0
        self._open = tracker is not None

    def update(self, rows: int, nbytes: int) -> None:
        """Running totals of this stream (call once per batch)."""
        if self._open:
            self.rows, self.nbytes = rows, nbytes
            assert self._tracker is not None
            self._tracker._changed()

    def done(self, rows: int, nbytes: int) -> None:
        """The stream finished: its final totals count towards the run for good."""
        if self._open:
            self._open = False
            assert self._tracker is not None
            self._tracker._close_feed(self, rows, nbytes)

    def abandon(self) -> None:
        """The stream failed (it will be retried): its rows no longer count."""
        if self._open:
            self._open = False
            assert self._tracker is not None
            self._tracker._close_feed(self, 0, 0)


#: A feed that ignores everything (no tracker): callers never need an `if`.
NULL_FEED = ProgressFeed(None)


def feed_for(tracker: ProgressTracker | None) -> ProgressFeed:
    """A new feed of `tracker`, or the no-op feed when progress is off."""
    return tracker.feed() if tracker is not None else NULL_FEED


class ProgressTracker:
    """Aggregates feeds (thread-safe: parallel chunk workers) and drives the sinks."""

    def __init__(self, export_name: str, sinks: Sequence[ProgressSink], *, expected_rows: int | None = None,
                 clock: Callable[[], float] = time.monotonic, wants_estimate: bool = False) -> None:
        self.export_name = export_name
        self.sinks = list(sinks)
        self.expected_rows = expected_rows
        #: Whether the run should hand over its row estimate (`set_expected_rows`): only when
        #: it reads the whole table or query — a slice would make a whole-table ETA lie.
        self.wants_estimate = wants_estimate
        self.clock = clock
        self.started = clock()
        self.chunks_done: int | None = None
        self.chunks_total: int | None = None
        self.finished = False
        self._lock = threading.Lock()
        self._feeds: set[ProgressFeed] = set()
        self._closed_rows = 0
        self._closed_bytes = 0
        self._due = [self.started] * len(self.sinks)

    # -- producers -------------------------------------------------------------------
    def feed(self) -> ProgressFeed:
        feed = ProgressFeed(self)
        with self._lock:
            self._feeds.add(feed)
        return feed

    def set_expected_rows(self, rows: int | None) -> None:
        """The run's row estimate (None: unknown ETA); ignored unless `wants_estimate`."""
        if not self.wants_estimate:
            return
        with self._lock:
            self.expected_rows = rows
        self._changed()

    def set_chunks(self, total: int, done: int = 0) -> None:
        """A chunked run: N windows, `done` of them already completed (resume)."""
        with self._lock:
            self.chunks_total, self.chunks_done = total, done
        self._changed()

    def chunk_done(self) -> None:
        with self._lock:
            self.chunks_done = (self.chunks_done or 0) + 1
        self._changed()

    def _close_feed(self, feed: ProgressFeed, rows: int, nbytes: int) -> None:
        with self._lock:
            self._feeds.discard(feed)
            self._closed_rows += rows
            self._closed_bytes += nbytes
        self._changed()

    # -- rendering -------------------------------------------------------------------
    def snapshot(self) -> ProgressSnapshot:
        with self._lock:
            return self._snapshot_locked()

    def _snapshot_locked(self) -> ProgressSnapshot:
        rows = self._closed_rows + sum(f.rows for f in self._feeds)
        nbytes = self._closed_bytes + sum(f.nbytes for f in self._feeds)
        return ProgressSnapshot(
            export_name=self.export_name, rows=rows, bytes_written=nbytes,
            elapsed_s=max(0.0, self.clock() - self.started), expected_rows=self.expected_rows,
            chunks_done=self.chunks_done, chunks_total=self.chunks_total, finished=self.finished)

    def _changed(self) -> None:
        """Render on every sink whose interval has passed (cheap when none has)."""
        if not self.sinks or self.finished:
            return
        now = self.clock()
        if now < min(self._due):
            return
        with self._lock:
            snap = self._snapshot_locked()
            for i, sink in enumerate(self.sinks):
                if now >= self._due[i]:
                    self._due[i] = now + sink.interval
                    sink.render(snap)

    def finish(self) -> ProgressSnapshot:
        """Render the final totals once on every sink and close them (idempotent)."""
        with self._lock:
            if self.finished:
                return self._snapshot_locked()
            self.finished = True
            snap = self._snapshot_locked()
            for sink in self.sinks:
                sink.close(snap)
        return snap


# --------------------------------------------------------------------------- wiring
def wants_estimate(export: Any) -> bool:
    """Only exports that read the whole table or query (full, chunked) get an ETA: an
    incremental or time-window run reads a slice the estimate cannot see, so a whole-table
    figure would make the ETA lie."""
    return export.mode in ("full", "chunked")


def resolve_mode(mode: str, stream: IO[str] | None = None) -> str:
    """`auto` → `tty` when `stream` (stderr) is a terminal, else `log`."""
    if mode not in PROGRESS_MODES:
        from rivet_core.errors import ConfigError

        raise ConfigError(f"--progress must be one of {', '.join(PROGRESS_MODES)}, got '{mode}'")
    if mode != "auto":
        return mode
    stream = stream or sys.stderr
    try:
        return "tty" if stream.isatty() else "log"
    except (AttributeError, ValueError):
        return "log"


def cli_tracker(config: Any, export: Any, mode: str) -> ProgressTracker | None:
    """The tracker of one `rivet run` export for a resolved `--progress` mode (None = off).

    Progress always goes to stderr (the TTY line) or logging (which writes to stderr), so
    stdout stays the data stream or the single `--json` document.
    """
    if mode == "none":
        return None
    if export.destination.type == "stdout" and mode == "tty":
        mode = "log"  # data on stdout, progress on a shared terminal would interleave
    sink: ProgressSink
    if mode == "tty":
        sink = tty = TtySink(sys.stderr)
        tty.attach_to_logging()
    else:
        logger = logging.getLogger(PROGRESS_LOGGER)
        if not os.environ.get("RIVET_LOG") and logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)  # progress lines are wanted at the default verbosity
        sink = LineSink(logger.info)
    return ProgressTracker(export.name, [sink], wants_estimate=wants_estimate(export))


def callback_tracker(config: Any, export: Any, emit: Callable[[str], Any],
                     interval: float | None = None, *, estimate: bool = True) -> ProgressTracker:
    """A tracker that reports plain lines through `emit` (an orchestrator's run log).
    `estimate=False` when the run reads only a slice (a batch of chunk windows): a
    whole-table estimate would make its ETA lie."""
    return ProgressTracker(export.name, [LineSink(emit, interval)],
                           wants_estimate=estimate and wants_estimate(export))


__all__ = [
    "LineSink", "NULL_FEED", "PROGRESS_MODES", "ProgressFeed", "ProgressSink", "ProgressSnapshot",
    "ProgressTracker", "TtySink", "callback_tracker", "cli_tracker", "eta_seconds", "wants_estimate",
    "feed_for", "percent", "rate", "resolve_mode",
]
