"""Chunked exports as Dagster partitions (docs/dagster-guide.md, docs/adr/0005).

A `mode: chunked` export becomes:

- **the chunk asset** (the export's key), partitioned by `DynamicPartitionsDefinition`
  `<export>_chunks`, one key per window. Materializing partitions exports exactly those
  windows into the in-progress chunk run (`api.ChunkWindowRun`): the body claims the
  tasks, gates schema drift and stages the windows; the IO manager writes and commits them
  (parts, file_log, task completed) — no manifest. Re-materializing a partition replaces
  its parts once the next manifest lands (the old ones are quarantined). A backfill from the
  UI is split into runs of `MAX_PARTITIONS_PER_RUN` windows; the source pool caps concurrent
  queries. A retried step skips the windows an earlier attempt of its run committed.
- **`<export>_manifest`** (unpartitioned, deps on the chunk asset, nothing loaded): finalizes
  the chunk run once every registered window is completed (I6), else fails naming how many
  are missing. Carries `manifest_verified` (blocking, the same check as every export) and
  `reconcile` (per window: source COUNT vs rows written). Downstream assets read the whole
  export from it through the IO manager.
- **the planner** — one sensor per config, `<config stem>_chunk_planner` (`planner_name`),
  for all its chunked exports: each evaluation plans every export in turn, each with its
  own state in the cursor (`{"exports": {<export>: …}}`); one export whose plan raises is
  logged and the others go on. Its runs select the export's assets on Dagster's implicit
  asset job (`RunTargets`: no job per export, issue 34; `dagster.jobs: per_export` uses the
  export's jobs instead). For each export it plans the windows against the source
  (`api.plan_chunk_tasks`), registers new keys in ascending order, deletes the keys the plan
  no longer has and wipes their materializations (`withdraw_partitions`), requests runs for
  new windows and for windows that changed at the source since their last materialization
  — count moved, or (with `change_column`) their fingerprint differs from the one their
  materialization recorded as metadata `rivet/fingerprint` — (run key
  `<chunk run>/<attempt>:<key>:<fingerprint>`, so a change is requested once), re-exports
  every window on each `dagster.refresh` cron tick (cursor: the last tick handled),
  takes over the windows of a Dagster run that ended without finishing them (killed,
  terminated: `worker_gone`) — back to pending and requested again under a run key naming
  the attempt, up to the chunk run's max attempts —, requests again the windows never
  claimed whose runs all ended (cancelled while queued: `planner.stranded`),
  requests a run of the `reconcile` check when published windows drifted (before the runs
  that export them, so the publishing run's verdict is the newest) and again, once per
  manifest, when every window is true to the source but the check's newest verdict is red
  (`reconcile_recheck`), and requests
  `<export>_manifest` once every window is completed (run key stamped with the windows'
  attempts, so the same state is finalized once) — or, when one batch holds every window
  still to export, requests that batch with the manifest (run kind `publish`), which publishes
  in the same run (`fold_manifest`: one run start-up fewer). Windows are requested in ranged runs of
  consecutive windows (`window_batches`): up to `dagster.max_partitions_per_run` when set;
  unset, as few runs as may export at once (`windows_per_run`: `parallel` runs, 1 by default,
  at most the source pool's limit) — a run's start-up costs seconds, and a run exports its
  windows one by one, so more runs would only queue behind each other. At most `dagster.max_runs_per_tick`
  runs per tick; the rest wait in the sensor cursor's backlog, and the manifest waits for
  the backlog. It plans against the source once a minute, and looks at the instance every
  few seconds: while a chunk run is being exported, it plans again as soon as that run's
  Dagster runs have all ended (`planner.deferral`), so the manifest follows the last window by
  seconds. RUNNING from the start unless `dagster.planner_status: STOPPED` (on all of its exports).
  What it decides is a pure function, `planner.plan_tick(view, cursor)` (rivet_dagster/planner.py,
  no Dagster in it; its docstring says why the `chunk_task` rows, not Dagster's
  materializations, are a window's status); the sensor here (`ExportPlanner`) only gathers
  the view from the instance and the core, and turns the decision into Dagster requests.

No `from __future__ import annotations` here (Dagster resolves resource annotations).
"""

