"""The single-unit run: plan → extract (retried) → schema gate → publish → finalize.

`ExportRun` is the one implementation of an export unit's life cycle (full, incremental,
time_window, one time partition). The CLI drives all phases in one call (runner.py `run_unit`);
an orchestrator drives them across its steps (extract and gates in one, publish in the next)
(publish + finalize). Both therefore share every step and every facade.

Retries follow docs/rivet-compat.md "Retries": only transient errors are retried, with exponential
backoff and a fresh connection, and only while nothing has been committed — a retry after
a committed part would duplicate rows, so the run fails with a data-integrity error. The
finalize sequence (finalize.py) always runs exactly once, via `publish` or `fail`.

The phases after the lock (extract, the gates, publish, finalize) import their modules when
they run: a run takes its lock and sends its first source query without loading the writers,
the finalize facade and what they import (tests/test_startup.py; docs/benchmarks.md "Start-up").
"""

from __future__ import annotations

import logging
import shlex
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rivet_core.config import ExportConfig, RivetConfig
from rivet_core.destination import Destination, open_destination
from rivet_core.errors import DataIntegrityError, best_effort
from rivet_core.orchestrator import accepts_legacy_run_id
from rivet_core.pipeline.single.lost_cursor import (
    refuse_vanished_destination,
    resolve_missing_cursor,
)
from rivet_core.pipeline.staging.directories import (
    claim_staging,
    remove_staging,
    sweep_dead_staging,
)
from rivet_core.redact import redact_secrets
from rivet_core.reporting.progress import ProgressTracker
from rivet_core.runrecord.summary import RunSummary, new_run_id
from rivet_core.source import RetryDecision, backoff_ms, retry_transient
from rivet_core.state import ExportLockHandle, StateStore
from rivet_core.state.writable import assert_writable
from rivet_core.unit.resolve import DayWindow, ResolvedUnit, resolve_unit

if TYPE_CHECKING:
    from rivet_core.pipeline.staging.extract import StagedExtract

log = logging.getLogger("rivet.run")


@dataclass
class RunOptions:
    validate: bool = False
    #: The orchestrator's id for this run and its display name (rivet_core/orchestrator.py):
    #: recorded in the manifest, the report, run_status and the export lock.
    orchestrator_run_id: str | None = None
    orchestrator: str | None = None
    window: DayWindow | None = None
    #: Retry transient source errors inside the run. An orchestrator turns this off and
    #: retries the step itself, so its retries are visible where it shows them.
    internal_retries: bool = True
    #: Chunked checkpoint runs: continue the in-progress run instead of starting one.
    resume: bool = False
    #: Allow a resume into a prefix that already holds `_SUCCESS`.
    force: bool = False
    #: Open a `run_status` row when the run starts. Off for the chunk-task runs
    #: (pipeline/chunked/tasks.py): a window batch works for the chunk run and is not a run of its own;
    #: the chunk run's row is opened by its finalize (`open_ledger`) once I6 held.
    ledger: bool = True
    #: Progress reporting (rivet_core/reporting/progress.py): fed once per batch; None = off. The CLI
    #: and an orchestrator pass their own sinks, the run never picks one itself.
    progress: ProgressTracker | None = None
    #: The caller retries a transient failure (exit 2) of this run itself: the failure is
    #: recorded (metrics, report, journal) but not notified — the attempt that ends the
    #: matter (a success, or the last failure) is. Nobody is paged for a blip.
    defer_transient_notice: bool = False
    #: `--reconcile`: count the unit's query in the export's own snapshot and fail the run
    #: (exit 3, nothing published, cursor unmoved) when the rows written differ (pipeline/staging/run_reconcile.py).
    reconcile: bool = False
    #: Incremental exports: ignore the stored cursor and export every row (`--full-refresh`).
    full_refresh: bool = False
    #: Incremental exports whose state store has no cursor: adopt `cursor_high` from the
    #: destination's manifest (`--from-manifest`, lost_cursor.py).
    from_manifest: bool = False
    #: The run's id (default: `{export}_{UTC time}`). A ranged time-partition run
    #: (time_range.py) gives each partition its own, since they start in the same millisecond.
    run_id: str | None = None
    #: The new manifest replaces the prefix's previous one part by part (as a time partition
    #: does): set for a `partition_by` bucket that replaces its data (pipeline/buckets/run.py).
    supersede_previous: bool = False


# `RunOptions(<name>_run_id=…)`, the spelling before orchestrator_run_id, still works (deprecated).
RunOptions.__init__ = accepts_legacy_run_id(RunOptions.__init__)  # type: ignore[method-assign]


def staging_root(config: RivetConfig) -> Path:
    return config.config_dir / ".rivet" / "staging"


