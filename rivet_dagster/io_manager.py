"""The IO manager: finalize-then-write, and reading exports back for downstream assets.

`handle_output` receives a `PendingPublish` from the asset body — an `ExportRun` whose
data is extracted, quality-gated and finished in staged files (I1) — and calls
`ExportRun.publish`, i.e. the core's commit facades (write_part_file → record_part per
part) and its finalize sequence (manifest → cursor → validate → metrics → report →
notification). It never re-implements a step. A failed publish fails the step.

No `from __future__ import annotations`: Dagster resolves the nested resource annotation.

Chunked exports hand it two more kinds of value (rivet_dagster/chunked.py):
`PendingChunks` — a `ChunkWindowRun` whose windows are claimed and staged; publishing
writes and commits each window (`write_window` + `commit_window`: parts, file_log, chunk
task completed) and writes no manifest — and `PendingManifest` — a `ChunkFinalizeRun` that
passed its I6 pre-check; publishing finalizes the chunk run (manifest → … → notification),
with the part records a chunk step of this process wrote (rivet_dagster/part_records.py).

`load_input` returns the export as a `pyarrow.Table` or `pandas.DataFrame` (by the
downstream input's annotation): the whole dataset — for an incremental export the parts of
every run since its last full baseline (so a run that found nothing new does not empty it),
for the others the parts the current `manifest.json` lists, per partition for partitioned
exports. An input with metadata `{"rivet/latest_run_only": True}` gets only the latest
run's rows. For a chunked export, depend on
`<export>_manifest` (the whole export); a chunk asset input is refused. A publish that
lands while the parts are read (and moves them away: retention, a re-materialized window)
makes the read start again from the new manifests (`_read_manifests_parts`).

A config's multi-asset (rivet_dagster/multi_asset.py) publishes each export in its step
through the same `ExportRun.publish` and yields no value, so `handle_output` is not called
for it; its exports are read back by `load_input` like any other.
"""


import io
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from rivet_core import api
from rivet_dagster import part_records
from rivet_dagster.metadata import (
    chunk_metadata,
    dataset_uri,
    manifest_metadata,
    materialization_metadata,
    standard_metadata,
    window_metadata,
)
from rivet_dagster.partition_keys import (
    chunk_partition_key,
    partition_key_for,
    partition_keys_by_window,
)
from rivet_dagster.partition_lookups import cached_partition_lookups
from rivet_dagster.partitions import sub_prefix_for_key
from rivet_dagster.termination import stops_on_terminate

_log = logging.getLogger("rivet.dagster.io_manager")


@dataclass
class PendingPublish:
    """What an export asset hands to the IO manager: a run ready to publish."""

    run: api.ExportRun
    staged: api.StagedExtract


class RivetExportFailed(dg.Failure):
    pass


@dataclass
class PendingChunks:
    """What a chunk asset hands to the IO manager: claimed, staged windows to publish."""

    run: api.ChunkWindowRun


@dataclass
class PendingManifest:
    """What `<export>_manifest` hands to the IO manager: a chunk run ready to finalize."""

    run: api.ChunkFinalizeRun


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, api.TransientError) or getattr(exc, "exit_code", None) == 2


def chunk_failure(export_name: str, what: str, exc: BaseException) -> dg.Failure:
    """A step failure for a chunk partition or the manifest; retryable only when transient.
    Raised `from None`: its description is redacted, and the driver's own exception (which
    may quote a connection string) must not reach Dagster's event log through the chain."""
    metadata: dict[str, Any] = {"error": type(exc).__name__}
    missing = getattr(exc, "missing_keys", None)
    if missing is not None:
        metadata.update(missing_windows=len(missing), windows=getattr(exc, "total", 0),
                        missing_keys=dg.MetadataValue.md("\n".join(f"- `{chunk_partition_key(k)}`" for k in missing[:200])))
    return dg.Failure(description=api.redact_secrets(f"export '{export_name}' {what} failed: {exc}"), metadata=metadata,
                      allow_retries=is_transient(exc))


def will_retry(context: dg.AssetExecutionContext, config: api.RivetConfig, export: api.ExportConfig) -> bool:
    """True when a transient failure of this step would be retried by its RetryPolicy (the
    attempts left: the export's `max_retries` minus the retries already made)."""
    return context.retry_number < export.resolved_tuning(config.source).max_retries


def failure_for(summary: api.RunSummary) -> dg.Failure:
    """A step failure carrying the run's verdict (its message redacted by the core); only
    transient failures may be retried. Raise it `from None` (see `chunk_failure`)."""
    return dg.Failure(
        description=f"export '{summary.export_name}' failed: {summary.error_message}",
        metadata={"rivet_run_id": summary.run_id, "exit_code": summary.exit_code,
                  "report": dg.MetadataValue.path(summary.report_path or "")},
        allow_retries=summary.exit_code == 2,
    )


