"""The single-unit dispatcher: plan → (extract → publish, retried) → finalize.

`run_unit` is the one entry point for exports that run as one unit (full, incremental,
time_window, and one time partition). Retries follow reference §3.3: only transient
errors are retried, with exponential backoff and a fresh connection, and NEVER once a
part has been committed — a retry then would duplicate rows, so the run fails with a
data-integrity error instead. The finalize sequence (finalize.py) always runs.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rivet_core.config import ExportConfig, RivetConfig
from rivet_core.destination import Destination, open_destination
from rivet_core.errors import DataIntegrityError
from rivet_core.pipeline.extract import StagedExtract, extract_to_staging
from rivet_core.pipeline.finalize import finalize_run
from rivet_core.pipeline.publish import publish_staged
from rivet_core.pipeline.summary import RunSummary, new_run_id
from rivet_core.plan import DayWindow, UnitPlan, plan_unit
from rivet_core.redact import redact_secrets
from rivet_core.source import backoff_ms, classify_error
from rivet_core.state import StateStore

log = logging.getLogger("rivet.run")


@dataclass
class RunOptions:
    validate: bool = False
    dagster_run_id: str | None = None
    window: DayWindow | None = None


def staging_root(config: RivetConfig) -> Path:
    return config.config_dir / ".rivet" / "staging"


def new_summary(plan: UnitPlan, dest: Destination, options: RunOptions) -> RunSummary:
    export = plan.export
    summary = RunSummary(run_id=new_run_id(export.name), export_name=export.name, mode=export.mode,
                         format=export.format, compression=plan.writer_options.compression)
    summary.destination_kind, summary.destination_uri = dest.kind, dest.uri
    summary.tuning_profile = plan.tuning.profile
    summary.dagster_run_id = options.dagster_run_id
    summary.partition_key = plan.window.label if plan.window else None
    summary.state_backed = True
    summary.journal.record(
        "PlanResolved", export_name=export.name, base_query=export.resolved_query,
        strategy=plan.strategy, format=export.format, compression=summary.compression,
        destination_type=dest.kind, tuning_profile=plan.tuning.profile, validate=options.validate,
        resume=False, resumable=False)
    for w in plan.warnings:
        summary.journal.record("PlanWarning", rule="plan", message=w)
    return summary


def _skip_or_empty(plan: UnitPlan, summary: RunSummary, staged: StagedExtract) -> bool:
    """0 rows: no file is written. skip_empty → status skipped with a reason."""
    if staged.rows:
        return False
    log.info("export '%s': no data to export", plan.export.name)
    if plan.export.skip_empty:
        summary.status = "skipped"
        summary.skip_reason = (f"no new rows since cursor '{plan.export.cursor_column}'"
                               if plan.export.mode == "incremental" else "source returned 0 rows")
    return True


def extract_and_publish(plan: UnitPlan, summary: RunSummary, state: StateStore, dest: Destination,
                        staging_dir: Path) -> None:
    """One attempt: stream to staging (quality gate inside), then publish the parts."""
    staged = extract_to_staging(plan, summary, staging_dir)
    if _skip_or_empty(plan, summary, staged):
        from rivet_core.manifest import schema_fingerprint
        from rivet_core.pipeline.schema_drift import check_schema_drift

        summary.schema_fingerprint = schema_fingerprint(staged.schema)
        check_schema_drift(state, summary, staged.schema, plan.export.on_schema_drift or "warn")
        summary.cursor_column = plan.export.cursor_column if plan.cursor_column else None
        summary.cursor_low = plan.cursor_low
        return
    publish_staged(plan, summary, state, dest, staged)


def run_with_retries(plan: UnitPlan, summary: RunSummary, state: StateStore, dest: Destination,
                     staging_dir: Path) -> None:
    """Retry transient failures with backoff; never after a part was committed."""
    attempt = 0
    while True:
        try:
            extract_and_publish(plan, summary, state, dest, staging_dir / f"attempt{attempt}")
            return
        except Exception as exc:
            decision = classify_error(exc)
            if not decision.transient or attempt >= plan.tuning.max_retries:
                raise
            if summary.files_committed > 0:
                raise DataIntegrityError(
                    f"export '{plan.export.name}': transient error after {summary.files_committed} "
                    "part(s) were committed — cannot safely retry (would duplicate rows). "
                    f"Re-run the export. Cause: {redact_secrets(exc)}") from exc
            attempt += 1
            wait = backoff_ms(attempt, plan.tuning.retry_backoff_ms, decision.extra_delay_ms)
            summary.retries = attempt
            summary.journal.record("RetryAttempted", attempt=attempt, reason=str(exc), backoff_ms=wait)
            log.warning("export '%s': transient error (%s); retry %d/%d in %d ms", plan.export.name,
                        redact_secrets(exc), attempt, plan.tuning.max_retries, wait)
            time.sleep(wait / 1000.0)  # backoff before reconnecting, not synchronisation


def run_unit(config: RivetConfig, export: ExportConfig, options: RunOptions | None = None,
             *, state: StateStore | None = None, notifications: Any = "config") -> RunSummary:
    """Run one export unit end to end and return its summary (never raises for run errors;
    planning/config errors raise ConfigError before anything is written)."""
    options = options or RunOptions()
    own_state = state is None
    state = state or StateStore.open(config.config_path)
    try:
        stored = state.get_cursor(export.name) if export.mode == "incremental" and not options.window else None
        plan = plan_unit(config, export, stored_cursor=stored, window=options.window)
        dest = open_destination(plan.dest_spec, config.config_dir)
        summary = new_summary(plan, dest, options)
        try:
            state.begin_run(summary.run_id, export.name, dest.uri, options.dagster_run_id)
        except Exception as exc:  # noqa: BLE001 - the ledger is advisory
            summary.add_warning(f"run_status write failed: {redact_secrets(exc)}")
        staging_dir = staging_root(config) / summary.run_id
        error: BaseException | None = None
        try:
            run_with_retries(plan, summary, state, dest, staging_dir)
        except Exception as exc:  # noqa: BLE001 - every failure is reported through finalize
            error = exc
        finally:
            shutil.rmtree(staging_dir, ignore_errors=True)
        return finalize_run(plan, summary, state, dest, error=error, validate=options.validate,
                            notifications=config.notifications if notifications == "config" else notifications,
                            report_root=config.config_dir)
    finally:
        if own_state:
            state.close()
