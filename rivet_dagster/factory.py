"""`build_definitions(config_path)`: every export in rivet.yaml as Dagster definitions that
merge into any code location.

Per export, by mode — one builder per kind of export in the table `MODE_BUILDERS`
(`export_kind` picks the entry; a builder returns the export's assets, checks, jobs,
schedules and sensors as one `Built`, and a kind whose exports share definitions builds
those once, over all of them):
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
  whole checkpointed chunked run (chunked_run.py);
- `partition_by` (any mode): one asset running every date bucket, each its own prefix and
  manifest (buckets.py);
- `cdc`: one asset per export, one bounded drain per materialization, with its
  `cdc_continuity` and `manifest_verified` checks (cdc.py).
Each export depends on its source table's asset (lineage.py). The keyword options of
`build_definitions` travel as one frozen `DefinitionsOptions`.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
from rivet_dagster.naming import asset_key, check_unique_names, manifest_asset_key, source_kind
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
        kinds={source_kind(config), export.format, export.destination.type},
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
        kinds={source_kind(config), export.format, export.destination.type},
        retry_policy=retry_policy(config, export), **shared_asset_kwargs(config, export, role="run"),
    )(with_store_clients(export)(partitioned_body(str(config.config_path), export.name)))


@dataclass(frozen=True)
class DefinitionsOptions:
    """`build_definitions`' keyword options, grouped: how the definitions are named and
    embedded (`key_prefix`, `group_name`, `owners`, `tags`, `source_assets`), what is added
    (`notify_run_failures`) and whose object-store clients the exports use (the three
    `*_resource_key`). Frozen: one value describes one build."""

    key_prefix: tuple[str, ...] = ()
    group_name: str | None = None
    owners: tuple[str, ...] = ()
    tags: Mapping[str, str] | None = None
    source_assets: bool | Callable[[dg.AssetKey], bool] = True
    notify_run_failures: bool = False
    s3_resource_key: str | None = None
    gcs_resource_key: str | None = None
    azure_resource_key: str | None = None

    def resource_keys(self) -> dict[str, str | None]:
        """Store kind → the project's resource key for it (None: rivet builds the client)."""
        return {"s3": self.s3_resource_key, "gcs": self.gcs_resource_key, "azure": self.azure_resource_key}


@dataclass
class Built:
    """What one mode builder contributes to the code location."""

    assets: list[dg.AssetsDefinition | dg.AssetSpec] = field(default_factory=list)
    checks: list[dg.AssetChecksDefinition] = field(default_factory=list)
    jobs: list[Any] = field(default_factory=list)
    schedules: list[dg.ScheduleDefinition] = field(default_factory=list)
    sensors: list[dg.SensorDefinition] = field(default_factory=list)
    #: asset key (user string) → export name, for the run-failure notifier
    exports_by_key: dict[str, str] = field(default_factory=dict)

    def add(self, other: Built) -> None:
        self.assets += other.assets
        self.checks += other.checks
        self.jobs += other.jobs
        self.schedules += other.schedules
        self.sensors += other.sensors
        self.exports_by_key.update(other.exports_by_key)


@dataclass(frozen=True)
class BuildContext:
    """What every mode builder reads: the loaded config, the embedding's key prefix, and
    whether the config asked for a job per export (`dagster.jobs: per_export`)."""

    config: api.RivetConfig
    prefix: list[str]
    per_export_jobs: bool


def _scheduled(ctx: BuildContext, export: api.ExportConfig, built: Built) -> Built:
    """An unpartitioned or time-partitioned export's own automation, added to `built`: its
    job (only with `dagster.jobs: per_export`) and its `dagster.schedule` (automation.py)."""
    job = export_job(ctx.config, export) if ctx.per_export_jobs else None
    built.jobs += [job] if job is not None else []
    schedule = build_schedule(ctx.config, export, job)
    built.schedules += [schedule] if schedule is not None else []
    built.exports_by_key[asset_key(ctx.config, export).to_user_string()] = export.name
    return built


