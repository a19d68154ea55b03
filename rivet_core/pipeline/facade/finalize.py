"""The end-of-run finalize sequence — one function, one order (docs/invariants.md I8 + the amendment).

    status → table commit (table_format exports) → manifest.json → manifest-<run_id>.json
    → _SUCCESS → cursor (RunStore) → validate → retention → journal RunCompleted + run_status → metrics → report → notification

- The table commit (`table_format: delta`, rivet_core/tableformat/) runs only for a
  successful run whose parts are all recorded; its failure fails the run before the
  manifest, so the cursor does not move. Fault point `after_table_commit` follows it
  (docs/adr/0009-table-formats.md says how the next run treats a commit no manifest names).
- The manifest step is fatal: if it cannot be written the run becomes `failed`, exits
  non-zero and the cursor is NOT advanced (the 2026-09-26 amendment).
- The cursor moves only after the manifest landed and only for a successful run (I3).
  A cursor-write failure is logged as an error and does not fail the run (at-least-once:
  the next run re-exports from the prior cursor).
- Validate, metrics (I4: after the verdict), report and notification are best-effort:
  each failure is a warning and the next step still runs.
- Retention (the export's `retention:` block; rivet_core/pipeline/retention/gc.py) runs only after a
  successful publish — never before `_SUCCESS`, never after a failed validation — and moves
  superseded files aside / deletes what outlived its grace period. Its failure is a warning.

A time partition (a window unit) is *replaced* when it runs again: after its new
manifest landed, the parts the previous manifest listed, and that run's
`manifest-<run_id>.json` copy, are moved to `_quarantine/<run_id>/` — never deleted (M9) —
so every success manifest left at the prefix describes data that is still there. The
chunk-task finalize (`supersede_previous=True`, pipeline/chunked/tasks.py) does the same: a re-run chunk
window's old parts leave the prefix only once a manifest without them has landed.

Failed runs (a deliberate difference from Rivet): we never overwrite the canonical
`manifest.json` of the prefix with a failed one — that would leave a stale `_SUCCESS` next
to it. The prefix keeps describing the last successful delivery; a failed run that had
committed parts leaves only its own `manifest-<run_id>.json` (status `failed`) as a trail.
See docs/adr/0002-failed-runs-keep-the-last-good-manifest.md.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rivet_core import __version__
from rivet_core.config import ExportConfig
from rivet_core.destination import Destination
from rivet_core.errors import DataIntegrityError, best_effort, exit_code_for
from rivet_core.format.meta_columns import COL_ROW_HASH, ROW_HASH_CONTRACT
from rivet_core.manifest import (
    Manifest,
    quarantine_object,
    run_manifest_key,
    serialize_manifest,
    verify_at_destination,
)
from rivet_core.manifest.artifacts import write_manifest_files
from rivet_core.manifest.column_checksums import checksum_key_column, run_level
from rivet_core.manifest.layout import read_predecessor
from rivet_core.manifest.model import normalize_strategy
from rivet_core.pipeline.facade.run_store import Progression, RunStore
from rivet_core.pipeline.faults import fault_point
from rivet_core.pipeline.retention.gc import apply_retention
from rivet_core.pipeline.table_check import check_table
from rivet_core.redact import redact_secrets
from rivet_core.reporting.notify import RunNotice, send_notifications
from rivet_core.reporting.report import write_run_report
from rivet_core.runrecord.summary import RunSummary
from rivet_core.state import StateStore
from rivet_core.unit.resolve import ResolvedUnit

log = logging.getLogger("rivet.finalize")

_ERROR_CLASSES = (
    ("statement timeout", "statement_timeout"), ("lock timeout", "lock_timeout"),
    ("deadlock", "deadlock"), ("schema drift", "schema_drift"), ("does not exist", "relation_not_found"),
    ("permission denied", "privilege"), ("authentication", "source_auth"), ("password", "source_auth"),
    ("connection", "connection"), ("no space left", "disk_full"), ("quality check", "quality"),
)


def classify_error_text(message: str | None) -> str | None:
    text = (message or "").lower()
    return next((cls for needle, cls in _ERROR_CLASSES if needle in text), None)


def resolve_status(summary: RunSummary, error: BaseException | None) -> None:
    """Set status / error / exit code from the runner's outcome."""
    if error is None:
        if summary.status == "running":
            summary.status = "success"
        return
    summary.status = "failed"
    summary.error_message = redact_secrets(error)
    summary.error_class = classify_error_text(summary.error_message)
    summary.exit_code = exit_code_for(error)  # the one table (errors.py); S3 unreachable → 2


def manifest_strategy(plan: ResolvedUnit, summary: RunSummary) -> str:
    """Rivet's `source.extraction.strategy` label: full | incremental | chunked | keyset |
    timewindow (a chunked run paging a keyset sets `summary.extraction_strategy`)."""
    if summary.extraction_strategy:
        return summary.extraction_strategy
    if plan.strategy == "chunked" and plan.export.chunk_by_key:
        return "keyset"
    return normalize_strategy(plan.strategy)