import logging
import re
import time
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from rivet_core import api
from rivet_dagster.asset_options import retry_policy, shared_asset_kwargs
from rivet_dagster.assets import drift_result
from rivet_dagster.automation import export_job
from rivet_dagster.chunk_words import dagster_chunk_problem, dagster_words
from rivet_dagster.dagster_compat import (
    AssetCheckExecutionRecordStatus,
    get_latest_completed_cron_tick,
    is_valid_cron_string,
)
from rivet_dagster.io_manager import PendingChunks, PendingManifest, chunk_failure
from rivet_dagster.metadata import describe_chunk_asset, describe_manifest_asset
from rivet_dagster.naming import (
    ORCHESTRATOR,
    asset_key,
    derived_name,
    manifest_asset_key,
    pool_name,
    safe_name,
    source_kind,
)
from rivet_dagster.partition_keys import (
    chunk_partition_key,
    chunk_window_key,
    partition_key_for,
    partition_keys_by_window,
)
from rivet_dagster.partition_lookups import cached_partition_lookups
from rivet_dagster.partitions import chunk_partitions
from rivet_dagster.planner import (
    MAX_PARTITIONS_PER_RUN,
    MAX_RUNS_PER_TICK,
    PLANNER_INTERVAL_SECONDS,
    PLANNER_POLL_SECONDS,
    ExportCursor,
    PlannedRun,
    RunCounts,
    TickView,
    deferral,
    dump_cursor,
    needs_run_counts,
    parse_cursor,
    plan_tick,
    run_size,
)
from rivet_dagster.store_clients import required_keys, with_store_clients
from rivet_dagster.termination import stops_on_terminate

_log = logging.getLogger("rivet.dagster.planner")

_IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
              dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
_ENDED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
#: Materialization metadata of a chunk partition: the window's source fingerprint at export
#: (`<rows>` or `<rows>@<max change_column>`), read back by the planner.
FINGERPRINT_METADATA = "rivet/fingerprint"
_DAGSTER_RUN_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def require_partitionable(export: api.ExportConfig) -> None:
    problem = dagster_chunk_problem(export)
    if problem:
        raise api.ConfigError(problem)
    if export.dagster and export.dagster.schedule:
        raise api.ConfigError(
            f"export '{export.name}': dagster.schedule does not apply to a chunked export — the config's "
            "chunk planner sensor (`<config stem>_chunk_planner`) plans and requests the windows (it runs from "
            "the start unless dagster.planner_status: STOPPED) — remove dagster.schedule")


def chunked_description(config: api.RivetConfig, export: api.ExportConfig) -> str:
    return describe_chunk_asset(config, export, planner_name(config, []))


def worker_gone(instance: dg.DagsterInstance, worker: str) -> bool:
    """True when `worker` (who holds a running chunk task) is a Dagster run that is over or
    unknown to this instance: its task may be taken over. Other workers (a CLI process) are
    never presumed dead."""
    if not _DAGSTER_RUN_ID.match(worker):
        return False
    run = instance.get_run_by_id(worker)
    return run is None or run.is_finished


def backfill_policy(export: api.ExportConfig) -> dg.BackfillPolicy:
    """`dagster.backfill_policy`: multi_run (default, parallel runs of up to
    `max_partitions_per_run` windows) or single_run (needed for `--partition-range`)."""
    d = export.dagster
    if d is not None and d.backfill_policy == "single_run":
        return dg.BackfillPolicy.single_run()
    return dg.BackfillPolicy.multi_run(
        max_partitions_per_run=d.max_partitions_per_run if d is not None else MAX_PARTITIONS_PER_RUN)


