"""A range of consecutive time partitions in one run: ONE source query, one unit per window.

An orchestrator that backfills many time partitions (hours, days, weeks, months) in one
run hands the whole range to `TimeRangeRun`. It reads the source once
(`build_time_partitions_query`: `WHERE col >= first AND col < last ORDER BY col`, each row
tagged with its window by the server) and splits the stream by window on the client, so
every row goes to exactly the window its own one-window query would have put it in —
none lost, none twice. Each window is still its own export unit: an `ExportRun` with the
window (its lock `<export>@<key>`, its sub-prefix `<time_column>=<key>/`, its run id,
report and metrics row) that publishes parts → manifest → `_SUCCESS` exactly as a
one-partition run does. Windows are published in time order after the whole read
succeeded and passed its gates: a failed read or gate publishes nothing; a failed publish
stops the range (the windows already published are complete, the rest are finalized as
failed), and a retry re-exports the range (each window replaces its previous manifest).

The object has the phases of an `ExportRun` (`extract` → `gate_schema` → `publish`, or
`fail`) and a `summary` aggregating the windows, so a driver can run either.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rivet_core.config import ExportConfig, RivetConfig
from rivet_core.config.access_columns import require_access_columns
from rivet_core.destination import Destination
from rivet_core.errors import DataIntegrityError
from rivet_core.format import PartRotator, StagedPart
from rivet_core.format.meta_columns import add_meta_columns, meta_schema
from rivet_core.pipeline.facade.schema_drift import merge_drift_verdicts
from rivet_core.pipeline.faults import fault_point
from rivet_core.pipeline.quality import QualityIssue, QualityTracker, quality_error
from rivet_core.pipeline.resources.memory_guard import MemoryGuard
from rivet_core.pipeline.single.job import ExportRun, RunOptions
from rivet_core.pipeline.staging.extract import StagedExtract
from rivet_core.pipeline.staging.stream import stream_to_parts
from rivet_core.reporting.progress import feed_for
from rivet_core.reporting.report import report_dir
from rivet_core.runrecord.summary import RunSummary, new_run_id
from rivet_core.source import batch_rows, open_source
from rivet_core.source.query import PARTITION_INDEX, build_time_partitions_query, dialect_for
from rivet_core.state import StateStore
from rivet_core.unit.resolve import DayWindow, export_destination, is_calendar_column

log = logging.getLogger("rivet.run")


#: Windows per ranged query: each inner bound is one bound parameter (server-side
#: statements allow 65,535); 20,160 windows were measured at 3.5 s for 672 rows.
MAX_WINDOWS = 50_000


@dataclass
class RangeStaged:
    """The staged extraction of a range: one `StagedExtract` per window, in window order."""

    windows: list[StagedExtract]
    schema: pa.Schema
    quality_issues: list[QualityIssue] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(w.rows for w in self.windows)

    @property
    def parts(self) -> list[StagedPart]:
        return [p for w in self.windows for p in w.parts]


def done_bytes(staged: list[list[StagedPart]]) -> int:
    return sum(p.size_bytes for parts in staged for p in parts)


class WindowSplitter:
    """The sink of a range's one read (`stream_to_parts`, pipeline/staging/stream.py): each batch
    cut where its server-tagged window index changes, each piece written to its window's
    rotator with the meta columns, its window's quality tracker fed. Windows arrive in time
    order; a row of a window already read, or outside the range, is refused — nothing is
    published."""

    def __init__(self, run: TimeRangeRun, schema: pa.Schema, trackers: list[QualityTracker | None],
                 position: int, *, exported_at: datetime | None, row_hash: bool) -> None:
        self.run, self.schema, self.trackers, self.position = run, schema, trackers, position
        self.exported_at, self.row_hash = exported_at, row_hash
        self.staged: list[list[StagedPart]] = [[] for _ in run.runs]
        self.current: tuple[int, PartRotator] | None = None
        self.rows_written = 0
        self.bytes_written = 0

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Cut `batch` by window and write each piece (the class docstring's refusals)."""
        index = batch.column(self.position).to_numpy(zero_copy_only=False)
        keep = [i for i in range(batch.num_columns) if i != self.position]
        data = add_meta_columns(batch.select(keep), exported_at=self.exported_at, row_hash=self.row_hash)
        cuts = [0, *(np.flatnonzero(index[1:] != index[:-1]) + 1).tolist(), len(index)]
        for start, end in zip(cuts, cuts[1:], strict=False):
            rotator = self._rotator_for(int(index[start]))
            piece = data.slice(start, end - start)
            tracker = self.trackers[int(index[start])]
            if tracker is not None:
                tracker.observe(piece)
            rotator.write_batch(piece)
            self.rows_written += end - start
        if self.current is not None:
            self.bytes_written = done_bytes(self.staged) + self.current[1].bytes_written

    def _rotator_for(self, window: int) -> PartRotator:
        """The open window's rotator; a new window finishes the previous one first."""
        if self.current is not None and self.current[0] == window:
            return self.current[1]
        run, export = self.run, self.run.export
        if not 0 <= window < len(self.staged) or self.staged[window]:
            raise DataIntegrityError(
                f"export '{export.name}': the ranged read returned a row outside its "
                f"windows or of a window already read (index {window}); nothing was published")
        if self.current is not None:
            if window < self.current[0]:
                raise DataIntegrityError(
                    f"export '{export.name}': the ranged read returned a row of window "
                    f"{run.windows[window].label} after window {run.windows[self.current[0]].label} "
                    "(rows out of time order); nothing was published")
            self.staged[self.current[0]] = self.current[1].finish()
        where = run.runs[window].staging_dir / "attempt0"
        where.mkdir(parents=True, exist_ok=True)
        plan = run.runs[0].plan
        self.current = (window, PartRotator(where, "staged", self.schema, plan.writer_options, plan.max_file_size))
        return self.current[1]

    def finish(self) -> list[list[StagedPart]]:
        """Every window's staged parts, the last one finished."""
        if self.current is not None:
            self.staged[self.current[0]] = self.current[1].finish()
            self.current = None
        return self.staged

    def abort(self) -> None:
        """Drop the open window's unfinished parts (the finished ones are the caller's)."""
        if self.current is not None:
            self.current[1].abort()