def _read_part(dest: api.Destination, key: str, fmt: str) -> pa.Table:
    api.fault_point("before_part_read")  # a test parks a reader here while a publish lands
    data = dest.read_bytes(key)
    if fmt == "csv":
        return pacsv.read_csv(io.BytesIO(data))
    return pq.read_table(io.BytesIO(data))


#: Input metadata a downstream asset sets to read only the latest run's rows of an
#: incremental export: `dg.AssetIn(key=…, metadata={LATEST_RUN_ONLY: True})`.
LATEST_RUN_ONLY = "rivet/latest_run_only"


def read_export(config: api.RivetConfig, export: api.ExportConfig, sub_prefix: str = "",
                *, latest_run_only: bool = False) -> pa.Table | None:
    """The export's dataset at a prefix (None when nothing was published): the parts the
    manifests of `api.dataset_manifests` list — for an incremental export every run since
    its last full baseline, else the current manifest's. A `table_format:` export (Delta or
    Iceberg) is read as its table: the current version (a time partition: its files in it)."""
    if export.table_format is not None and not latest_run_only:
        found = api.read_table(api.export_destination(config, export, sub_prefix=sub_prefix), sub_prefix,
                               export=export)
        return None if found is None else found[0]
    manifests, tables = _read_manifests_parts(config, export, sub_prefix, latest_run_only)
    if not manifests:
        return None
    if tables:
        return pa.concat_tables(tables, promote_options="permissive")
    if latest_run_only:  # an empty latest run: no rows, but the export's columns
        earlier = read_export(config, export, sub_prefix)
        return earlier.schema.empty_table() if earlier is not None else None
    return None


#: How many times a read starts again from the manifests current now, when a part of the ones
#: it started from vanished (a new publish landed and retention moved it away).
READ_ATTEMPTS = 3


def _read_manifests_parts(config: api.RivetConfig, export: api.ExportConfig, sub_prefix: str,
                          latest_run_only: bool) -> tuple[list[Any], list[pa.Table]]:
    """(the dataset's manifests, the committed parts they list, read), from one set of manifests.

    A publish that lands while the parts are read can move the parts of the manifest this read
    started from out of the prefix (`retention: {keep_runs: 1}`, a re-materialized chunk
    window's parts quarantined). The read then starts again from the manifests current now —
    never a table mixing two publishes — up to READ_ATTEMPTS times; a part missing while the
    manifests are still the same is a damaged dataset, and that error is raised as it is."""
    dest = api.export_destination(config, export, sub_prefix=sub_prefix)
    for attempt in range(1, READ_ATTEMPTS + 1):
        manifests = api.dataset_manifests(config, export, sub_prefix=sub_prefix, latest_run_only=latest_run_only)
        try:
            return manifests, [_read_part(dest, p.path, m.format) for m in manifests for p in m.parts
                               if p.status == "committed"]
        except api.RivetError:
            now = api.dataset_manifests(config, export, sub_prefix=sub_prefix, latest_run_only=latest_run_only)
            if attempt == READ_ATTEMPTS or [m.run_id for m in now] == [m.run_id for m in manifests]:
                raise
            _log.info("export '%s': a new manifest was published while its parts were read; reading again "
                      "from it (attempt %d of %d)", export.name, attempt + 1, READ_ATTEMPTS)
    raise AssertionError("unreachable")  # the loop returns or raises


def dataset_row_count(config: api.RivetConfig, export: api.ExportConfig, summary: api.RunSummary) -> int:
    """Rows of the whole dataset after this run: the run's own rows when it replaced the
    data, else the rows every manifest of the dataset lists (incremental exports)."""
    if export.mode != "incremental" and not (export.mode == "chunked" and export.keyset_incremental):
        return summary.total_rows
    return sum(m.row_count for m in api.dataset_manifests(config, export))


def published_metadata(pending: PendingPublish, summary: api.RunSummary, *, partition: bool) -> dict[str, Any]:
    """The materialization's metadata after `pending` was published: the run's numbers, and
    Dagster's standard keys (the whole dataset's rows for an unpartitioned export)."""
    meta = materialization_metadata(summary, pending.staged.schema, partition=partition)
    if summary.status != "failed":
        rows = None if partition else dataset_row_count(pending.run.config, pending.run.export, summary)
        meta.update(standard_metadata(pending.run.config, pending.run.export, dataset_uri(summary),
                                      pending.staged.schema, dataset_rows=rows))
    return meta


