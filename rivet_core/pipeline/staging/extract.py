"""Extract one export unit to staged files, with the quality gate applied on staged data.

Streams the unit's query as Arrow batches (memory bounded by the batch, never the
table), strips synthetic columns, adds meta columns, feeds the quality tracker and the
part rotator, and remembers the cursor high-water value (last non-null cursor of the
last batch: the query is ordered by the cursor). Between batches the source governor
(pipeline/resources/governor.py) paces the read — a pause only under source pressure, or the fixed
`throttle_ms` the user set; what it decided lands in `summary.governor`. After the stream
ends it finishes the
writers (I1) and evaluates the quality gate — a FAIL raises `DataIntegrityError` before
anything is published. Nothing here touches the destination or the state store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from rivet_core.config.access_columns import require_access_columns
from rivet_core.destination import Destination
from rivet_core.format import PartRotator, StagedPart, file_extension
from rivet_core.format.base import PartUpload
from rivet_core.format.meta_columns import add_meta_columns, meta_schema
from rivet_core.lazy_modules import pa
from rivet_core.manifest import data_key
from rivet_core.pipeline.faults import fault_point
from rivet_core.pipeline.quality import QualityTracker, quality_error
from rivet_core.pipeline.resources.governor import SourceGovernor
from rivet_core.pipeline.resources.malloc_arenas import release_free_memory
from rivet_core.pipeline.resources.memory_guard import MemoryGuard
from rivet_core.pipeline.staging.part_names import free_stem, part_stem
from rivet_core.pipeline.staging.row_estimate import estimate_for_progress
from rivet_core.pipeline.staging.run_reconcile import count_in_snapshot
from rivet_core.pipeline.staging.stream import stream_to_parts
from rivet_core.reporting.progress import ProgressTracker, feed_for
from rivet_core.runrecord.summary import RunSummary
from rivet_core.source import batch_rows, last_cursor_in_batch, open_source, render_cursor_value
from rivet_core.unit.resolve import ResolvedUnit, calendar_window_params

log = logging.getLogger("rivet.extract")


@dataclass
class StagedExtract:
    """What an extraction produced: finished staged parts and what we learned on the way."""

    parts: list[StagedPart]
    schema: pa.Schema
    rows: int
    cursor_high: str | None = None
    quality_issues: list[Any] = field(default_factory=list)
    staging_dir: Path | None = None
    #: `--reconcile`: the source COUNT(*) of the unit's query, taken in the same snapshot as
    #: the rows (None when not asked).
    source_row_count: int | None = None
    #: The parts' name stem when they were uploaded while written (the publish step must use
    #: the keys the uploads in flight have); None: the publish step names them.
    part_stem: str | None = None


def _strip(batch: pa.RecordBatch, names: tuple[str, ...]) -> pa.RecordBatch:
    if not names:
        return batch
    keep = [i for i, f in enumerate(batch.schema) if f.name not in names]
    return batch.select(keep)


def _early_uploads(dest: Destination | None, export_name: str, fmt: str, layout: str = "data"
                   ) -> tuple[str, Callable[[str, Path], PartUpload | None] | None]:
    """The staged parts' name stem, and how to start a part's upload while it is written when
    `dest` can (`Destination.begin_early_upload`: the upload overlaps the encoding; it is
    completed by the publish step's `write_part_file`, never here)."""
    if dest is None or not dest.supports_early_upload:
        return "staged", None
    ext = file_extension(fmt)
    stem = free_stem(dest, part_stem(export_name), ext, None, layout)

    def begin(name: str, path: Path) -> PartUpload | None:
        return cast("PartUpload | None", dest.begin_early_upload(data_key(name, layout), path))
    return stem, begin


def extract_to_staging(plan: ResolvedUnit, summary: RunSummary, staging_dir: Path,
                       progress: ProgressTracker | None = None, *, reconcile: bool = False,
                       dest: Destination | None = None) -> StagedExtract:
    """Run the unit's query into staged part files; raise on a failed quality gate.
    `progress` (optional) is told the running totals once per batch. `reconcile`: once the
    stream is drained, count the same query (same WHERE, same parameters) on the same
    session — one snapshot, so rows committed meanwhile are in neither (run_reconcile.py).
    `dest` (optional): the destination, when its parts may start uploading while they are
    written (S3); nothing becomes visible there before the publish step."""
    export = plan.export
    staging_dir.mkdir(parents=True, exist_ok=True)
    meta = export.meta_columns
    exported_at = datetime.now(UTC) if (meta and meta.exported_at) else None
    row_hash = (meta.row_hash if meta else False) or False
    cursor_value: Any = None
    cursor_type: pa.DataType | None = None
    source_row_count: int | None = None
    with open_source(plan.source_url, plan.tuning) as src:
        summary.source_engine = src.engine
        source_schema = src.describe(plan.sql, plan.params, plan.overrides, plan.table_hint)
        require_access_columns(export, source_schema.names)  # before any row is read
        estimate_for_progress(src, export, progress)  # the ETA, on this session (no second connection)
        params = calendar_window_params(plan, source_schema) or plan.params  # a DATE time column
        out_schema = pa.schema([f for f in source_schema if f.name not in plan.strip_columns],
                               metadata=source_schema.metadata)
        out_schema = meta_schema(out_schema, exported_at is not None, row_hash)
        rows_per_batch = batch_rows(source_schema, plan.tuning)
        summary.batch_size = rows_per_batch
        stem, early = _early_uploads(dest, export.name, export.format, export.layout)
        rotator = PartRotator(staging_dir, stem, out_schema, plan.writer_options, plan.max_file_size,
                              early_upload=early)
        tracker = QualityTracker(export.quality, out_schema) if export.quality else None
        governor = SourceGovernor(plan.tuning, src.pressure_probe)
        guard = MemoryGuard(plan.tuning, export.name)
        feed = feed_for(progress)

        def shape(batch: pa.RecordBatch) -> pa.RecordBatch:
            nonlocal cursor_value, cursor_type
            if plan.cursor_column is not None and batch.num_rows:
                value = last_cursor_in_batch(batch, plan.cursor_column)
                if value is not None:
                    cursor_value = value
                    cursor_type = batch.schema.field(plan.cursor_column).type
            guard.check(batch)
            batch = add_meta_columns(_strip(batch, plan.strip_columns), exported_at=exported_at, row_hash=row_hash)
            if tracker is not None:
                tracker.observe(batch)
            return batch

        def after_batch(batch: pa.RecordBatch) -> None:
            fault_point("during_source_read")  # mid-stream: the source cursor is open
            governor.after_batch(batch.num_rows)

        try:
            governor.start()
            stream_to_parts(governor.timed(src.stream(plan.sql, params, source_schema, rows_per_batch)), rotator,
                            feed, shape=shape, after_batch=after_batch)
            fault_point("after_source_read")
            parts = rotator.finish()  # I1: every staged part is complete from here on
            release_free_memory()  # the commit's read-back must not stack on the extract's peak
            if reconcile:
                source_row_count = count_in_snapshot(src, plan.sql, params)
        except BaseException:
            rotator.abort()
            feed.abandon()
            raise
        finally:
            governor.close()
            summary.governor = governor.stats.as_dict()
        summary.warn_mapped_to_null(src.mapped_to_null)
    rows = sum(p.rows for p in parts)
    feed.done(rows, sum(p.size_bytes for p in parts))
    issues = tracker.evaluate() if tracker is not None else []
    for issue in issues:
        summary.journal.record("QualityIssue", severity=issue.severity, message=issue.message)
        if issue.severity == "WARN":
            summary.add_warning(f"quality: {issue.message}")
    summary.quality_issues = issues
    failures = [i for i in issues if i.severity == "FAIL"]
    if tracker is not None:
        summary.quality_passed = not failures
    if failures:
        rotator.abort()  # deletes the parts and aborts their uploads in flight
        raise quality_error(export.name, failures)
    cursor_high = render_cursor_value(cursor_value, cursor_type) if cursor_value is not None else None
    return StagedExtract(parts=parts, schema=out_schema, rows=rows, cursor_high=cursor_high,
                         quality_issues=issues, staging_dir=staging_dir, source_row_count=source_row_count,
                         part_stem=stem if early is not None else None)