def row_hash_contract(plan: ResolvedUnit) -> dict[str, Any] | None:
    """The manifest's `row_hash`: what `_rivet_row_hash` covers when `meta_columns.row_hash`
    is on — the column, the coverage as configured (true = every data column, or the list)
    and the rendering's identity (format/meta_columns.py)."""
    meta = plan.export.meta_columns
    covered = meta.row_hash if meta else False
    if not covered:
        return None
    return {"column": COL_ROW_HASH, "covered": list(covered) if isinstance(covered, list) else True,
            "render": ROW_HASH_CONTRACT}


def source_table(export: ExportConfig) -> tuple[str | None, str | None]:
    """The manifest's `source.schema` / `source.table`, as Rivet records them: a `table:`
    export's table (split at its dot); else the export name when it reads `schema.table`;
    else none — a `query:` export has no table (Rivet writes null, not the export name)."""
    if export.table_parts is not None:
        return export.table_parts
    schema, dot, table = export.name.partition(".")
    return (schema, table) if dot and schema and table else (None, None)


def manifest_uri(plan: ResolvedUnit, dest: Destination) -> str:
    """`destination.uri` as Rivet writes it: for a local destination `file://` + the path as
    configured (`file://./out`, not the resolved absolute directory), so the manifest reads
    the same wherever the prefix is copied; the destination's own URI otherwise."""
    if dest.kind == "local" and plan.dest_spec.path is not None:
        return "file://" + plan.dest_spec.path
    return dest.uri


def build_manifest(plan: ResolvedUnit, summary: RunSummary, dest: Destination) -> Manifest:
    export = plan.export
    schema_name, table_name = source_table(export)
    extraction: dict[str, Any] = {"strategy": manifest_strategy(plan, summary),
                                  "source_row_count": summary.source_row_count}
    if summary.cursor_column:
        extraction.update(cursor_column=summary.cursor_column, cursor_type=summary.cursor_type,
                          cursor_low=summary.cursor_low, cursor_high=summary.cursor_high)
    if plan.window is not None:
        extraction.update(window_start=plan.window.start.isoformat(), window_end=plan.window.end.isoformat())
    elif plan.time_window_start is not None:  # days_window: [cutoff, …), open-ended
        extraction.update(window_start=plan.time_window_start.isoformat())
    checks, render, key = run_level(summary.manifest_parts, checksum_key_column(export))
    return Manifest(
        run_id=summary.run_id, export_name=export.name,
        started_at=summary.started_at.isoformat(), finished_at=datetime.now(UTC).isoformat(),
        status=summary.status if summary.status in ("success", "failed") else "interrupted",
        source={"engine": summary.source_engine or plan.engine, "schema": schema_name,
                "table": table_name, "extraction": {k: v for k, v in extraction.items() if v is not None}},
        destination={"kind": dest.kind, "uri": manifest_uri(plan, dest)}, export_family=export.name,
        format=export.format, compression=summary.compression, mode="cdc" if export.mode == "cdc" else "batch",
        schema_fingerprint=summary.schema_fingerprint or "xxh3:0000000000000000",
        row_count=summary.committed_rows(), part_count=len(summary.manifest_parts),
        parts=list(summary.manifest_parts), orchestrator_run_id=summary.orchestrator_run_id,
        orchestrator=summary.orchestrator,
        row_hash=row_hash_contract(plan), column_checksums=checks, checksum_render=render,
        checksum_key_column=key,
        table=summary.table_commit,
    )


def _write_manifest(plan: ResolvedUnit, summary: RunSummary, dest: Destination, supersede: bool = False) -> None:
    if not dest.supports_manifest:
        return
    if summary.status == "skipped" and not summary.manifest_parts:
        return  # the prefix keeps describing the last delivering run
    summary.check_post_run_invariants()
    if summary.status == "success":
        # One read: the manifest this run replaces (a time partition's, a chunk-task finalize's
        # supersede) and this publish's place in the prefix's ledger (layout.py).
        previous, sequence = read_predecessor(dest)
        if not (plan.window is not None or supersede):
            previous = None
        try:
            manifest = build_manifest(plan, summary, dest)
            write_manifest_files(dest, dataclasses.replace(manifest, sequence=sequence))
            summary.manifest_written = True
        except Exception as exc:  # error boundary: the amendment — a manifest failure fails the run
            summary.status = "failed"
            summary.error_message = redact_secrets(f"manifest write failed: {exc}")
            summary.exit_code = getattr(exc, "exit_code", 1) or 1
            log.error("export '%s': %s — cursor NOT advanced", summary.export_name, summary.error_message)
            return
        if previous is not None:
            _quarantine_superseded(summary, dest, previous)
        return
    if summary.manifest_parts:  # failed run with durable parts: leave its own trail only
        with best_effort("failed-run manifest copy", warn=summary.add_warning,
                         message="failed-run manifest copy not written: {reason}"):
            manifest = build_manifest(plan, summary, dest)
            dest.write_bytes(serialize_manifest(manifest), run_manifest_key(summary.run_id))