def build_chunk_asset(config: api.RivetConfig, export: api.ExportConfig) -> dg.AssetsDefinition:
    key = asset_key(config, export)
    export_name = export.name
    config_path = str(config.config_path)

    @dg.asset(
        key=key, description=chunked_description(config, export),
        kinds={source_kind(config), export.format, export.destination.type},
        partitions_def=chunk_partitions(config, export),
        backfill_policy=backfill_policy(export),
        check_specs=[dg.AssetCheckSpec("schema_drift", asset=key, description=(
            f"schema drift of the source (on_schema_drift: {export.on_schema_drift or 'warn'})"))],
        retry_policy=retry_policy(config, export), **shared_asset_kwargs(config, export, role="chunks"),
    )
    @with_store_clients(export)
    @stops_on_terminate(export_name, "the chunk window batch")
    def _chunks(context: dg.AssetExecutionContext):
        cfg = api.load_config(config_path)
        exp = cfg.export(export_name)
        # The run's partitions (readable or padded keys, partitions.py) → the windows they name.
        partition_of = partition_keys_by_window(context.partition_keys)
        keys = list(partition_of)
        if context.retry_number:  # a retried step: the windows its earlier attempts committed stay
            kept = committed_by(cfg, exp, context.run.run_id)
            if kept & set(keys):
                context.log.info(f"retry {context.retry_number}: {len(kept & set(keys))} window(s) were committed "
                                 "by an earlier attempt of this run; exporting the other(s)")
                keys = [k for k in keys if k not in kept]
        what = f"chunk partition(s) {', '.join(partition_of[k] for k in keys)}"
        run = api.ChunkWindowRun(cfg, exp, keys, run_label=context.run.run_id, words=dagster_words,
                                  orchestrator=ORCHESTRATOR)
        # Progress lines in the event log (rows, size, rate; no ETA: a partition is a slice).
        run.options.progress = progress = api.callback_tracker(cfg, exp, context.log.info, estimate=False)
        try:
            run.claim(is_gone=lambda worker: worker_gone(context.instance, worker))
        except api.SchemaDriftError as exc:
            yield drift_result(exp, run.summary)
            raise chunk_failure(export_name, what, exc) from None
        except Exception as exc:
            raise chunk_failure(export_name, what, exc) from None  # retryable when transient
        context.log.info(f"chunk run {run.run_id}: exporting partition(s) {', '.join(partition_of[k] for k in keys)} "
                         f"→ {run.dest.uri}")
        yield drift_result(exp, run.summary)
        try:
            run.extract()
            progress.finish()
        except Exception as exc:
            raise chunk_failure(export_name, what, exc) from None  # retryable when transient
        # Each window's source fingerprint, taken in the snapshot its rows were read in: the
        # planner compares it with the source on every tick and re-requests the window when
        # it moved.
        with cached_partition_lookups(context.instance):  # one range check, not one per window
            for window_key, fingerprint in run.fingerprints.items():
                context.add_asset_metadata({FINGERPRINT_METADATA: fingerprint.text},
                                           partition_key=partition_key_for(window_key, partition_of))
        # One window per run: its fingerprint is the partition's data version too (a ranged run
        # has one data version for all its partitions, so there only the metadata carries it).
        single = run.fingerprints.get(keys[0]) if len(keys) == 1 else None
        yield dg.Output(PendingChunks(run), data_version=dg.DataVersion(single.text) if single else None)

    return _chunks


def committed_by(config: api.RivetConfig, export: api.ExportConfig, worker: str) -> set[str]:
    """Window keys of the in-progress chunk run that `worker` (a Dagster run id) committed.

    A ranged run's step that fails after committing some of its windows is retried in the
    same run (its RetryPolicy); those windows need no second export — claiming a completed
    window is a deliberate re-export (rivet_core/state/chunks.py `claim_chunk_task`). Their
    materializations still come from the retried step's output, which covers the run's
    whole range; their `rivet/fingerprint` metadata is not recorded again, so with a
    `change_column` the planner re-requests them once (a window without a record counts as
    changed)."""
    store = api.open_state(config)
    try:
        run = store.find_in_progress_chunk_run(export.name)
        if run is None:
            return set()
        return {t.window_key for t in store.list_chunk_tasks(run.run_id)
                if t.status == "completed" and t.worker == worker}
    finally:
        store.close()


def build_manifest_asset(config: api.RivetConfig, export: api.ExportConfig) -> dg.AssetsDefinition:
    export_name = export.name
    config_path = str(config.config_path)

    @dg.asset(
        key=manifest_asset_key(config, export),
        description=describe_manifest_asset(export),
        kinds={export.format, export.destination.type},
        **{**shared_asset_kwargs(config, export, role="manifest"), "deps": [asset_key(config, export)]},
    )
    @with_store_clients(export)
    @stops_on_terminate(export_name, "the manifest")
    def _manifest(context: dg.AssetExecutionContext):
        cfg = api.load_config(config_path)
        run = api.ChunkFinalizeRun(cfg, cfg.export(export_name), run_label=context.run.run_id,
                                    words=dagster_words, orchestrator=ORCHESTRATOR)
        try:
            chunk_run = run.prepare()
        except Exception as exc:
            raise chunk_failure(export_name, "manifest", exc) from None  # retryable when transient
        context.log.info(f"finalizing chunk run {chunk_run.run_id} ({run.windows_total} window(s)) → {run.dest.uri}")
        return dg.Output(PendingManifest(run))

    return _manifest


def _reconcile_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "Every window matches the source."
    lines = ["| partition | chunk | source rows | exported rows | status |", "|---|---:|---:|---:|---|"]
    lines += [f"| `{r['key']}` | {r['chunk']} | {r['source']} | {r['exported']} | {r['status']} |" for r in rows]
    return "\n".join(lines)


