"""`build_definitions(config_path)`: every export in rivet.yaml as Dagster definitions that
merge into any code location.

Per export, by mode:
- `full`, `incremental` (not `partition_by`): one asset of the config's subsettable
  multi-asset, whose one step runs the selected exports with their checks, the blocking
  `manifest_verified` among them (multi_asset.py; `dagster.multi_asset: false`: one asset
  each, as `time_window`), and a schedule when `dagster.schedule` is set (automation.py);
- `time_window`: one asset (assets.py) with its blocking `manifest_verified` check
  (checks.py), and a schedule when `dagster.schedule` is set;
- `chunked` with stable windows (id ranges, days, keys): the partitioned chunk asset and
  the `<export>_manifest` asset (carrying `manifest_verified` and `reconcile`), planned by
  the config's one planner sensor `<config stem>_chunk_planner` (chunked.py), which loops
  over every such export of the config;
- `chunked` whose windows cannot be partition keys (`chunk_count`, `chunk_dense`,
  `keyset_incremental`, or `dagster.chunk_partitions: false`): one asset that runs the
  whole checkpointed chunked run (chunked_run.py).
- `cdc`: one asset per export, one bounded drain per materialization, with its
  `cdc_continuity` and `manifest_verified` checks (cdc.py).
Each export depends on its source table's asset (lineage.py).

No job per export (issue 34): Dagster resolves and snapshots every job of a code location,
each against the whole asset graph, so a job per export (and four per chunked export) made
the load time grow with the square of the exports — 1,000 took 43 s. Schedules and the
planner select the export's assets on Dagster's implicit asset job instead, so a config adds
no job, one sensor, and a schedule per scheduled export; `dagster.jobs: per_export` brings
the per-export jobs back for those who launch them by name (`export_job`, `planner_jobs`).

What makes the result embeddable (`dg.Definitions.merge` with other configs and the user's
own definitions): no per-config resources — asset bodies know their config path, and the
one IO manager instance is shared and stateless (io_manager.py); job, schedule and
partitions names derive from asset keys (naming.py), which are unique in a code location,
the planner's from the config file's name behind the key prefix (`planner_name`);
source table specs are equal whoever builds them; the run-failure notifier is opt-in and
watches only this config's exports; nothing process-wide changes (the demo code location,
definitions.py, tunes malloc for itself).

A bad config raises the same `ConfigError` the CLI prints, so a broken code location says
what to fix.

Dagster's beta and preview warnings for the APIs rivet itself chooses (code references, a
backfill policy, `map_asset_specs` for `owners`/`tags`) are silenced while the definitions
are built: the user did not write those calls and cannot act on them, and every code server
and run worker that loads the definitions would print them again.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import dagster as dg

from rivet_core import api
from rivet_dagster.asset_options import retry_policy, shared_asset_kwargs
from rivet_dagster.assets import build_export_asset, describe
from rivet_dagster.automation import (
    build_failure_sensor,
    build_schedule,
    export_job,
    per_export_jobs,
)
from rivet_dagster.buckets import partitioned_body
from rivet_dagster.cdc import build_cdc_asset
from rivet_dagster.checks import build_manifest_check
from rivet_dagster.chunked import (
    build_chunk_asset,
    build_manifest_asset,
    build_planner_sensor,
    build_reconcile_check,
    planner_jobs,
    planner_name,
    require_partitionable,
)
from rivet_dagster.chunked_run import whole_run_body, whole_run_reason
from rivet_dagster.config_block import ExportDagsterConfig
from rivet_dagster.config_path import caller_dir, resolve_config_path
from rivet_dagster.executors import resolve_executor
from rivet_dagster.io_manager import IO_MANAGER_KEY, RIVET_IO_MANAGER
from rivet_dagster.lineage import source_table_specs
from rivet_dagster.multi_asset import build_multi_assets, in_multi_asset, multi_asset_enabled
from rivet_dagster.naming import asset_key, check_unique_names, manifest_asset_key
from rivet_dagster.naming import key_prefix as export_key_prefix
from rivet_dagster.s3 import s3_resources
from rivet_dagster.store_clients import use_resource, with_store_clients
from rivet_dagster.termination import stops_on_terminate


def _apply_outer_prefix(config: api.RivetConfig, prefix: Sequence[str], group: str | None) -> None:
    """Put the embedding's key prefix in front of every export's own, and its group over
    theirs (a component instance or a caller's `key_prefix=`/`group_name=`)."""
    if not prefix and not group:
        return
    for export in config.exports:
        block = export.dagster if export.dagster is not None else ExportDagsterConfig()
        update: dict[str, object] = {}
        if prefix:
            update["key_prefix"] = [*prefix, *export_key_prefix(config, export)]
        if group:
            update["group"] = group
        export.dagster = block.model_copy(update=update)


def _whole_run_asset(config: api.RivetConfig, export: api.ExportConfig, reason: str) -> dg.AssetsDefinition:
    key = asset_key(config, export)
    description = describe(config, export) + (
        f"\n- runs as one checkpointed chunked run per materialization ({reason}: its windows are not "
        "stable partition keys); a retried run resumes the windows already committed")
    return dg.asset(
        key=key, description=description,
        kinds={config.source.type, export.format, export.destination.type},
        retry_policy=retry_policy(config, export), **shared_asset_kwargs(config, export, role="run"),
    )(with_store_clients(export)(stops_on_terminate(export.name, "the chunked run")(
        whole_run_body(str(config.config_path), export.name))))


def _partitioned_asset(config: api.RivetConfig, export: api.ExportConfig) -> dg.AssetsDefinition:
    """A `partition_by` export: one asset running every date bucket (rivet_dagster/buckets.py)."""
    description = describe(config, export) + (
        f"\n- split by `{export.partition_by}` into {export.partition_granularity} buckets, each its own "
        "prefix with its own manifest (listed in the materialization; not Dagster partitions)")
    return dg.asset(
        key=asset_key(config, export), description=description,
        kinds={config.source.type, export.format, export.destination.type},
        retry_policy=retry_policy(config, export), **shared_asset_kwargs(config, export, role="run"),
    )(with_store_clients(export)(partitioned_body(str(config.config_path), export.name)))


def build_definitions(config_path: str | os.PathLike[str], executor: dg.ExecutorDefinition | str | None = "default", *,
                      key_prefix: str | Sequence[str] = (), group_name: str | None = None,
                      owners: Sequence[str] = (), tags: Mapping[str, str] | None = None,
                      source_assets: bool | Callable[[dg.AssetKey], bool] = True,
                      notify_run_failures: bool = False, s3_resource_key: str | None = None,
                      gcs_resource_key: str | None = None, azure_resource_key: str | None = None,
                      relative_to: str | os.PathLike[str] | None = None) -> dg.Definitions:
    """Dagster definitions for every export of the rivet.yaml at `config_path`.

    `key_prefix` goes in front of every asset key (and of the job/sensor names derived
    from them), `group_name` replaces the configs' groups, `owners`/`tags` are added to
    every export asset. `source_assets=False` leaves the source table assets out (the
    exports still depend on their keys — e.g. when another integration defines them); a
    callable keeps only the source keys it accepts (the component defines each source table
    once per code location).
    `notify_run_failures=True` adds the run-failure notifier of this config.
    `s3_resource_key` names the project's own `dagster_aws.s3.S3Resource` for every S3
    export without one of its own (default: one built from rivet.yaml, rivet_dagster/s3.py);
    `gcs_resource_key` / `azure_resource_key` name a dagster-gcp `GCSResource` / a
    dagster-azure `AzureBlobStorageResource` or `ADLS2Resource` for every GCS / Azure export
    without one of its own (default: the client built from rivet.yaml;
    rivet_dagster/store_clients.py).
    `executor`: `"default"` runs rivet's jobs in-process (RIVET_DAGSTER_EXECUTOR overrides it),
    None leaves the executor to the project (rivet_dagster/executors.py `resolve_executor`).
    A relative
    `config_path` resolves against `relative_to`, else the calling module's folder, else the
    current directory."""
    base = Path(relative_to) if relative_to is not None else caller_dir()
    path = resolve_config_path(config_path, base)
    with warnings.catch_warnings():  # rivet's own beta/preview API choices (the module docstring)
        warnings.simplefilter("ignore", dg.BetaWarning)
        warnings.simplefilter("ignore", dg.PreviewWarning)
        config = api.load_config(path)
        prefix = [key_prefix] if isinstance(key_prefix, str) else list(key_prefix)
        _apply_outer_prefix(config, prefix, group_name)
        for kind, resource_key in (("s3", s3_resource_key), ("gcs", gcs_resource_key),
                                   ("azure", azure_resource_key)):
            if resource_key:
                use_resource(config, kind, resource_key)
        check_unique_names(config, config.exports)

        per_export = per_export_jobs(config)
        assets: list[dg.AssetsDefinition | dg.AssetSpec] = []
        checks, jobs, schedules, sensors = [], [], [], []
        chunked: list[api.ExportConfig] = []  # partitioned chunked exports: one planner for them all
        exports_by_key: dict[str, str] = {}
        multi = multi_asset_enabled(config)
        one_step: list[api.ExportConfig] = []  # the unpartitioned exports of one step (multi_asset.py)
        for export in config.exports:
            exports_by_key[asset_key(config, export).to_user_string()] = export.name
            if export.mode == "cdc":  # one bounded drain per materialization, its checks inside (cdc.py)
                assets.append(build_cdc_asset(config, export))
                schedules += [s for s in [build_schedule(config, export, None)] if s is not None]
                continue
            reason = whole_run_reason(export) if export.mode == "chunked" else None
            if export.mode == "chunked" and reason is None and not export.partition_by:
                require_partitionable(export)
                assets += [build_chunk_asset(config, export), build_manifest_asset(config, export)]
                checks += [build_manifest_check(config, export, manifest_asset_key(config, export)),
                           build_reconcile_check(config, export)]
                chunked.append(export)
                exports_by_key[manifest_asset_key(config, export).to_user_string()] = export.name
                continue
            if export.partition_by:  # one asset, its buckets listed in the materialization
                assets.append(_partitioned_asset(config, export))
                checks.append(build_manifest_check(config, export))
            elif reason is None and multi and in_multi_asset(export):
                one_step.append(export)  # its asset, checks and step: the config's multi-asset below
            else:
                assets.append(build_export_asset(config, export) if reason is None
                              else _whole_run_asset(config, export, reason))
                checks.append(build_manifest_check(config, export))
            job = export_job(config, export) if per_export else None
            jobs += [job] if job is not None else []
            schedule = build_schedule(config, export, job)
            if schedule is not None:
                schedules.append(schedule)
        if one_step:
            assets += build_multi_assets(config, one_step)
        if chunked:
            by_export = {e.name: planner_jobs(config, e) for e in chunked} if per_export else None
            jobs += [job for kinds in (by_export or {}).values() for job in kinds.values()]
            sensors.append(build_planner_sensor(config, chunked, planner_name(config, prefix), by_export))
        if notify_run_failures:
            name = "__".join([*prefix, "rivet_run_failure_notifier"])
            sensors.append(build_failure_sensor(str(path), name, exports_by_key))
        defs = dg.Definitions(assets=assets, asset_checks=checks, jobs=jobs, schedules=schedules,
                              sensors=sensors,
                              resources={IO_MANAGER_KEY: RIVET_IO_MANAGER, **s3_resources(config.exports)},
                              executor=resolve_executor(executor))  # default: in-process (executors.py)
        if owners or tags:
            defs = defs.map_asset_specs(func=lambda spec: spec.merge_attributes(
                owners=list(owners), tags=dict(tags or {})))
        if source_assets:
            keep = source_assets if callable(source_assets) else (lambda _key: True)
            specs = [spec for spec in source_table_specs(config, config.exports) if keep(spec.key)]
            defs = dg.Definitions.merge(defs, dg.Definitions(assets=specs))
        return defs