def _commit_table(plan: ResolvedUnit, summary: RunSummary, dest: Destination) -> None:
    """The table commit of a `table_format:` export (rivet_core/tableformat/commit.py): after
    every part is recorded, before the manifest. A failure fails the run (no manifest, no
    cursor); a skipped or failed run commits nothing. A run that found no row commits nothing
    either, but its manifest names the table version still published (`unchanged`,
    tableformat/chain.py): with `table: null` the next append read the published version as
    -1 and removed every earlier commit as an orphan."""
    if plan.export.table_format is None or summary.status != "success":
        return
    from rivet_core.tableformat import commit_table
    from rivet_core.tableformat.commit import commit_empty_table

    try:
        commit = commit_table(plan, summary, dest) if summary.manifest_parts else commit_empty_table(plan, summary, dest)
    except Exception as exc:  # error boundary: becomes the run's failure, before the manifest
        summary.status = "failed"
        summary.error_message = redact_secrets(f"table commit failed: {exc}")
        summary.error_class = classify_error_text(summary.error_message)
        summary.exit_code = getattr(exc, "exit_code", 1) or 1
        log.error("export '%s': %s — no manifest, cursor NOT advanced", summary.export_name,
                  summary.error_message)
        return
    if commit is None:  # no row and nothing to remove: the published version stays
        from rivet_core.tableformat.chain import unchanged_block

        with best_effort("read the published table block", warn=summary.add_warning,
                         message="the manifest names no table version: {reason}"):
            summary.table_commit = unchanged_block(dest)
        return
    summary.table_commit = commit.to_dict()
    summary.journal.record("TableCommitted", format=commit.format, version=commit.version,
                           operation=commit.operation, files=commit.files, rows=commit.rows)
    fault_point("after_table_commit")


def _quarantine_superseded(summary: RunSummary, dest: Destination, previous: Manifest) -> None:
    """Running a time partition again replaces its parts: move the previous run's parts and its
    per-run manifest copy aside to `_quarantine/<run_id>/` (never deleted; a failed move is a
    warning). Left in place, that copy would still claim, as a success, parts that moved."""
    current = {p.path for p in summary.manifest_parts}
    for part in previous.parts:
        if part.path not in current and not quarantine_object(dest, summary.run_id, part.path):
            summary.add_warning(f"superseded part '{part.path}' could not be quarantined")
    copy = run_manifest_key(previous.run_id)
    present = True  # cannot tell: try the move, which warns on failure
    with best_effort("head of the superseded manifest copy", logger=log):
        present = previous.run_id != summary.run_id and dest.head(copy) is not None
    if present and not quarantine_object(dest, summary.run_id, copy):
        summary.add_warning(f"superseded manifest copy '{copy}' could not be quarantined")


def _commit_cursor(summary: RunSummary, state: StateStore) -> None:
    # A stdout export has no manifest: its rows were written (streamed) once the parts were
    # recorded, and the run's own report stands in for the manifest (docs/modes.md).
    published = summary.manifest_written or summary.destination_kind == "stdout"
    if not (published and summary.status == "success"):
        return
    # The ledger learns that this prefix holds published data before the cursor moves past it:
    # a crash between the cursor and the ledger's tail (record_outcome) must not leave a cursor
    # the ledger cannot tie to a publish (pipeline/single/lost_cursor.py `refuse_vanished_destination`).
    with best_effort("run ledger write", warn=summary.add_warning):  # advisory; the tail writes it again
        state.finish_run(summary.run_id, "success")
    # One committed boundary per run: the cursor's when the run has one (keyset_incremental
    # chunked runs too), else the completed chunk run's highest chunk index (PG2).
    if summary.cursor_high:
        progression = Progression.incremental(summary.cursor_high)
    elif summary.completed_chunk_run:
        progression = Progression.chunked(summary.completed_chunk_run)
    else:
        return
    # At-least-once: a cursor that could not be written leaves the next run to re-export.
    with best_effort("cursor commit", logger=log, level=logging.ERROR,
                     message=f"export '{summary.export_name}': cursor write failed after the manifest "
                             "landed: {reason}") as attempt:
        RunStore(state, summary).with_cursor(summary.cursor_high).with_progression(progression).commit()
    if attempt.failed:
        summary.add_warning("cursor not advanced; the next run re-exports from the previous cursor")