def _single_asset(ctx: BuildContext, export: api.ExportConfig) -> Built:
    """`time_window` (and `full`/`incremental` outside the multi-asset): one asset with its
    blocking `manifest_verified` check (assets.py, checks.py)."""
    return _scheduled(ctx, export, Built(assets=[build_export_asset(ctx.config, export)],
                                         checks=[build_manifest_check(ctx.config, export)]))


def _buckets(ctx: BuildContext, export: api.ExportConfig) -> Built:
    """`partition_by`: one asset running every date bucket (buckets.py)."""
    return _scheduled(ctx, export, Built(assets=[_partitioned_asset(ctx.config, export)],
                                         checks=[build_manifest_check(ctx.config, export)]))


def _whole_run(ctx: BuildContext, export: api.ExportConfig) -> Built:
    """A chunked export whose windows cannot be partition keys: one checkpointed run
    (chunked_run.py)."""
    reason = whole_run_reason(export) or ""
    return _scheduled(ctx, export, Built(assets=[_whole_run_asset(ctx.config, export, reason)],
                                         checks=[build_manifest_check(ctx.config, export)]))


def _cdc(ctx: BuildContext, export: api.ExportConfig) -> Built:
    """`cdc`: one asset per export, one bounded drain per materialization, its checks
    (`cdc_continuity`, `manifest_verified`) inside the asset (cdc.py)."""
    return _scheduled(ctx, export, Built(assets=[build_cdc_asset(ctx.config, export)]))


def _in_multi_asset(ctx: BuildContext, export: api.ExportConfig) -> Built:
    """`full`/`incremental`: its asset, checks and step come from the config's multi-asset
    (`_multi_assets`); here only its automation."""
    return _scheduled(ctx, export, Built())


def _multi_assets(ctx: BuildContext, exports: list[api.ExportConfig]) -> Built:
    """The config's subsettable multi-asset(s), one step for all of `exports` (multi_asset.py)."""
    return Built(assets=list(build_multi_assets(ctx.config, exports)))


def _chunk_partitions(ctx: BuildContext, export: api.ExportConfig) -> Built:
    """A chunked export with stable windows: the partitioned chunk asset and
    `<export>_manifest`, with `manifest_verified` and `reconcile` on the manifest
    (chunked.py). No schedule: the config's planner requests its runs (`_planner`)."""
    require_partitionable(export)
    manifest_key = manifest_asset_key(ctx.config, export)
    return Built(assets=[build_chunk_asset(ctx.config, export), build_manifest_asset(ctx.config, export)],
                 checks=[build_manifest_check(ctx.config, export, manifest_key),
                         build_reconcile_check(ctx.config, export)],
                 exports_by_key={asset_key(ctx.config, export).to_user_string(): export.name,
                                 manifest_key.to_user_string(): export.name})


def _planner(ctx: BuildContext, exports: list[api.ExportConfig]) -> Built:
    """The one planner sensor of the config's chunk-partitioned exports (and, with
    `dagster.jobs: per_export`, their jobs by run kind)."""
    by_export = {e.name: planner_jobs(ctx.config, e) for e in exports} if ctx.per_export_jobs else None
    jobs = [job for kinds in (by_export or {}).values() for job in kinds.values()]
    sensor = build_planner_sensor(ctx.config, exports, planner_name(ctx.config, ctx.prefix), by_export)
    return Built(jobs=jobs, sensors=[sensor])


@dataclass(frozen=True)
class ModeBuilder:
    """How the exports of one kind become definitions: `each` per export (in config order),
    then `together` once over all of them when the kind shares definitions (one multi-asset
    step, one planner sensor)."""

    each: Callable[[BuildContext, api.ExportConfig], Built]
    together: Callable[[BuildContext, list[api.ExportConfig]], Built] | None = None


#: The table: an export's kind (`export_kind`) → its builder. The order of the entries is the
#: order of the shared (`together`) definitions in the result.
MODE_BUILDERS: dict[str, ModeBuilder] = {
    "multi_asset": ModeBuilder(_in_multi_asset, _multi_assets),
    "chunk_partitions": ModeBuilder(_chunk_partitions, _planner),
    "asset": ModeBuilder(_single_asset),
    "buckets": ModeBuilder(_buckets),
    "whole_run": ModeBuilder(_whole_run),
    "cdc": ModeBuilder(_cdc),
}


