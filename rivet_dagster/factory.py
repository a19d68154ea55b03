"""`build_definitions(config_path)`: every export in rivet.yaml as Dagster definitions.

One asset per export (assets.py), its blocking `manifest_verified` check (checks.py), a
job and optional schedule per export and the run-failure notifier (automation.py), and the
resources: `rivet` (the config) and `rivet_io_manager` (publish + load). A `chunked` export
is a partitioned chunk asset plus `<export>_manifest` (which carries `manifest_verified` and
`reconcile`), a job for each, and its `<export>_planner` sensor (chunked.py). A bad config
raises the same `ConfigError` the CLI prints, so a broken code location says what to fix.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from rivet_core import api
from rivet_dagster.assets import build_export_asset
from rivet_dagster.automation import build_failure_sensor, build_schedule, export_job
from rivet_dagster.checks import build_manifest_check
from rivet_dagster.chunked import (
    build_chunk_asset,
    build_manifest_asset,
    build_planner_sensor,
    build_reconcile_check,
    manifest_job,
    require_partitionable,
)
from rivet_dagster.io_manager import RivetIOManager
from rivet_dagster.naming import manifest_asset_key
from rivet_dagster.resources import RivetResource


def build_definitions(config_path: str | os.PathLike[str],
                      executor: dg.ExecutorDefinition | None = None) -> dg.Definitions:
    api.limit_malloc_arenas()  # every Dagster process that runs exports loads this first
    path = str(Path(config_path).resolve())
    config = api.load_config(path)
    assets, checks, jobs, schedules, sensors = [], [], [], [], []
    for export in config.exports:
        if export.mode == "chunked":
            require_partitionable(export)
            chunk_job, finalize_job = export_job(config, export), manifest_job(config, export)
            assets += [build_chunk_asset(config, export), build_manifest_asset(config, export)]
            checks += [build_manifest_check(config, export, manifest_asset_key(config, export)),
                       build_reconcile_check(config, export)]
            jobs += [chunk_job, finalize_job]
            sensors.append(build_planner_sensor(config, export, chunk_job, finalize_job))
            continue
        assets.append(build_export_asset(config, export))
        checks.append(build_manifest_check(config, export))
        job = export_job(config, export)
        jobs.append(job)
        schedule = build_schedule(config, export, job)
        if schedule is not None:
            schedules.append(schedule)
    rivet = RivetResource(config_path=path)
    return dg.Definitions(
        assets=assets, asset_checks=checks, jobs=jobs, schedules=schedules,
        sensors=[*sensors, build_failure_sensor(path)],
        resources={"rivet": rivet, "rivet_io_manager": RivetIOManager(rivet=rivet)},
        executor=executor,  # None: Dagster's default; see executors.py / docs/distributed.md
    )