def build_reconcile_check(config: api.RivetConfig, export: api.ExportConfig) -> dg.AssetChecksDefinition:
    export_name = export.name
    config_path = str(config.config_path)
    partitions_name = chunk_partitions(config, export).name

    @dg.asset_check(asset=manifest_asset_key(config, export), name="reconcile", blocking=False,
                    required_resource_keys=required_keys(export),
                    pool=pool_name(config, export),
                    description="Per chunk window: the source's COUNT(*) of the window vs the rows exported "
                                "(same verdicts as `rivet reconcile`). A mismatch names the partitions to "
                                "materialize again.")
    @with_store_clients(export)
    def _reconcile(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        cfg = api.load_config(config_path)
        report, keys = api.reconcile_chunks(cfg, cfg.export(export_name), words=dagster_words)
        counts = report.counts()
        registered = partition_keys_by_window(context.instance.get_dynamic_partitions(partitions_name))
        names = {index: partition_key_for(key, registered) for index, key in keys.items()}
        bad = [{"key": names.get(c.chunk_index, str(c.chunk_index)), "chunk": c.chunk_index,
                "source": c.source_count, "exported": c.exported_count, "status": c.status}
               for c in report.checks if c.status != "match"]
        mismatched = [b["key"] for b in bad if b["status"] == "mismatch"]
        description = ("every window matches the source" if not bad else
                       f"{len(mismatched)} window(s) differ from the source: {', '.join(mismatched[:10])}"
                       if mismatched else f"{len(bad)} window(s) could not be compared")
        return dg.AssetCheckResult(
            passed=not mismatched, severity=dg.AssetCheckSeverity.ERROR, description=description,
            metadata={"chunk_run_id": report.run_id, "windows_checked": len(report.checks),
                      "matches": counts["match"], "mismatches": counts["mismatch"], "unknown": counts["unknown"],
                      "source_rows": sum(c.source_count or 0 for c in report.checks),
                      "exported_rows": sum(c.exported_count or 0 for c in report.checks),
                      "mismatched_partitions": dg.MetadataValue.md(_reconcile_table(bad))})

    return _reconcile


#: What the planner asks a run of an export for → (its assets, its check) by asset selection
#: on the implicit asset job; with `dagster.jobs: per_export`, the export's job of that kind.
#: `chunks`: windows; `publish`: the last batch of windows and the manifest in one run
#: (`fold_manifest`); `manifest`: the manifest alone; `reconcile`: that check alone.
RUN_KINDS = ("chunks", "publish", "manifest", "reconcile")


class RunTargets:
    """How the planner asks for the runs of one chunked export.

    By default by asset selection (`RunRequest(asset_selection=…)`), which Dagster launches
    on its implicit asset job: the shared planner sensor names no job, so the code location
    has no job per export to resolve and snapshot (issue 34: those made its load time grow
    with the square of its exports). With `dagster.jobs: per_export`, by the export's own
    jobs (`<export>_job`, `_publish_job`, `_manifest_job`, `_reconcile_job`)."""

    def __init__(self, config: api.RivetConfig, export: api.ExportConfig, jobs: dict[str, Any] | None) -> None:
        self.chunk_key, self.manifest_key = asset_key(config, export), manifest_asset_key(config, export)
        self.jobs = jobs

    def selection(self) -> list[dg.AssetKey]:
        """Every asset this export's runs may select (the sensor's `asset_selection`)."""
        return [self.chunk_key, self.manifest_key]

    def request(self, kind: str, *, run_key: str, tags: dict[str, str],
                partition_key: str | None = None) -> dg.RunRequest:
        tags = {**tags, "rivet/request": kind}
        if self.jobs is not None:
            return dg.RunRequest(job_name=self.jobs[kind].name, run_key=run_key, tags=tags, partition_key=partition_key)
        assets = {"chunks": [self.chunk_key], "publish": [self.chunk_key, self.manifest_key],
                  "manifest": [self.manifest_key], "reconcile": []}[kind]
        checks = [dg.AssetCheckKey(self.manifest_key, "reconcile")] if kind == "reconcile" else None
        return dg.RunRequest(asset_selection=assets, asset_check_keys=checks, run_key=run_key, tags=tags,
                             partition_key=partition_key)


def planner_jobs(config: api.RivetConfig, export: api.ExportConfig) -> dict[str, Any]:
    """The export's jobs by run kind (only with `dagster.jobs: per_export`)."""
    return {"chunks": export_job(config, export), "publish": publish_job(config, export),
            "manifest": manifest_job(config, export), "reconcile": reconcile_job(config, export)}


def manifest_job(config: api.RivetConfig, export: api.ExportConfig) -> Any:
    return dg.define_asset_job(derived_name(config, export, "manifest_job"),
                               selection=dg.AssetSelection.assets(manifest_asset_key(config, export)),
                               tags={"rivet/export": export.name, "rivet/config": str(config.config_path)})


def publish_job(config: api.RivetConfig, export: api.ExportConfig) -> Any:
    """The last batch and the manifest in one run: the chunk asset (the run's partition range
    or key) and `<export>_manifest` with its checks. The manifest step depends on the chunk
    step (its `deps`), so it starts only after every window of the run is committed and is
    skipped when that step fails; it still refuses unless every window of the chunk run is
    completed (I6). The planner requests it when its batch holds every window still to
    export (`fold_manifest`): one run start-up fewer than a chunk run, then a manifest run."""
    return dg.define_asset_job(derived_name(config, export, "publish_job"),
                               selection=dg.AssetSelection.assets(asset_key(config, export),
                                                                  manifest_asset_key(config, export)),
                               tags={"rivet/export": export.name, "rivet/config": str(config.config_path)})


def _sensor_status(config: api.RivetConfig, exports: list[api.ExportConfig]) -> dg.DefaultSensorStatus:
    """RUNNING unless every one of the planner's exports says `dagster.planner_status: STOPPED`
    (its own block, else the top-level one): a chunked export's windows exist only once its
    planner has run, and a planner started by hand is stored under the location name the
    starting command used. One sensor plans them all."""
    def status(export: api.ExportConfig) -> str:
        return (export.dagster.planner_status if export.dagster and export.dagster.planner_status else
                config.dagster.planner_status if config.dagster and config.dagster.planner_status else "RUNNING")
    running = any(status(e) == "RUNNING" for e in exports)
    return dg.DefaultSensorStatus.RUNNING if running else dg.DefaultSensorStatus.STOPPED


def recorded_fingerprints(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, str]:
    """Window key → the fingerprint its partition's latest materialization recorded (two
    event-log queries: the latest storage id per partition, then those events)."""
    ids = instance.get_latest_storage_id_by_partition(key, dg.DagsterEventType.ASSET_MATERIALIZATION)
    found: dict[str, str] = {}
    storage_ids = sorted(ids.values())
    for start in range(0, len(storage_ids), 1000):
        batch = storage_ids[start:start + 1000]
        records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key, storage_ids=batch),
                                                  limit=len(batch)).records
        for record in records:
            mat = record.asset_materialization
            value = mat.metadata.get(FINGERPRINT_METADATA) if mat is not None else None
            if mat is not None and mat.partition is not None and value is not None:
                found[chunk_window_key(mat.partition)] = str(value.value)
    return found