class RivetIOManager(dg.ConfigurableIOManager):
    """Publishes staged exports (handle_output) and reads them back (load_input).

    Stateless: what it publishes carries its own run (and config), and `load_input` finds
    the config of the upstream export in the asset's `rivet/config` metadata. So one shared
    instance (`RIVET_IO_MANAGER`) serves every config, and definitions built from several
    rivet.yaml files merge (`dg.Definitions.merge` accepts a resource key bound to the
    same object twice).
    """

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        # The write is part of the step: a terminate while it runs stops it too (no retry).
        what = {PendingChunks: "the chunk windows' write", PendingManifest: "the manifest's write"}.get(
            type(obj), "the export's write")
        export_name = obj.run.export.name if hasattr(obj, "run") else str(context.asset_key.to_user_string())
        stops_on_terminate(export_name, what)(self._handle_output)(context, obj)

    def _handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        if isinstance(obj, PendingChunks):
            self._publish_chunks(context, obj.run)
            return
        if isinstance(obj, PendingManifest):
            try:
                assert obj.run.chunk_run is not None  # prepare() ran in the asset body
                summary = obj.run.publish(known=part_records.take(obj.run.chunk_run.run_id))
            except Exception as exc:  # a refusal before I6 held: nothing was published
                raise chunk_failure(obj.run.export.name, "manifest", exc) from None  # retryable when transient
            context.add_output_metadata({**manifest_metadata(obj.run, summary), **standard_metadata(
                obj.run.config, obj.run.export, dataset_uri(summary), obj.run.output_schema,
                dataset_rows=summary.total_rows)})
            if summary.status == "failed":
                raise failure_for(summary)
            return
        if not isinstance(obj, PendingPublish):
            raise dg.DagsterInvariantViolationError(
                "the rivet IO manager only stores export assets built by rivet_dagster")
        summary = obj.run.publish(obj.staged)
        context.add_output_metadata(published_metadata(obj, summary, partition=context.has_asset_partitions))
        if summary.status == "failed" or summary.exit_code != 0:  # exit 3: the verdict failed
            raise failure_for(summary)

    @staticmethod
    def _publish_chunks(context: dg.OutputContext, run: api.ChunkWindowRun) -> None:
        try:
            results = run.publish()
        except Exception as exc:
            raise chunk_failure(run.export.name, f"chunk partition(s) {', '.join(run.window_keys)}", exc) from None  # retryable when transient
        part_records.remember(run.run_id, results)  # for the manifest step of this process
        # From the run's creation in the asset body (claim, extract) to the commit: the plotted duration.
        elapsed = datetime.now(UTC) - run.summary.started_at
        context.add_output_metadata(chunk_metadata(run, results, int(elapsed.total_seconds() * 1000)))
        # Each window's own rows, bytes and parts, scoped to its partition: Dagster lays
        # partition-scoped metadata over the output's on that partition's materialization
        # (one per window, also in a ranged run, whose single output covers them all).
        step = context.step_context
        partition_of = partition_keys_by_window(context.asset_partition_keys)  # window → its partition key
        with cached_partition_lookups(step.instance):  # one range check, not one per window
            for key, meta in window_metadata(run).items():
                step.add_asset_metadata(meta, asset_key=context.asset_key, partition_key=partition_key_for(key, partition_of))

    def load_input(self, context: dg.InputContext) -> Any:
        upstream = context.upstream_output
        definition = (upstream.definition_metadata or {}) if upstream else {}
        export_name = definition.get("rivet/export")
        if export_name is None:
            raise dg.DagsterInvariantViolationError(
                f"input '{context.name}' does not come from a rivet export asset")
        if definition.get("rivet/role") == "chunks":
            raise dg.DagsterInvariantViolationError(
                f"input '{context.name}': a chunk partition of export '{export_name}' is not a dataset; "
                f"depend on the `{export_name}_manifest` asset to read the whole export")
        config = api.load_config(str(definition["rivet/config"]))
        export = config.export(str(export_name))
        keys = context.asset_partition_keys if context.has_asset_partitions else [None]
        latest = bool((context.definition_metadata or {}).get(LATEST_RUN_ONLY, False))
        tables = []
        for key in keys:
            table = read_export(config, export, sub_prefix_for_key(export, key) if key else "",
                                latest_run_only=latest)
            if table is not None:
                tables.append(table)
        result = pa.concat_tables(tables, promote_options="permissive") if tables else pa.table({})
        wanted = context.dagster_type.typing_type if context.dagster_type else None
        if getattr(wanted, "__name__", "") == "DataFrame":
            return result.to_pandas()
        return result


#: The one IO manager instance every `build_definitions` result binds (see the class).
RIVET_IO_MANAGER = RivetIOManager()
IO_MANAGER_KEY = "rivet_io_manager"
