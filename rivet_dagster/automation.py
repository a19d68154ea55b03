"""Schedules and sensors: cron schedules from `dagster.schedule`, and a run-failure notifier.

- A schedule launches its export's asset (and checks) by asset selection on Dagster's
  implicit asset job (`__ASSET_JOB`), which every code location with assets has anyway: a
  schedule with a job of its own, or with an asset-selection `target` (for which Dagster
  makes an anonymous job), would cost a job resolution and snapshot each, and a code
  location's load time would grow with the square of its exports (issue 34). With
  `dagster.jobs: per_export` it targets the export's own `<export>_job` instead.
- An unpartitioned export with `dagster.schedule` gets a cron schedule of its asset (and
  checks). A time-partitioned export's schedule re-exports the last `days_window` complete
  partitions on each tick, so late-arriving rows of recent windows are picked up — only
  partitions inside the start/end dates; as ranges when a backfill policy is set.
  Schedules run in `dagster.timezone` (default UTC).
- Schedules are STOPPED unless `dagster.schedule_status: RUNNING`.
- `rivet_run_failure_notifier` sends the configured notifications for Dagster runs that
  failed *outside* the core's own finalize (a crashed step, a failed check) — runs the
  core already reported (a failed `run_status` row with this Dagster run id) are skipped,
  so nobody is paged twice.

No `from __future__ import annotations` here (Dagster resolves resource annotations).
"""

from datetime import timedelta
from typing import Any

import dagster as dg

from rivet_core import api
from rivet_dagster.dagster_compat import IMPLICIT_ASSET_JOB_NAME
from rivet_dagster.lineage import source_table_key
from rivet_dagster.naming import asset_key, derived_name
from rivet_dagster.partitions import (
    backfill_policy,
    export_partitions,
    partition_timezone,
    recent_partition_keys,
)


def _status(config: api.RivetConfig, export: api.ExportConfig) -> dg.DefaultScheduleStatus:
    status = (export.dagster.schedule_status if export.dagster and export.dagster.schedule_status else
              config.dagster.schedule_status if config.dagster and config.dagster.schedule_status else "STOPPED")
    return dg.DefaultScheduleStatus.RUNNING if status == "RUNNING" else dg.DefaultScheduleStatus.STOPPED


def per_export_jobs(config: api.RivetConfig) -> bool:
    """Whether the config opted into a job per export (`dagster.jobs: per_export`)."""
    return config.dagster is not None and config.dagster.jobs == "per_export"


def run_tags(config: api.RivetConfig, export: api.ExportConfig) -> dict[str, str]:
    """The tags of every run rivet asks for: they name the export and its config (the
    run-failure notifier reads them, `_exports_of_run`)."""
    return {"rivet/export": export.name, "rivet/config": str(config.config_path)}


def export_job(config: api.RivetConfig, export: api.ExportConfig) -> Any:
    """`<export>_job` (only with `dagster.jobs: per_export`)."""
    return dg.define_asset_job(derived_name(config, export, "job"),
                               selection=dg.AssetSelection.assets(asset_key(config, export)),
                               tags=run_tags(config, export))


def build_schedule(config: api.RivetConfig, export: api.ExportConfig,
                   job: Any | None = None) -> dg.ScheduleDefinition | None:
    """The export's cron schedule, in `dagster.timezone` (default UTC). A time-partitioned
    export's tick re-exports its last `days_window` complete partitions (of its granularity:
    hours, days, weeks or months); with a backfill policy they go as ranges (one run and one
    source query per range), else one run per partition. Its runs select the export's asset
    on the implicit asset job (the module docstring), or run `job` when given."""
    cron = export.dagster.schedule if export.dagster else None
    if not cron:
        return None
    name = derived_name(config, export, "schedule")
    zone = partition_timezone(export)
    target: dict[str, Any] = {"job": job} if job is not None else {"job_name": IMPLICIT_ASSET_JOB_NAME}
    # The implicit asset job holds every asset of the code location: a request must select.
    selection = None if job is not None else [asset_key(config, export)]
    tags = run_tags(config, export)
    if export.mode != "time_window":
        @dg.schedule(name=name, cron_schedule=cron, execution_timezone=zone,
                     default_status=_status(config, export), **target)
        def _whole(context: dg.ScheduleEvaluationContext):
            return dg.RunRequest(asset_selection=selection, tags=tags)

        return _whole
    count = max(int(export.days_window or 1), 1)
    partitions = export_partitions(config, export)
    policy = backfill_policy(export)
    per_run = (1 if policy is None else policy.max_partitions_per_run or count)

    @dg.schedule(name=name, cron_schedule=cron, execution_timezone=zone,
                 default_status=_status(config, export), **target)
    def _recent_partitions(context: dg.ScheduleEvaluationContext):
        tick = context.scheduled_execution_time
        keys = recent_partition_keys(count, tick, within=partitions)
        for i in range(0, len(keys), per_run):
            first, last = keys[i], keys[min(i + per_run, len(keys)) - 1]
            if first == last:
                yield dg.RunRequest(run_key=f"{first}@{tick.isoformat()}", partition_key=first,
                                    asset_selection=selection, tags=tags)
            else:
                yield dg.RunRequest(run_key=f"{first}...{last}@{tick.isoformat()}", asset_selection=selection,
                                    tags={**tags, "dagster/asset_partition_range_start": first,
                                          "dagster/asset_partition_range_end": last})

    return _recent_partitions