def windows_per_run(export: api.ExportConfig, windows: int, pool_limit: int | None = None) -> int:
    """How many consecutive windows the planner puts in one run, of `windows` registered.

    `dagster.max_partitions_per_run` when set. Unset: as few runs as may export at once —
    `parallel` runs (1 by default), fewer when the source pool (`pool_limit`, the instance's
    limit of the export's pool; None: unknown or unlimited) lets fewer run at once. A run
    exports its windows one by one, so runs beyond that would only queue behind each other,
    each paying a run start-up (seconds: a process, imports, the code location); and one run
    holding every window still to export also publishes the manifest (`fold_manifest`). A
    failed run costs no re-export of its committed windows: a retry of its step skips the
    windows this run already committed (`committed_by`), and the planner re-requests only the
    windows not completed."""
    return run_size(fixed_per_run(export), int(export.parallel or 1), windows, pool_limit)


def fixed_per_run(export: api.ExportConfig) -> int | None:
    """`dagster.max_partitions_per_run` when the export sets it, else None."""
    d = export.dagster
    return d.max_partitions_per_run if d is not None and "max_partitions_per_run" in d.model_fields_set else None


def pool_limit(instance: dg.DagsterInstance, pool: str) -> int | None:
    """The instance's limit of `pool` (its own slot count, else `concurrency.pools.default_limit`),
    or None when it sets none or its storage cannot say."""
    limit: int | None = None
    # An instance that cannot tell (its storage lacks concurrency support): no cap, `parallel` decides.
    with api.best_effort("read the source pool's limit from the Dagster instance", logger=_log, level=logging.DEBUG):
        storage = instance.event_log_storage
        if pool in storage.get_concurrency_keys():
            limit = int(storage.get_concurrency_info(pool).slot_count)
        else:
            limit = instance.get_concurrency_config().pool_config.default_pool_limit
    return limit


