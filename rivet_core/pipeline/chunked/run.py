"""The chunked runner: plan windows → (checkpoint) → drain → I6 → finalize.

`ChunkedRun` extends the single-unit `ExportRun` (same summary, journal, run ledger,
schema-drift facade and finalize sequence) with a different middle:

1. plan the windows against the source (`rivet_core.chunks.layout`); a small table
   without an explicit shape falls back to a full export;
2. the schema-drift gate runs on a scan-free type probe BEFORE any window is written;
3. with `chunk_checkpoint: true`, the windows become `chunk_task` rows of a `chunk_run`
   (fresh), or the in-progress run is adopted (`--resume`: plan hash must match; stale
   `running` tasks back to pending; failed tasks get a fresh budget; the resume decisions
   of pipeline/chunked/resume.py rebuild the manifest parts);
4. windows are drained by `parallel + 1` worker threads, each window read on a reader
   thread of its own through a pooled source session (pipeline/resources/window_sessions.py) that it gives back
   when the source has sent its last row; at most `parallel` reads run at a time, so the
   extra worker encodes and publishes a finished window while the next one reads — each
   window committed by `chunk_commit.commit_window`;
5. I6: the run is finalized only when every task is completed — otherwise it fails with
   the number of windows left and the resume command; then the total quality gate (a
   failure withdraws the written windows to `_quarantine/<run_id>/` and marks the
   checkpoint, withdraw.py), then `finalize_chunk_run_completed`, then the ordinary
   finalize sequence (manifest … then the committed progression, through RunStore).

A failed window fails the run: never a short export reported as success. Its exit code is
the failing window's (the one table of errors.py: a full disk is 1 in every mode, a lost
connection 2), not a blanket 3: the checkpoint being incomplete is the consequence, the
window's error the cause.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from datetime import UTC, datetime

from rivet_core.chunks import ChunkLayout, ChunkWindow
from rivet_core.errors import DataIntegrityError, RivetError, best_effort, exit_code_for
from rivet_core.lazy_modules import pa
from rivet_core.manifest.model import cursor_native_type
from rivet_core.pipeline.chunked.planning import KeysetBoundaries, WindowPlanner
from rivet_core.pipeline.chunked.resume import checkpoint_to_resume, prepare_resume
from rivet_core.pipeline.chunked.withdraw import withdraw_windows
from rivet_core.pipeline.facade.chunk_commit import (
    WindowContext,
    WindowResult,
    commit_window,
    export_window,
)
from rivet_core.pipeline.faults import InjectedFault, fault_point
from rivet_core.pipeline.single.job import ExportRun, RunOptions
from rivet_core.pipeline.staging.directories import claim_staging
from rivet_core.redact import redact_secrets
from rivet_core.runrecord.summary import RunSummary
from rivet_core.source import classify_error, render_cursor_value, retry_transient
from rivet_core.state import ChunkRunInProgress

log = logging.getLogger("rivet.chunked")


class ChunkCheckpointIncomplete(RivetError):
    """Windows of a checkpointed run are not completed, so nothing was published. The exit
    code is the first failing window's (errors.py table); 3 when no window failed in this
    process (the tasks were left by another one)."""

    def __init__(self, message: str, cause: BaseException | None) -> None:
        super().__init__(message, code="chunk_checkpoint_incomplete")
        self.exit_code = exit_code_for(cause) if cause is not None else DataIntegrityError.exit_code


class ChunkedRun(ExportRun):
    """A chunked export run (module docstring)."""

    def __init__(self, config, export, options: RunOptions | None = None, **kwargs) -> None:  # noqa: ANN001, ANN003
        super().__init__(config, export, options, **kwargs)
        self.checkpoint = bool(export.chunk_checkpoint)
        self.lock = threading.Lock()
        self.chunk_plan: ChunkLayout | None = None
        self.keyset_low: str | None = None
        #: (max key, arrow type) of every window exported by this process (keyset_incremental).
        self.window_maxima: list[tuple[object, pa.DataType]] = []
        #: (chunk index, error) of each window that failed in this process, in order.
        self.window_errors: list[tuple[int, BaseException]] = []
        self.planner = WindowPlanner(self.plan, self.export)

    # ----------------------------------------------------------------- planning
    def plan_windows(self, *, allow_downgrade: bool = True,
                     stored_keyset: KeysetBoundaries | None = None) -> ChunkLayout | None:
        """Plan the windows (one source snapshot) and the output schema (`WindowPlanner`,
        chunked/planning.py). `allow_downgrade=False` (a chunk-task step, tasks.py) never falls
        back to a full export: a set of window tasks must not flip between "full" and
        "chunked"; such a step hands in its checkpoint's keyset boundaries (`stored_keyset`)."""
        self.keyset_low = (self.state.get_cursor(self.export.name)
                           if self.export.keyset_incremental else None)
        planned = self.planner.plan(keyset_after=self.keyset_low, allow_downgrade=allow_downgrade,
                                    stored_keyset=stored_keyset, progress=self.options.progress)
        if planned is None:
            return None
        chunk_plan, self.output_schema = planned
        for warning in chunk_plan.warnings:
            self.summary.add_warning(warning)
            self.summary.journal.record("PlanWarning", rule="chunk_plan", message=warning)
        self.chunk_plan = chunk_plan
        return chunk_plan

    def window_context(self, run_id: str, *, read_slots: int | None = None) -> WindowContext:
        """What the windows share; `read_slots` gates the source reads (see `_drain_*`)."""
        meta = self.export.meta_columns
        assert self.chunk_plan is not None
        claim_staging(self.staging_dir, run_id=self.staging_dir.name, export_name=self.export.name)
        return WindowContext(
            plan=self.plan, chunk_plan=self.chunk_plan, schema=self.output_schema, dest=self.dest,
            staging_dir=self.staging_dir, run_id=run_id,
            exported_at=datetime.now(UTC) if (meta and meta.exported_at) else None,
            row_hash=(meta.row_hash if meta else False) or False, progress=self.options.progress,
            read_slots=threading.BoundedSemaphore(read_slots) if read_slots else None,
            reconcile=self.options.reconcile)

    # ----------------------------------------------------------------- the run
    def run_phases(self) -> RunSummary:
        """Plan, gate, drain, finalize (module docstring); `ExportRun.run` ran `--resume`'s gate
        first. A small table falls back to the single-query phases."""
        try:
            chunk_plan = self.plan_windows()
        except Exception as exc:  # error boundary: the run's failure
            return self.fail(exc)
        if chunk_plan is None:
            log.info("export '%s': small table — exporting it in one piece (full)", self.export.name)
            self.summary.journal.record("PlanWarning", rule="chunk_downgrade",
                                        message="small table without an explicit chunk shape: full export")
            return super().run_phases()
        try:
            self._gate_probe_schema()
            if self.checkpoint:
                self._run_checkpointed(chunk_plan)
            else:
                self._drain_in_memory(chunk_plan)
            self._gate_total_quality()
            if self.checkpoint:
                self._close_checkpoint()
            self._keyset_cursor()
        except Exception as exc:  # error boundary: reported through finalize
            return self._finalize(exc)
        return self._finalize(None)

    def _gate_probe_schema(self) -> None:
        from rivet_core.manifest import schema_fingerprint
        from rivet_core.pipeline.facade.schema_drift import (
            check_schema_drift,
            record_gated_upstream,
        )
        from rivet_core.tableformat.types import refuse_unholdable

        self.summary.schema_fingerprint = schema_fingerprint(self.output_schema)
        refuse_unholdable(self.export, self.output_schema)  # table_format: before any window
        if self.export.table_format is not None:
            from rivet_core.tableformat.commit import refuse_foreign_writer

            refuse_foreign_writer(self.plan, self.dest)  # another writer's commit: before any window
        if self.options.resume:
            record_gated_upstream(self.summary, "when the resumed chunk run started")
            return
        check_schema_drift(self.state, self.summary, self.output_schema, self.export.on_schema_drift or "warn")

    def max_attempts(self) -> int:
        """A window's attempt budget: `chunk_max_attempts`, else the retries of the tuning + 1."""
        return max(1, self.export.chunk_max_attempts or self.plan.tuning.max_retries + 1)

    def _run_checkpointed(self, chunk_plan: ChunkLayout) -> None:
        state, export = self.state, self.export
        if self.options.resume:
            run_id = checkpoint_to_resume(self, chunk_plan)
            self.adopt_run_id(run_id)
            prepare_resume(self, run_id)
        else:
            try:
                state.create_chunk_run(
                    self.summary.run_id, export.name, chunk_plan.plan_hash, self.max_attempts(),
                    chunk_plan.strategy, chunk_plan.column, chunk_plan.size,
                    [(w.index, w.lo, w.hi, w.key) for w in chunk_plan.windows])
            except ChunkRunInProgress as exc:  # name the real config in the message
                raise ChunkRunInProgress.for_run(exc.export_name, exc.run_id, str(self.config.config_path)) from exc
        run_id = self.summary.run_id
        # The checkpoint is the source of truth for the windows (a resume never re-plans them).
        windows = {t.chunk_index: ChunkWindow(t.chunk_index, t.start_key, t.end_key, t.window_key)
                   for t in state.list_chunk_tasks(run_id)}
        self._drain_checkpoint(run_id, windows)
        left = state.count_chunk_tasks_not_completed(run_id)
        if left:
            index, cause = self.window_errors[0] if self.window_errors else (None, None)
            because = f"; chunk {index} failed: {redact_secrets(cause)}" if cause is not None else ""
            raise ChunkCheckpointIncomplete(
                f"export '{export.name}': chunk checkpoint incomplete ({left} task(s) not completed{because}) — "
                f"nothing was published; fix the cause, then resume with `rivet run -c {self.config.config_path} "
                f"-e {export.name} --resume`", cause)

    def _close_checkpoint(self) -> None:
        """I6 — only once the total quality gate passed. The committed progression follows the
        manifest: RunStore writes it in the finalize sequence (finalize.py)."""
        self.state.finalize_chunk_run_completed(self.summary.run_id)
        self.summary.completed_chunk_run = self.summary.run_id

    def adopt_run_id(self, adopted: str) -> None:
        """A resume continues the interrupted run under its run_id (both ids are closed)."""
        opened = self.summary.run_id
        if adopted == opened:
            return
        with best_effort("run_status write", warn=self.summary.add_warning):  # the ledger is advisory
            self.state.finish_run(opened, "resumed")
            self.state.begin_run(adopted, self.export.name, self.dest.uri, self.options.orchestrator_run_id)
        self.use_run_id(adopted)

    def use_run_id(self, run_id: str) -> None:
        """Work under the chunk run's id: file_log rows, part names and the journal carry it."""
        self.summary.run_id = run_id
        self.summary.journal.run_id = run_id

    # ----------------------------------------------------------------- draining
    def _workers(self) -> int:
        return max(1, int(self.export.parallel or 1))

    def _drain_checkpoint(self, run_id: str, windows: dict[int, ChunkWindow]) -> None:
        ctx = self.window_context(run_id, read_slots=self._workers())
        if self.options.progress is not None:
            left = self.state.count_chunk_tasks_not_completed(run_id)
            self.options.progress.set_chunks(len(windows), len(windows) - left)

        def worker(name: str) -> None:
            while True:
                task = self.state.claim_next_chunk_task(run_id, worker=name)
                if task is None:
                    return
                window = windows[task.chunk_index]
                with self.lock:
                    self.summary.journal.record("ChunkStarted", chunk_index=task.chunk_index,
                                                start_key=task.start_key, end_key=task.end_key)
                try:
                    fault_point(f"chunk_export:{task.chunk_index}")
                    result = export_window(ctx, window)
                except Exception as exc:  # error boundary: recorded on the task, the run fails later (I6)
                    decision = classify_error(exc)
                    message = redact_secrets(exc)
                    with self.lock:
                        self.window_errors.append((task.chunk_index, exc))
                        self.summary.journal.record("ChunkFailed", chunk_index=task.chunk_index,
                                                    error=message, attempt=task.attempts)
                    self.state.fail_chunk_task(run_id, task.chunk_index, message, retryable=decision.transient,
                                               worker=name)
                    log.warning("export '%s': chunk %d failed (attempt %d): %s", self.export.name,
                                task.chunk_index, task.attempts, message)
                    continue
                self._window_committed(result, checkpoint_run_id=run_id, worker=name)

        try:
            self._run_workers(worker)
        finally:
            ctx.close_sessions()

    def _drain_in_memory(self, chunk_plan: ChunkLayout) -> None:
        ctx = self.window_context(self.summary.run_id, read_slots=self._workers())
        pending = list(chunk_plan.windows)
        if self.options.progress is not None:
            self.options.progress.set_chunks(len(pending))
        queue_lock = threading.Lock()
        retries = self.plan.tuning.max_retries

        def worker(_name: str) -> None:
            while True:
                with queue_lock:
                    if not pending:
                        return
                    window = pending.pop(0)
                result = retry_transient(
                    lambda attempt, window=window: self._export_window_once(ctx, window, attempt),
                    max_retries=retries,
                    retryable=lambda exc, decision: decision.transient and not isinstance(exc, InjectedFault))
                self._window_committed(result, checkpoint_run_id=None)

        try:
            self._run_workers(worker)
        finally:
            ctx.close_sessions()

    def _export_window_once(self, ctx: WindowContext, window: ChunkWindow, attempt: int) -> WindowResult:
        """One attempt at one window of an in-memory drain, in the journal either way."""
        with self.lock:
            self.summary.journal.record("ChunkStarted", chunk_index=window.index, start_key=window.lo,
                                        end_key=window.hi)
        try:
            fault_point(f"chunk_export:{window.index}")
            return export_window(ctx, window)
        except Exception as exc:  # error boundary: journaled, then retried or raised by the caller
            with self.lock:
                self.summary.journal.record("ChunkFailed", chunk_index=window.index, error=str(exc),
                                            attempt=attempt + 1)
            raise

    def _run_workers(self, worker) -> None:  # noqa: ANN001
        """`parallel` + 1 worker threads; the window context's read slots keep the source at
        `parallel` queries at a time. The extra worker encodes and publishes a finished
        window's last row groups while the next window's query already streams
        (docs/benchmarks.md "Figures once carried by the pipeline's docstrings")."""
        n = self._workers() + 1
        with ThreadPoolExecutor(max_workers=n, thread_name_prefix="rivet-chunk") as pool:
            futures = [pool.submit(worker, f"w{i}") for i in range(n)]
            wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                exc = future.exception()
                if exc is not None:
                    raise exc

    def _window_committed(self, result: WindowResult, *, checkpoint_run_id: str | None,
                          worker: str | None = None) -> None:
        """A window's ordered tail (the commit facade, chunk_commit.py `commit_window`), then
        what the run keeps of it: the high-water key and one more window done for progress.
        The same for the checkpointed and the in-memory drain."""
        commit_window(self.summary, self.state, result, checkpoint_run_id=checkpoint_run_id, lock=self.lock,
                      worker=worker)
        self._note_max(result)
        if self.options.progress is not None:
            self.options.progress.chunk_done()

    def _note_max(self, result) -> None:  # noqa: ANN001
        if result.max_key is not None:
            with self.lock:
                self.window_maxima.append((result.max_key, result.key_type))

    def _keyset_cursor(self) -> None:
        """keyset_incremental: the next run starts after the highest key exported here; the
        cursor is committed by RunStore after the manifest landed (finalize), like any cursor."""
        if not self.export.keyset_incremental or self.chunk_plan is None:
            return
        self.summary.cursor_column = self.chunk_plan.column
        self.summary.cursor_type = cursor_native_type(self.output_schema, self.chunk_plan.column)
        self.summary.cursor_low = self.keyset_low
        if self.window_maxima:
            value, arrow_type = max(self.window_maxima, key=lambda m: m[0])
            self.summary.cursor_high = render_cursor_value(value, arrow_type)

    def _gate_total_quality(self, keep: Callable[[], Collection[str]] | None = None) -> None:
        """The total quality gate, judged once every window is written; on failure the windows
        are withdrawn (quarantined, checkpoint marked; pipeline/chunked/withdraw.py) and the
        error fails the run: no manifest, no `_SUCCESS`, no cursor. `keep` (called only on a
        failure) names parts that must stay: the last good delivery's."""
        try:
            self._run_total_quality()
        except DataIntegrityError as exc:
            withdraw_windows(self.summary, self.state, self.dest, reason=redact_secrets(exc),
                             chunk_run_id=self.summary.run_id if self.checkpoint else None,
                             keep=keep() if keep is not None else ())
            raise

    def _run_total_quality(self) -> None:
        """On chunked runs only row_count bounds apply, to the run total (docs/rivet-compat.md "Quality gates")."""
        q = self.export.quality
        if q is None:
            return
        if q.null_ratio_max or q.unique_columns:
            self.summary.add_warning("quality null_ratio_max/unique_columns are not supported on "
                                     "chunked runs; only row_count_min/max are checked")
        total = self.summary.total_rows
        tracker_issues = []
        if q.row_count_min is not None and total < q.row_count_min:
            tracker_issues.append(f"row_count {total} below minimum {q.row_count_min}")
        if q.row_count_max is not None and total > q.row_count_max:
            tracker_issues.append(f"row_count {total} exceeds maximum {q.row_count_max}")
        self.summary.quality_passed = not tracker_issues
        for message in tracker_issues:
            self.summary.journal.record("QualityIssue", severity="FAIL", message=message)
        if tracker_issues:
            raise DataIntegrityError(f"export '{self.export.name}': {len(tracker_issues)} quality check(s) "
                                     "failed: " + "; ".join(tracker_issues))


def chunked_run_for(config, export, options: RunOptions | None = None, **kwargs) -> ExportRun:  # noqa: ANN001, ANN003
    """The run object for an export: ChunkedRun for `mode: chunked`, else ExportRun."""
    if export.mode == "chunked":
        return ChunkedRun(config, export, options, **kwargs)
    return ExportRun(config, export, options, **kwargs)


__all__ = ["ChunkedRun", "chunked_run_for"]