def automation_condition(config: api.RivetConfig, export: api.ExportConfig) -> dg.AutomationCondition | None:
    """`dagster.automation_condition` as Dagster's condition: `eager`, `on_missing`, or
    `{on_cron: …}` (in the export's `dagster.timezone`, default UTC). None when unset.
    A partitioned export's condition acts on its latest partition (Dagster's own rule)."""
    own = export.dagster
    wanted = own.automation_condition if own else None
    if wanted is None:
        return None
    ac = dg.AutomationCondition
    source = source_table_key(config, export)
    if source is None:  # a query export has no upstream asset to wait for
        return (ac.eager() if wanted == "eager" else ac.on_missing() if wanted == "on_missing"
                else ac.on_cron(wanted.on_cron, cron_timezone=own.timezone or "UTC"))
    # The source table asset is external: nothing materializes it, so Dagster's conditions
    # would wait for it forever ("dependency missing" / "not updated since the tick").
    # Ignore it where it would block; `eager` still reacts when someone reports the table
    # updated (an observation or a runless asset event).
    table = dg.AssetSelection.assets(source)
    if wanted == "on_missing":
        return ac.on_missing().ignore(table)
    if wanted == "eager":
        return (ac.eager().without(~ac.any_deps_missing()) & ~ac.any_deps_missing().ignore(table)).with_label("eager")
    return ac.on_cron(wanted.on_cron, cron_timezone=own.timezone or "UTC").ignore(table)


def freshness_policy(config: api.RivetConfig, export: api.ExportConfig) -> dg.FreshnessPolicy | None:
    """`dagster.freshness` as a time-window freshness policy (warn, then fail)."""
    wanted = export.dagster.freshness if export.dagster else None
    if wanted is None:
        return None
    warn = timedelta(minutes=wanted.warn_after_minutes) if wanted.warn_after_minutes else None
    return dg.FreshnessPolicy.time_window(fail_window=timedelta(minutes=wanted.fail_after_minutes),
                                          warn_window=warn)


_PLANNED = {dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED, dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED}


def _exports_of_run(exports_by_key: dict[str, str], config_path: str, run: dg.DagsterRun,
                    instance: dg.DagsterInstance) -> list[str]:
    """The exports of this config that a run touched: the assets it selected or planned to
    materialize or check (a checks-only run selects no asset, and a job's run records no
    selection), else the export named by the job's tags when they name this config. Empty
    for every other run, which the notifier then ignores."""
    keys = set(run.asset_selection or ()) | {c.asset_key for c in run.asset_check_selection or ()}
    with api.best_effort("read the run's planned assets"):  # its selection and tags still decide
        for record in instance.get_records_for_run(run.run_id, of_type=_PLANNED, limit=1000).records:
            event = record.event_log_entry.dagster_event
            key = event.asset_key if event else None
            key = key or getattr(event.event_specific_data if event else None, "asset_key", None)
            if key is not None:
                keys.add(key)
    names = sorted({exports_by_key[k.to_user_string()] for k in keys if k.to_user_string() in exports_by_key})
    if names:
        return names
    tagged = run.tags.get("rivet/export")
    return [tagged] if tagged and run.tags.get("rivet/config") == config_path else []


def build_failure_sensor(config_path: str, name: str, exports_by_key: dict[str, str]) -> dg.SensorDefinition:
    """The opt-in run-failure notifier of one config: it sends the config's notifications for
    a failed Dagster run that materialized or checked one of *this config's* exports
    (`exports_by_key`: asset key → export name), unless the core already reported it. A
    user's unrelated failing job is ignored."""

    @dg.run_failure_sensor(name=name, monitor_all_code_locations=False,
                           default_status=dg.DefaultSensorStatus.RUNNING,
                           description=f"Sends the notifications of {config_path} when a run of its "
                                       "exports fails outside rivet's own finalize (opt-in).")
    def _notify(context: dg.RunFailureSensorContext) -> None:
        run = context.dagster_run
        exports = _exports_of_run(exports_by_key, config_path, run, context.instance)
        if not exports:
            return
        config = api.load_config(config_path)
        if config.notifications is None:
            return
        state = api.open_state(config)
        try:
            reported = state.core_reported_failure(run.run_id)
        finally:
            state.close()
        if reported:
            return
        message = context.failure_event.message if context.failure_event else "run failed"
        # what failed in the step: one step runs several exports and their checks (multi_asset.py)
        errors = [e.event_specific_data.error.message.strip() for e in context.get_step_failure_events()
                  if e.event_specific_data is not None and e.event_specific_data.error is not None]
        if errors:
            message = api.redact_secrets(f"{message} — {'; '.join(errors)}")
        for export_name in exports:
            for warning in api.send_notifications(config.notifications, api.RunNotice(
                    run_id=run.run_id, export_name=export_name, status="failed", rows=0, duration_ms=0,
                    error_message=f"Dagster run {run.run_id} failed: {message}")):
                context.log.warning(warning)

    return _notify