def refresh_due(cron: str, timezone: str, last: float | None, now: datetime) -> tuple[float, bool]:
    """(the latest cron tick at `now`, whether it is a tick not handled yet). The first
    evaluation (`last` None) only records the tick: starting the planner re-exports nothing."""
    tick = get_latest_completed_cron_tick(cron, now, timezone).timestamp()
    return tick, last is not None and tick > last


def reconcile_job(config: api.RivetConfig, export: api.ExportConfig) -> Any:
    """A job running only the `reconcile` check of `<export>_manifest` (the planner requests it
    when the published windows no longer match the source's counts)."""
    check = dg.AssetCheckKey(manifest_asset_key(config, export), "reconcile")
    return dg.define_asset_job(derived_name(config, export, "reconcile_job"), selection=dg.AssetSelection.checks(check),
                               tags={"rivet/export": export.name})


def planner_name(config: api.RivetConfig, outer_prefix: list[str]) -> str:
    """The name of a config's planner sensor: `<config file stem>_chunk_planner`
    (`rivet_chunk_planner` for rivet.yaml), behind the embedding's and the config's own key
    prefix (`replica__rivet_chunk_planner`) so that merged configs keep their planners apart."""
    top = config.dagster.key_prefix_list if config.dagster else []
    return "__".join([*outer_prefix, *top, f"{safe_name(config.config_path.stem)}_chunk_planner"])


def withdraw_partitions(instance: dg.DagsterInstance, key: dg.AssetKey, stale: list[str], *, carried: int) -> None:
    """Wipe the materializations of window keys the plan no longer has, alongside deleting
    their partition keys; `carried`: how many registered keys the plan keeps.

    Deleting a dynamic partition key leaves its materializations in the event log, and Dagster
    still counts them as materialized partitions of the asset: after a `chunk_size` change and
    `rivet state reset-chunks`, the old windows next to the new ones, for windows that no longer
    exist. Dagster's own SQL storages (SQLite, PostgreSQL) cannot wipe single partitions, so
    when the plan keeps no registered key (a new grid: nothing of the asset's history describes
    a window that exists) the asset's whole history is wiped; otherwise the stale partitions
    are wiped where the storage can, and on SQLite/PostgreSQL their old materializations stay
    (the history of the windows kept holds the fingerprints the planner compares against).
    Best effort: a wipe that fails leaves a wrong count in the UI, never wrong data."""
    with api.best_effort("wipe the materializations of withdrawn chunk windows", logger=_log):
        if carried == 0:
            instance.wipe_assets([key])
        else:
            try:
                instance.wipe_asset_partitions(key, stale)
            except NotImplementedError:  # Dagster's SQL storages: see above
                return
        _log.info("asset %s: withdrew %d window(s) the plan no longer has: %s", key.to_user_string(), len(stale),
                  ", ".join(stale[:10]))