class ExportRun:
    """One export unit from plan to finalize; see the module docstring for the phases."""

    #: The new manifest replaces the prefix's previous one part by part: parts it no longer
    #: lists are quarantined after it landed (time partitions always; the chunk-task finalize).
    supersedes_previous = False
    #: How this run holds the export's lock (state/locks.py): a CLI run or one time partition
    #: is `exclusive` (never two cursors racing); the chunk-task flow (pipeline/chunked/tasks.py) is `shared`; None
    #: takes no lock (read-only inspection: `rivet reconcile`).
    lock_mode: str | None = "exclusive"

    def __init__(self, config: RivetConfig, export: ExportConfig, options: RunOptions | None = None,
                 *, state: StateStore | None = None, notifications: Any = "config") -> None:
        self.config, self.export = config, export
        self.options = options or RunOptions()
        self._own_state = state is None
        self.state = state or StateStore.open(config.config_path)
        self.notifications = config.notifications if notifications == "config" else notifications
        self.export_lock: ExportLockHandle | None = None
        try:
            # Before the cursor is read: a second run of the export is refused (ExportLocked,
            # exit 2) here, having read and written nothing.
            if self.lock_mode is not None:
                # A store that cannot record the outcome must not let the run publish.
                assert_writable(self.state.database, self.state.url)
                self.export_lock = self.state.acquire_export_lock(
                    export.name, mode=self.lock_mode,
                    window_label=self.options.window.label if self.options.window else None,
                    orchestrator_run_id=self.options.orchestrator_run_id,
                    orchestrator=self.options.orchestrator, config_hint=shlex.quote(str(config.config_path)))
            cursor_run = export.mode == "incremental" and not self.options.window
            stored = (self.state.get_cursor(export.name)
                      if cursor_run and not self.options.full_refresh else None)
            self.plan: ResolvedUnit = resolve_unit(config, export, stored_cursor=stored, window=self.options.window)
            self.dest: Destination = open_destination(self.plan.dest_spec, config.config_dir)
            if cursor_run and stored is None and not self.options.full_refresh:
                # No cursor: a first run, a reset, or a LOST state store (lost_cursor.py).
                adopted = resolve_missing_cursor(self.state, export, self.dest, config_path=str(config.config_path),
                                                 from_manifest=self.options.from_manifest)
                if adopted is not None:
                    log.warning("export '%s': continuing from the destination manifest's cursor_high %r "
                                "(--from-manifest)", export.name, adopted)
                    self.plan = resolve_unit(config, export, stored_cursor=adopted, window=self.options.window)
            elif cursor_run and stored is not None and not self.options.full_refresh and \
                    any(e.name == export.name for e in config.exports):  # a partition_by bucket: its set's record
                refuse_vanished_destination(self.state, export, self.dest, config_path=str(config.config_path),
                                            cursor=stored)
            # A table export re-baselines (an overwrite commit) where every row is exported again.
            self.plan.full_refresh = self.options.full_refresh and (
                cursor_run or export.mode == "full" or (export.mode == "chunked" and not export.keyset_incremental))
        except BaseException:
            self.close()
            raise
        self.summary = self._new_summary()
        if self.export_lock is not None:
            self.export_lock.annotate(run_id=self.summary.run_id)
        self.staging_dir = staging_root(config) / self.summary.run_id
        self.finalized = False
        if self.export_lock is not None:
            self._sweep_dead_staging()
        if self.export_lock is not None and self.lock_mode == "exclusive":
            self._fail_dead_runs()
        if self.options.ledger:
            self.open_ledger()

    def _sweep_dead_staging(self) -> None:
        """Holding the export lock: remove staging left by this export's dead runs (pipeline/staging/directories.py;
        live runs of the export — their run ids are on live lock rows — are never touched)."""
        removed = None  # housekeeping never fails a run
        with best_effort("staging cleanup", logger=log,
                         message=f"export '{self.export.name}': staging cleanup skipped: {{reason}}"):
            live = {h.run_id for h in self.state.list_export_locks(self.export.name)
                    if h.run_id and h.stale_reason() is None}
            removed = sweep_dead_staging(staging_root(self.config), self.export.name, live,
                                         keep=self.staging_dir.name)
        if removed:
            self.summary.journal.record(
                "Warning", context="staging_cleanup",
                message=f"removed staging of {len(removed)} dead run(s) ({sum(r.bytes for r in removed)} bytes): "
                        + ", ".join(r.run_id for r in removed))

    def _fail_dead_runs(self) -> None:
        """Holding the export's exclusive lock: the run ledger's `running` rows of this export's
        runs that are gone (killed before they could record an outcome) become `failed`, so
        `rivet state` and the run history stop showing a run that will never end. Live runs —
        their run ids are on live lock rows (other time partitions run under their own locks) —
        are never touched."""
        dead: list[str] = []  # housekeeping never fails a run
        with best_effort("run ledger cleanup", logger=log,
                         message=f"export '{self.export.name}': run ledger cleanup skipped: {{reason}}"):
            before = datetime.now(UTC).isoformat()  # the state store's timestamp format
            live = {h.run_id for h in self.state.list_export_locks(self.export.name)
                    if h.run_id and h.stale_reason() is None} | {self.summary.run_id}
            dead = self.state.fail_dead_runs(self.export.name, live, before)
        if dead:
            log.warning("export '%s': run(s) %s were left `running` in the run ledger by a process that is "
                        "gone; marked failed", self.export.name, ", ".join(dead))
            self.summary.journal.record(
                "Warning", context="run_ledger",
                message=f"marked failed {len(dead)} run(s) left running by a process that is gone: "
                        + ", ".join(dead))

    def open_ledger(self) -> None:
        """The run's `run_status` row (advisory: a failed write is a warning)."""
        with best_effort("run_status write", warn=self.summary.add_warning):
            self.state.begin_run(self.summary.run_id, self.export.name, self.dest.uri,
                                 self.options.orchestrator_run_id)

    # ------------------------------------------------------------------ phases
    def _new_summary(self) -> RunSummary:
        plan, export = self.plan, self.export
        summary = RunSummary(run_id=self.options.run_id or new_run_id(export.name), export_name=export.name, mode=export.mode,
                             format=export.format, compression=plan.writer_options.compression)
        summary.destination_kind, summary.destination_uri = self.dest.kind, self.dest.uri
        summary.tuning_profile = plan.tuning.profile
        summary.orchestrator_run_id = self.options.orchestrator_run_id
        summary.orchestrator = self.options.orchestrator
        summary.partition_key = plan.window.label if plan.window else None
        summary.state_backed = True
        summary.journal.record(
            "PlanResolved", export_name=export.name, base_query=export.resolved_query,
            strategy=plan.strategy, format=export.format, compression=summary.compression,
            destination_type=self.dest.kind, tuning_profile=plan.tuning.profile,
            validate=self.options.validate, reconcile=self.options.reconcile, resume=False, resumable=False)
        for w in plan.warnings:
            summary.journal.record("PlanWarning", rule="plan", message=w)
        return summary

    def extract(self) -> StagedExtract:
        """Stream to staged files (quality gate inside), retrying transient source errors."""
        from rivet_core.pipeline.staging.extract import extract_to_staging

        def attempt(n: int) -> StagedExtract:
            claim_staging(self.staging_dir, run_id=self.staging_dir.name, export_name=self.export.name)
            return extract_to_staging(self.plan, self.summary, self.staging_dir / f"attempt{n}",
                                      progress=self.options.progress, reconcile=self.options.reconcile,
                                      dest=self.dest)

        def before_retry(n: int, exc: BaseException, decision: RetryDecision) -> None:
            if self.summary.files_committed > 0:  # defensive: extract never commits
                raise DataIntegrityError(
                    f"export '{self.export.name}': transient error after parts were committed — "
                    f"cannot safely retry (would duplicate rows). Cause: {redact_secrets(exc)}") from exc
            wait = backoff_ms(n, self.plan.tuning.retry_backoff_ms, decision.extra_delay_ms)
            self.summary.retries = n
            self.summary.journal.record("RetryAttempted", attempt=n, reason=str(exc), backoff_ms=wait)
            log.warning("export '%s': transient error (%s); retry %d/%d in %d ms", self.export.name,
                        redact_secrets(exc), n, self.plan.tuning.max_retries, wait)
            time.sleep(wait / 1000.0)  # backoff before reconnecting, not synchronisation

        return retry_transient(attempt, max_retries=self.plan.tuning.max_retries, before_retry=before_retry,
                               retryable=lambda _exc, decision: decision.transient and self.options.internal_retries)

    def gate_schema(self, staged: StagedExtract) -> None:
        """The schema-drift facade on the staged schema (once per run; raises on `fail`)."""
        if self.summary.schema_gate is not None:
            return
        from rivet_core.manifest import schema_fingerprint
        from rivet_core.pipeline.facade.schema_drift import check_schema_drift
        from rivet_core.tableformat.types import refuse_unholdable

        self.summary.schema_fingerprint = schema_fingerprint(staged.schema)
        refuse_unholdable(self.export, staged.schema)  # table_format: before any part
        if staged.rows and self.export.table_format is not None:  # an empty poll commits nothing
            from rivet_core.tableformat.commit import refuse_foreign_writer

            refuse_foreign_writer(self.plan, self.dest)  # another writer's commit: before any part
        check_schema_drift(self.state, self.summary, staged.schema, self.export.on_schema_drift or "warn")

    def publish(self, staged: StagedExtract) -> RunSummary:
        """Schema gate, write + record every part, then the finalize sequence."""
        from rivet_core.pipeline.facade.publish import publish_staged
        from rivet_core.pipeline.staging.run_reconcile import reconcile_gate

        error: BaseException | None = None
        try:
            self.gate_schema(staged)
            reconcile_gate(self.summary, staged.source_row_count, staged.rows)  # before any part
            if staged.rows == 0:
                self._empty_result()
            else:
                publish_staged(self.plan, self.summary, self.state, self.dest, staged)
        except Exception as exc:  # error boundary: reported through finalize
            error = exc
        return self._finalize(error)

    def fail(self, error: BaseException) -> RunSummary:
        """Finalize a run that failed before publishing (metrics, report, notification)."""
        return self._finalize(error)

    def run(self) -> RunSummary:
        """All phases in one call (the CLI path): `--resume`'s gate, the one place it runs for
        every mode (Rivet's warning and `_SUCCESS` refusal, before any read), then the phases."""
        if self.options.resume:
            from rivet_core.pipeline.single.resume_gate import gate_resume

            try:
                gate_resume(self)
            except Exception as exc:  # error boundary: the run's failure
                return self.fail(exc)
        return self.run_phases()

    def run_phases(self) -> RunSummary:
        """Extract, then publish; a runner with another middle (chunked/run.py) overrides this,
        never `run`, so the resume gate stays in one place."""
        try:
            staged = self.extract()
        except Exception as exc:  # error boundary: the run's failure
            return self.fail(exc)
        return self.publish(staged)

    # ------------------------------------------------------------------ helpers
    def _empty_result(self) -> None:
        """0 rows: no file. skip_empty → status skipped with a reason (docs/rivet-compat.md "File names and run ids")."""
        log.info("export '%s': no data to export", self.export.name)
        if self.plan.cursor_column is not None:
            self.summary.cursor_column, self.summary.cursor_low = self.export.cursor_column, self.plan.cursor_low
        if self.export.skip_empty:
            self.summary.status = "skipped"
            self.summary.skip_reason = (f"no new rows since cursor '{self.export.cursor_column}'"
                                        if self.export.mode == "incremental" else "source returned 0 rows")

    def _chunked_reconcile_verdict(self) -> BaseException | None:
        """Chunked `--reconcile`: each window was counted in its own snapshot (chunk_commit.py)
        and a window that differed already failed. The run's count (their sum) stands when this
        process counted every committed row; a resume that kept windows of an earlier process
        records none (those windows: `rivet reconcile`)."""
        from rivet_core.pipeline.staging.run_reconcile import reconcile_gate

        s = self.summary
        if s.source_row_count is None or s.reconcile_counted_rows != s.committed_rows():
            s.add_warning("--reconcile: windows completed by an earlier run were not counted in this one — "
                          "check them with `rivet reconcile`")
            s.source_row_count = None
            return None
        try:
            reconcile_gate(s, s.source_row_count, s.reconcile_counted_rows)
        except Exception as exc:  # error boundary: becomes the run's error
            return exc
        return None

    def _finalize(self, error: BaseException | None) -> RunSummary:
        from rivet_core.pipeline.facade.finalize import finalize_run

        if self.finalized:
            raise RuntimeError(f"export run {self.summary.run_id} was already finalized")
        self.finalized = True
        chunk_plan = getattr(self, "chunk_plan", None)  # chunked runs: the manifest names a keyset
        if chunk_plan is not None and self.summary.extraction_strategy is None:
            self.summary.extraction_strategy = "keyset" if chunk_plan.strategy == "keyset" else "chunked"
            if self.options.reconcile and error is None:
                error = self._chunked_reconcile_verdict()
        try:
            return finalize_run(self.plan, self.summary, self.state, self.dest, error=error,
                                validate=self.options.validate, notifications=self.notifications,
                                defer_transient_notice=self.options.defer_transient_notice,
                                report_root=self.config.config_dir,
                                supersede_previous=self.supersedes_previous or self.options.supersede_previous,
                                sweep_orphans=self.lock_mode == "exclusive" and self.export.mode != "chunked")
        finally:
            shutil.rmtree(self.staging_dir, ignore_errors=True)
            self.close()

    def close(self) -> None:
        """Remove this run's staging, release the export lock (idempotent), then the store if
        this run opened it. Every ending path — finalize, a refusal, an abandon — comes here."""
        dest = getattr(self, "dest", None)
        if dest is not None:  # parts uploaded while written but never published: abort them
            with best_effort("early upload abort", logger=log,
                             message=f"export '{self.export.name}': aborting unpublished uploads: {{reason}}"):
                dest.cancel_early_uploads()
        staging = getattr(self, "staging_dir", None)  # unset when __init__ failed early
        if staging is not None:
            remove_staging(staging)
        if self.export_lock is not None:
            self.export_lock.release()
        if self._own_state:
            self.state.close()