def export_kind(config: api.RivetConfig, export: api.ExportConfig, multi: bool) -> str:
    """Which `MODE_BUILDERS` entry builds `export` (the module docstring, per mode)."""
    if export.mode == "cdc":
        return "cdc"
    if export.partition_by:
        return "buckets"
    if export.mode == "chunked":
        return "whole_run" if whole_run_reason(export) is not None else "chunk_partitions"
    if multi and in_multi_asset(export):
        return "multi_asset"
    return "asset"


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
    current directory. The keyword options travel as one `DefinitionsOptions`
    (`definitions_from_options` takes one directly)."""
    base = Path(relative_to) if relative_to is not None else caller_dir()
    options = DefinitionsOptions(
        key_prefix=(key_prefix,) if isinstance(key_prefix, str) else tuple(key_prefix), group_name=group_name,
        owners=tuple(owners), tags=tags, source_assets=source_assets, notify_run_failures=notify_run_failures,
        s3_resource_key=s3_resource_key, gcs_resource_key=gcs_resource_key, azure_resource_key=azure_resource_key)
    return definitions_from_options(resolve_config_path(config_path, base), executor, options)


def definitions_from_options(path: Path, executor: dg.ExecutorDefinition | str | None,
                             options: DefinitionsOptions) -> dg.Definitions:
    """`build_definitions` for a resolved config path: each export built by its mode's
    builder (`MODE_BUILDERS`), the shared definitions once per kind, then what the options add."""
    with warnings.catch_warnings():  # rivet's own beta/preview API choices (the module docstring)
        warnings.simplefilter("ignore", dg.BetaWarning)
        warnings.simplefilter("ignore", dg.PreviewWarning)
        config = api.load_config(path)
        prefix = list(options.key_prefix)
        _apply_outer_prefix(config, prefix, options.group_name)
        for kind, resource_key in options.resource_keys().items():
            if resource_key:
                use_resource(config, kind, resource_key)
        check_unique_names(config, config.exports)

        ctx = BuildContext(config, prefix, per_export_jobs(config))
        multi = multi_asset_enabled(config)
        by_kind: dict[str, list[api.ExportConfig]] = {kind: [] for kind in MODE_BUILDERS}
        built = Built()
        for export in config.exports:
            kind = export_kind(config, export, multi)
            by_kind[kind].append(export)
            built.add(MODE_BUILDERS[kind].each(ctx, export))
        for kind, builder in MODE_BUILDERS.items():
            if builder.together is not None and by_kind[kind]:
                built.add(builder.together(ctx, by_kind[kind]))
        if options.notify_run_failures:
            name = "__".join([*prefix, "rivet_run_failure_notifier"])
            built.sensors.append(build_failure_sensor(str(path), name, built.exports_by_key))
        return _embedded(config, options, dg.Definitions(
            assets=built.assets, asset_checks=built.checks, jobs=built.jobs, schedules=built.schedules,
            sensors=built.sensors, resources={IO_MANAGER_KEY: RIVET_IO_MANAGER, **s3_resources(config.exports)},
            executor=resolve_executor(executor)))  # default: in-process (executors.py)


def _embedded(config: api.RivetConfig, options: DefinitionsOptions, defs: dg.Definitions) -> dg.Definitions:
    """`defs` with the embedding's owners and tags on every export asset, and the source
    table assets it keeps (`source_assets`)."""
    if options.owners or options.tags:
        defs = defs.map_asset_specs(func=lambda spec: spec.merge_attributes(
            owners=list(options.owners), tags=dict(options.tags or {})))
    if options.source_assets:
        keep = options.source_assets if callable(options.source_assets) else (lambda _key: True)
        specs = [spec for spec in source_table_specs(config, config.exports) if keep(spec.key)]
        defs = dg.Definitions.merge(defs, dg.Definitions(assets=specs))
    return defs
