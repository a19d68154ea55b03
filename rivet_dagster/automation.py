"""Schedules and sensors: cron schedules from `dagster.schedule`, and a run-failure notifier.

- An unpartitioned export with `dagster.schedule` gets a cron schedule of its asset (and
  checks). A daily export's schedule re-exports the last `days_window` days (including
  today) on each tick, so late-arriving rows of recent days are picked up.
- Schedules are STOPPED unless `dagster.schedule_status: RUNNING`.
- `rivet_run_failure_notifier` sends the configured notifications for Dagster runs that
  failed *outside* the core's own finalize (a crashed step, a failed check) — runs the
  core already reported (a failed `run_status` row with this Dagster run id) are skipped,
  so nobody is paged twice.

No `from __future__ import annotations` here (Dagster resolves resource annotations).
"""

from typing import Any

import dagster as dg

from rivet_core import api
from rivet_dagster.naming import asset_key, safe_name
from rivet_dagster.partitions import recent_partition_keys


def _status(config: api.RivetConfig, export: api.ExportConfig) -> dg.DefaultScheduleStatus:
    status = (export.dagster.schedule_status if export.dagster and export.dagster.schedule_status else
              config.dagster.schedule_status if config.dagster and config.dagster.schedule_status else "STOPPED")
    return dg.DefaultScheduleStatus.RUNNING if status == "RUNNING" else dg.DefaultScheduleStatus.STOPPED


def export_job(config: api.RivetConfig, export: api.ExportConfig) -> Any:
    return dg.define_asset_job(f"{safe_name(export.name)}_job",
                               selection=dg.AssetSelection.assets(asset_key(config, export)),
                               tags={"rivet/export": export.name})


def build_schedule(config: api.RivetConfig, export: api.ExportConfig,
                   job: Any) -> dg.ScheduleDefinition | None:
    cron = export.dagster.schedule if export.dagster else None
    if not cron:
        return None
    name = f"{safe_name(export.name)}_schedule"
    if export.mode != "time_window":
        return dg.ScheduleDefinition(name=name, cron_schedule=cron, job=job, execution_timezone="UTC",
                                     default_status=_status(config, export))
    days = max(int(export.days_window or 1), 1)

    @dg.schedule(name=name, cron_schedule=cron, job=job, execution_timezone="UTC",
                 default_status=_status(config, export))
    def _recent_days(context: dg.ScheduleEvaluationContext):
        tick = context.scheduled_execution_time
        for key in recent_partition_keys(days, tick):
            yield dg.RunRequest(run_key=f"{key}@{tick.isoformat()}", partition_key=key)

    return _recent_days


def _exports_of_run(config: api.RivetConfig, run: dg.DagsterRun) -> list[str]:
    by_key = {asset_key(config, e).to_user_string(): e.name for e in config.exports}
    keys = run.asset_selection or set()
    names = [by_key[k.to_user_string()] for k in keys if k.to_user_string() in by_key]
    return names or ([run.tags["rivet/export"]] if "rivet/export" in run.tags else [])


def build_failure_sensor(config_path: str) -> dg.SensorDefinition:
    @dg.run_failure_sensor(name="rivet_run_failure_notifier", monitor_all_code_locations=False,
                           default_status=dg.DefaultSensorStatus.RUNNING)
    def _notify(context: dg.RunFailureSensorContext) -> None:
        config = api.load_config(config_path)
        if config.notifications is None:
            return
        run = context.dagster_run
        state = api.open_state(config)
        try:
            reported = state.core_reported_failure(run.run_id)
        finally:
            state.close()
        if reported:
            return
        message = context.failure_event.message if context.failure_event else "run failed"
        for export_name in _exports_of_run(config, run) or ["(dagster run)"]:
            for warning in api.send_notifications(config.notifications, api.RunNotice(
                    run_id=run.run_id, export_name=export_name, status="failed", rows=0, duration_ms=0,
                    error_message=f"Dagster run {run.run_id} failed: {message}")):
                context.log.warning(warning)

    return _notify