def build_planner_sensor(config: api.RivetConfig, exports: list[api.ExportConfig], name: str,
                         jobs: dict[str, dict[str, Any]] | None = None) -> dg.SensorDefinition:
    """The one planner sensor of a config's partitioned chunked exports: each evaluation runs
    every export's plan (`ExportPlanner`) with that export's own state in the cursor, and
    returns their requests together. An export whose plan raises is logged and keeps its
    state; the others go on (the tick fails only when every export failed). `jobs`: export
    name → its jobs by run kind (`dagster.jobs: per_export`), else requests select assets."""
    plans = {e.name: ExportPlanner(config, e, RunTargets(config, e, jobs[e.name] if jobs is not None else None))
             for e in exports}
    target: dict[str, Any] = (
        {"jobs": [job for by_kind in jobs.values() for job in by_kind.values()]} if jobs is not None
        else {"asset_selection": dg.AssetSelection.assets(
            *[key for e in exports for key in (asset_key(config, e), manifest_asset_key(config, e))])})
    names = ", ".join(f"`{e.name}`" for e in exports[:20]) + (f" and {len(exports) - 20} more" if len(exports) > 20
                                                              else "")

    @dg.sensor(name=name, minimum_interval_seconds=PLANNER_POLL_SECONDS, default_status=_sensor_status(config, exports),
               description=f"Plans the chunk windows of {names} against the source: per export, registers new "
                           "windows as partitions (ascending), requests ranged runs for new windows and for windows "
                           "that changed at the source since they were exported, re-exports every window on its "
                           "`dagster.refresh` cron, takes over the windows of runs that ended without finishing "
                           "them, runs the `reconcile` check when published windows drifted, and requests the "
                           "manifest once every window is done. Plans each export against the source every "
                           f"{PLANNER_INTERVAL_SECONDS} s, and as soon as the runs of its chunk run in progress "
                           "have ended.", **target)
    def _planner(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        states = parse_cursor(context.cursor)
        requests: list[dg.RunRequest] = []
        dynamic: list[Any] = []
        reasons: list[str] = []
        failures: list[BaseException] = []
        for export_name, plan in plans.items():
            try:
                asked, parts, states[export_name], reason = plan(context, states.get(export_name, ExportCursor()))
            except Exception as exc:  # error boundary: logged, and the tick fails when every export's plan failed
                if len(plans) == 1:
                    raise
                context.log.error(f"export '{export_name}': planning failed: {exc}")
                failures.append(exc)
                continue
            requests += asked
            dynamic += parts
            if reason is not None:
                reasons.append(reason if len(plans) == 1 else f"{export_name}: {reason}")
        if failures and len(failures) == len(plans):
            raise failures[0]
        cursor = dump_cursor(states)
        if not requests and not dynamic:
            return dg.SensorResult(cursor=cursor, skip_reason="; ".join(reasons) or "no chunked export to plan")
        return dg.SensorResult(run_requests=requests, dynamic_partitions_requests=dynamic, cursor=cursor)

    return _planner


class ExportPlanner:
    """One chunked export's tick as the planner sensor evaluates it: the thin Dagster side
    of `planner.plan_tick`. It gathers the `TickView` from the instance and the core (the
    deferral's run counts, the recorded fingerprints, the core's plan — which takes over the
    windows of dead runs —, the registered partitions, the runs in flight, the windows asked by
    ended runs, the pool's limit, a stale `reconcile` verdict), lets the pure function decide,
    and carries the decision out: partition requests, the withdrawn partitions' history wiped,
    `dg.RunRequest`s naming partitions by their registered keys, log lines."""

    def __init__(self, config: api.RivetConfig, export: api.ExportConfig, targets: RunTargets) -> None:
        self.config_path, self.export_name = str(config.config_path), export.name
        self.partitions = chunk_partitions(config, export)
        self.chunk_key, self.targets = asset_key(config, export), targets
        self.base_tags = {"rivet/export": export.name, "rivet/config": self.config_path}
        block = export.dagster
        self.refresh = block.refresh if block else None
        self.timezone = (block.timezone if block and block.timezone else "UTC")
        self.fixed = fixed_per_run(export)
        self.pool = pool_name(config, export)
        self.runs_per_tick = block.max_runs_per_tick if block else MAX_RUNS_PER_TICK
        if self.refresh and not is_valid_cron_string(self.refresh):
            raise api.ConfigError(f"export '{export.name}': dagster.refresh '{self.refresh}' is not a valid cron "
                                  "expression (minute hour day-of-month month day-of-week, e.g. '0 2 * * 0')")

    def __call__(self, context: dg.SensorEvaluationContext, cursor: ExportCursor,
                 ) -> tuple[list[dg.RunRequest], list[Any], ExportCursor, str | None]:
        """(run requests, partition requests, the new cursor, why it asks for nothing)."""
        now = time.time()
        counts = run_counts(context.instance, cursor) if needs_run_counts(cursor, now) else None
        deferred = deferral(cursor, now, counts)
        if deferred is not None:
            return [], [], cursor, deferred
        view = self.view(context.instance, cursor, now)
        decision = plan_tick(view, cursor)
        for line in decision.warnings:
            context.log.warning(line)
        for line in decision.notes:
            context.log.info(line)
        dynamic: list[Any] = []
        if decision.withdraw:
            stale = [view.registered[k] for k in decision.withdraw]
            dynamic.append(self.partitions.build_delete_request(stale))
            withdraw_partitions(context.instance, self.chunk_key, stale, carried=decision.carried)
        if decision.add:
            dynamic.append(self.partitions.build_add_request([chunk_partition_key(k) for k in decision.add]))
        requests = [self.request(run, view.registered) for run in decision.runs]
        return requests, dynamic, decision.cursor, decision.skip_reason

    def view(self, instance: dg.DagsterInstance, cursor: ExportCursor, now: float) -> TickView:
        """What `plan_tick` reads, from the instance and the core's plan against the source."""
        cfg = api.load_config(self.config_path)
        exp = cfg.export(self.export_name)
        refresh_tick, due = (refresh_due(self.refresh, self.timezone, cursor.refresh, datetime.now(UTC))
                             if self.refresh else (None, False))
        recorded = recorded_fingerprints(instance, self.chunk_key) if exp.change_column else None
        # A window whose Dagster run ended without finishing it (killed, terminated) is taken
        # over by the core: back to pending, requested again under a run key naming its attempt.
        tick = api.plan_chunk_tasks(cfg, exp, recorded=recorded, refresh=due, words=dagster_words,
                                    is_gone=lambda worker: worker_gone(instance, worker))
        registered = partition_keys_by_window(instance.get_dynamic_partitions(self.partitions.name))
        in_flight = (instance.get_runs_count(dg.RunsFilter(tags={"rivet/chunk_run": tick.run_id}, statuses=_IN_FLIGHT))
                     if tick.run_id is not None else 0)
        asked = ended_asks(instance, tick.run_id) if tick.run_id is not None and tick.unclaimed and not in_flight \
            else {}
        return TickView(
            now=now, plan=tick, registered=registered, base_tags=self.base_tags, in_flight=in_flight, asked=asked,
            pool_limit=None if self.fixed is not None or tick.run_id is None else pool_limit(instance, self.pool),
            fixed_per_run=self.fixed, parallel=int(exp.parallel or 1), runs_per_tick=self.runs_per_tick,
            refresh_tick=refresh_tick,
            reconcile_recheck=reconcile_recheck(instance, self.targets.manifest_key) if tick.run_id is None else None)

    def request(self, run: PlannedRun, registered: dict[str, str]) -> dg.RunRequest:
        """A `PlannedRun` as Dagster's request: its windows named by their partition keys (tag
        `rivet/windows`, for people reading the run list and for tests), one partition or a
        range."""
        if not run.windows:
            return self.targets.request(run.kind, run_key=run.run_key, tags=run.tags)
        names = [partition_key_for(k, registered) for k in run.windows]
        tags = {**run.tags, "rivet/windows": ",".join(names)}
        if len(names) == 1:
            return self.targets.request(run.kind, partition_key=names[0], run_key=run.run_key, tags=tags)
        return self.targets.request(run.kind, run_key=run.run_key, tags={
            **tags, "dagster/asset_partition_range_start": names[0], "dagster/asset_partition_range_end": names[-1]})


def run_counts(instance: dg.DagsterInstance, cursor: ExportCursor) -> RunCounts:
    """Runs of the cursor's chunk run queued or running, and ended since its last plan."""
    tags = {"rivet/chunk_run": cursor.run or ""}
    in_flight = instance.get_runs_count(dg.RunsFilter(tags=tags, statuses=_IN_FLIGHT))
    if in_flight:
        return RunCounts(in_flight, 0)
    ended = instance.get_runs_count(dg.RunsFilter(
        tags=tags, statuses=_ENDED, updated_after=datetime.fromtimestamp(cursor.planned_at or 0, UTC)))
    return RunCounts(0, ended)


def ended_asks(instance: dg.DagsterInstance, chunk_run: str) -> dict[str, int]:
    """Window key → how many ended runs of the chunk run asked for it (tag `rivet/windows`,
    partition keys of either form), for `planner.stranded`."""
    asked: dict[str, int] = {}
    for run in instance.get_runs(dg.RunsFilter(tags={"rivet/chunk_run": chunk_run}, statuses=_ENDED), limit=1000):
        for key in filter(None, run.tags.get("rivet/windows", "").split(",")):
            window = chunk_window_key(key)
            asked[window] = asked.get(window, 0) + 1
    return asked


def reconcile_recheck(instance: dg.DagsterInstance, manifest_key: dg.AssetKey) -> int | None:
    """The storage id of the manifest's latest materialization when the `reconcile` check's
    newest execution FAILED, else None: the planner then runs the check again (once per
    published manifest) if the plan found every published window true to the source.

    Dagster shows the check execution created last (it is recorded when its run is created),
    whatever finished last: a `reconcile` run created while the refilled windows were still
    being exported can evaluate the old counts after the publishing run's own, green, verdict,
    and nothing would evaluate it again."""
    check_key = dg.AssetCheckKey(manifest_key, "reconcile")
    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key([check_key]).get(check_key)
    if latest is None or latest.status != AssetCheckExecutionRecordStatus.FAILED:
        return None
    records = instance.fetch_materializations(manifest_key, limit=1).records
    return records[0].storage_id if records else None