def _contiguous(windows: list[DayWindow]) -> list[DayWindow]:
    ordered = sorted(windows, key=lambda w: w.utc_bounds[0])
    for a, b in zip(ordered, ordered[1:], strict=False):
        if a.utc_bounds[1] != b.utc_bounds[0]:
            raise ValueError(f"time windows {a.label} and {b.label} are not adjacent: a ranged run "
                             "reads one contiguous range")
    if len({w.label for w in ordered}) != len(ordered):
        raise ValueError("two time windows of a range share a key")
    return ordered


class TimeRangeRun:
    """Consecutive time windows of one export: one read, one published unit per window."""

    def __init__(self, config: RivetConfig, export: ExportConfig, windows: list[DayWindow],
                 options: RunOptions | None = None) -> None:
        if not windows:
            raise ValueError("a ranged run needs at least one time window")
        if len(windows) > MAX_WINDOWS:
            raise ValueError(f"export '{export.name}': a ranged run reads at most {MAX_WINDOWS:,} time partitions "
                             f"in one query (asked for {len(windows):,}) — run the backfill in ranges of at most "
                             f"{MAX_WINDOWS:,} windows")
        if not export.time_column:
            raise ValueError(f"export '{export.name}': a time partition needs time_column")
        self.config, self.export = config, export
        self.windows = _contiguous(windows)
        options = options or RunOptions()
        base_id = options.run_id or new_run_id(export.name)
        self.state = StateStore.open(config.config_path)
        self.runs: list[ExportRun] = []
        try:
            for w in self.windows:
                # Every window's lock first (a window held by another run refuses the whole
                # range, having written nothing), then the ledger rows.
                self.runs.append(ExportRun(config, export, dataclasses.replace(
                    options, window=w, run_id=f"{base_id}_{w.label}", ledger=False, progress=None),
                    state=self.state))
            self.dest: Destination = export_destination(config, export)
        except BaseException:
            for run in self.runs:
                run.close()
            self.state.close()
            raise
        if options.ledger:
            for run in self.runs:
                run.open_ledger()
        self.progress = options.progress
        self.summary = RunSummary(run_id=base_id, export_name=export.name, mode=export.mode,
                                  format=export.format, compression=self.runs[0].summary.compression)
        self.summary.destination_kind, self.summary.destination_uri = self.dest.kind, self.dest.uri
        self.summary.partition_key = f"{self.windows[0].label}...{self.windows[-1].label}"
        self.summary.orchestrator_run_id = options.orchestrator_run_id
        self.summary.orchestrator = options.orchestrator
        self.finalized = False

    @property
    def run_ids(self) -> list[str]:
        return [r.summary.run_id for r in self.runs]

    def report_path(self, run: ExportRun) -> Path:
        """Where a window's run report (summary.md) is written when it is finalized."""
        return report_dir(self.config.config_dir, run.summary.run_id) / "summary.md"

    # ------------------------------------------------------------------ phases
    def extract(self) -> RangeStaged:
        """The range's one query, split into each window's staged parts (quality gate per
        window: any FAIL raises before anything is published)."""
        plan, export = self.runs[0].plan, self.export
        bounds = [w.utc_bounds[0] for w in self.windows] + [self.windows[-1].utc_bounds[1]]
        sql, params = build_time_partitions_query(dialect_for(plan.engine), export.resolved_query,
                                                  export.time_column or "", bounds,
                                                  export.time_column_type or "timestamp")
        meta = export.meta_columns
        exported_at = datetime.now(UTC) if (meta and meta.exported_at) else None
        row_hash = (meta.row_hash if meta else False) or False
        n = len(self.runs)
        trackers: list[QualityTracker | None] = [None] * n
        feed = feed_for(self.progress)
        with open_source(plan.source_url, plan.tuning) as src:
            source_schema = src.describe(sql, params, plan.overrides, plan.table_hint)
            require_access_columns(export, source_schema.names)  # before any row is read
            if is_calendar_column(export, source_schema):  # a DATE column: the windows' local dates
                dates: list[Any] = [w.local_dates[0] for w in self.windows] + [self.windows[-1].local_dates[1]]
                sql, params = build_time_partitions_query(dialect_for(plan.engine), export.resolved_query,
                                                          export.time_column or "", dates, "timestamp")
            out_schema = pa.schema([f for f in source_schema if f.name != PARTITION_INDEX],
                                   metadata=source_schema.metadata)
            out_schema = meta_schema(out_schema, exported_at is not None, row_hash)
            rows_per_batch = batch_rows(source_schema, plan.tuning)
            for run in self.runs:
                run.summary.source_engine, run.summary.batch_size = src.engine, rows_per_batch
            self.summary.source_engine = src.engine
            if export.quality:
                trackers = [QualityTracker(export.quality, out_schema) for _ in range(n)]
            throttle = plan.tuning.throttle_ms / 1000.0
            guard = MemoryGuard(plan.tuning, export.name)
            splitter = WindowSplitter(self, out_schema, trackers, source_schema.get_field_index(PARTITION_INDEX),
                                      exported_at=exported_at, row_hash=row_hash)

            def shape(batch: pa.RecordBatch) -> pa.RecordBatch:
                guard.check(batch)
                return batch  # the splitter cuts it by window and adds the meta columns

            def after_batch(_batch: pa.RecordBatch) -> None:
                fault_point("during_source_read")
                if throttle:
                    time.sleep(throttle)  # deliberate pacing of the source, not synchronisation

            try:
                stream_to_parts(src.stream(sql, params, source_schema, rows_per_batch), splitter, feed,
                                shape=shape, after_batch=after_batch)
                fault_point("after_source_read")
                staged = splitter.finish()  # I1 for every window from here on
            except BaseException:
                splitter.abort()
                feed.abandon()
                raise
        windows: list[StagedExtract] = []
        failures: list[QualityIssue] = []
        warnings: list[QualityIssue] = []
        for run, parts, tracker in zip(self.runs, staged, trackers, strict=True):
            issues = tracker.evaluate() if tracker is not None else []
            for issue in issues:
                run.summary.journal.record("QualityIssue", severity=issue.severity, message=issue.message)
                if issue.severity == "WARN":
                    run.summary.add_warning(f"quality: {issue.message}")
            run.summary.quality_issues = issues
            if tracker is not None:
                run.summary.quality_passed = not any(i.severity == "FAIL" for i in issues)
            label = run.plan.window.label if run.plan.window else ""
            for issue in issues:
                named = dataclasses.replace(issue, message=f"partition {label}: {issue.message}")
                (failures if issue.severity == "FAIL" else warnings).append(named)
            windows.append(StagedExtract(parts=parts, schema=out_schema, rows=sum(p.rows for p in parts),
                                         quality_issues=issues, staging_dir=run.staging_dir / "attempt0"))
        feed.done(sum(w.rows for w in windows), sum(p.size_bytes for w in windows for p in w.parts))
        self.summary.quality_issues = failures + warnings
        if export.quality:
            self.summary.quality_passed = not failures
        if failures:
            for w in windows:
                for p in w.parts:
                    p.path.unlink(missing_ok=True)
            raise quality_error(export.name, failures)
        log.info("export '%s': one read of %d time windows (%s … %s): %d rows", export.name, n,
                 self.windows[0].label, self.windows[-1].label, sum(w.rows for w in windows))
        return RangeStaged(windows=windows, schema=out_schema, quality_issues=warnings)

    def gate_schema(self, staged: RangeStaged) -> None:
        """The schema-drift facade once per window (the first sees a drift, if any)."""
        try:
            for run, window in zip(self.runs, staged.windows, strict=True):
                run.gate_schema(window)
        finally:
            self._merge_schema_verdict()

    def publish(self, staged: RangeStaged) -> RunSummary:
        """Publish window after window (parts → manifest → `_SUCCESS` each); the first failed
        window stops the range and the later ones are finalized as failed."""
        failed: RunSummary | None = None
        for run, window in zip(self.runs, staged.windows, strict=True):
            if failed is None:
                summary = run.publish(window)
                if summary.status == "failed":
                    failed = summary
            else:
                run.fail(DataIntegrityError(
                    f"export '{self.export.name}': partition {run.plan.window.label if run.plan.window else ''} "
                    f"not published: partition {failed.partition_key} of the same range failed "
                    f"({failed.error_message})"))
        return self._close()

    def fail(self, error: BaseException) -> RunSummary:
        """Finalize every window as failed (nothing of the range was published)."""
        for run in self.runs:
            if not run.finalized:
                run.fail(error)
        return self._close()

    # ------------------------------------------------------------------ helpers
    def _merge_schema_verdict(self) -> None:
        merge_drift_verdicts(self.summary, [r.summary for r in self.runs])

    def _close(self) -> RunSummary:
        if self.finalized:
            raise RuntimeError(f"ranged run {self.summary.run_id} was already finalized")
        self.finalized = True
        self.state.close()
        agg, parts = self.summary, [r.summary for r in self.runs]
        self._merge_schema_verdict()
        failed = [s for s in parts if s.status == "failed"]
        agg.status = ("failed" if failed else "skipped" if all(s.status == "skipped" for s in parts)
                      else "success")
        agg.total_rows = sum(s.total_rows for s in parts)
        agg.files_produced = sum(s.files_produced for s in parts)
        agg.files_committed = sum(s.files_committed for s in parts)
        agg.bytes_written = sum(s.bytes_written for s in parts)
        agg.manifest_parts = [p for s in parts for p in s.manifest_parts]
        agg.manifest_written = all(s.manifest_written for s in parts)
        agg.exit_code = max(s.exit_code for s in parts)
        agg.retries = max(s.retries for s in parts)
        agg.warnings = [w for s in parts for w in s.warnings]
        if failed:
            first = failed[0]
            agg.error_message = f"partition {first.partition_key}: {first.error_message}"
            agg.error_class, agg.report_path = first.error_class, first.report_path
        else:
            agg.report_path = None  # one report per window (report_path), none for the range
        agg.close()
        return agg

    def close(self) -> None:
        for run in self.runs:
            run.close()
        self.state.close()


def range_summaries(run: TimeRangeRun) -> list[RunSummary]:
    """The windows' own summaries (their run ids, reports and counts), in time order."""
    return [r.summary for r in run.runs]


__all__ = ["RangeStaged", "TimeRangeRun", "range_summaries"]