def _validate(plan: ResolvedUnit, summary: RunSummary, dest: Destination) -> None:
    if not dest.supports_manifest or not summary.manifest_written:
        return
    verdict = None
    with best_effort("validation", warn=summary.add_warning, message="validation could not run: {reason}"):
        verdict = verify_at_destination(dest, depth="sample", export_name=summary.export_name,
                                        export=plan.export, table_check=check_table)
    if verdict is None:
        return
    summary.manifest_verification = verdict.to_dict()
    summary.validated = bool(verdict.passed)
    summary.journal.record("ValidationResult", passed=summary.validated)
    if not verdict.passed and summary.exit_code == 0:
        summary.exit_code = DataIntegrityError.exit_code


def metric_row(plan: ResolvedUnit, summary: RunSummary) -> dict[str, Any]:
    return dict(
        export_name=summary.export_name, run_id=summary.run_id,
        run_at=summary.started_at.isoformat(), duration_ms=summary.duration_ms,
        total_rows=summary.total_rows, peak_rss_mb=summary.peak_rss_mb, status=summary.status,
        error_message=summary.error_message, error_class=summary.error_class,
        tuning_profile=summary.tuning_profile, format=summary.format, mode=summary.mode,
        files_produced=summary.files_produced, files_committed=summary.files_committed,
        bytes_written=summary.bytes_written, retries=summary.retries, validated=summary.validated,
        schema_changed=summary.schema_changed, quality_passed=summary.quality_passed,
        skip_reason=summary.skip_reason, schema_fingerprint=summary.schema_fingerprint,
        batch_size=summary.batch_size, source_type=summary.source_engine or plan.engine,
        destination_type=summary.destination_kind, cursor_min=summary.cursor_low,
        cursor_max=summary.cursor_high, rivet_version=__version__,
        orchestrator_run_id=summary.orchestrator_run_id, source_count=summary.source_row_count,
        reconciled=summary.reconciled,
    )


def finalize_run(
    plan: ResolvedUnit, summary: RunSummary, state: StateStore, dest: Destination, *,
    error: BaseException | None, validate: bool, notifications: Any, report_root: Path,
    supersede_previous: bool = False, defer_transient_notice: bool = False, sweep_orphans: bool = False,
) -> RunSummary:
    """Run the finalize sequence in its fixed order (module docstring). Never raises.
    `defer_transient_notice`: a transient failure (exit 2) the caller will retry is not
    notified (RunOptions.defer_transient_notice). `sweep_orphans`: the caller holds the
    export's exclusive lock, so retention may also move unlisted files out of `data/`."""
    resolve_status(summary, error)
    summary.close()
    _commit_table(plan, summary, dest)
    _write_manifest(plan, summary, dest, supersede_previous)
    _commit_cursor(summary, state)
    if validate:
        _validate(plan, summary, dest)
    apply_retention(plan, summary, state, dest, sweep_orphans=sweep_orphans)
    if defer_transient_notice and summary.exit_code == 2:
        summary.journal.record("NotificationDeferred", reason="transient failure; the caller retries it")
        notifications = None
    record_outcome(plan, summary, state, report_root)
    with best_effort("notification", warn=summary.add_warning):  # never changes the exit code
        notify_warnings = send_notifications(notifications, RunNotice(
            run_id=summary.run_id, export_name=summary.export_name, status=summary.status,
            rows=summary.total_rows, duration_ms=summary.duration_ms,
            error_message=summary.error_message, schema_changed=bool(summary.schema_changed),
            destination_uri=summary.destination_uri, files=summary.files_committed,
            bytes_written=summary.bytes_written, report_path=summary.report_path,
            validated=summary.validated))
        summary.warnings.extend(notify_warnings)
    return summary


__all__ = ["finalize_run", "build_manifest", "metric_row", "resolve_status"]


def record_outcome(plan: ResolvedUnit, summary: RunSummary, state: StateStore, report_root: Path) -> None:
    """The advisory tail every finalize path shares (a run's and a repair's): the journal's
    terminal RunCompleted (it carries the final status, a manifest gap included, and follows
    ValidationResult), the journal and the run ledger, the metrics row (I4: after the
    verdict) and the run report. Each step's failure is a warning, never the run's."""
    summary.journal.record("RunCompleted", status=summary.status, error_message=summary.error_message,
                           duration_ms=summary.duration_ms)
    for step in (lambda: state.store_journal(summary.run_id, summary.export_name, summary.journal.to_dict()),
                 lambda: state.finish_run(summary.run_id, summary.status)):
        with best_effort("state ledger write", warn=summary.add_warning):  # advisory
            step()
    with best_effort("metrics write", warn=summary.add_warning):  # I4: best-effort
        state.record_metric(metric_row(plan, summary))
    with best_effort("run report", warn=summary.add_warning, message="run report not written: {reason}"):
        summary.report_path = str(write_run_report(summary, plan, report_root))
