"""The public API of the core engine — the one module an orchestrator adapter imports.

Everything here is stable surface; the modules behind it are internals. Widen this
module on purpose when the adapter needs more (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rivet_core import __version__
from rivet_core.chunks import keys as window_keys
from rivet_core.config import ExportConfig, RivetConfig, load_config
from rivet_core.config.blocks import (
    ConfigBlock,
    config_blocks,
    deprecated_block_model,
    register_config_block,
)
from rivet_core.destination import Destination
from rivet_core.destination.clients import client_provider, s3_client_provider
from rivet_core.errors import (
    ConfigError,
    DataIntegrityError,
    RivetError,
    SchemaDriftError,
    TransientError,
    best_effort,
)
from rivet_core.manifest import Manifest, Verification, read_manifest, verify_at_destination
from rivet_core.orchestrator import accepts_legacy_run_id
from rivet_core.pipeline.buckets.run import (
    PartitionedResult,
    bucket_prefixes,
    run_partitioned,
    verify_bucket_set,
)
from rivet_core.pipeline.chunked.tasks import (
    ChunkFinalizeRun,
    ChunkTaskBusy,
    ChunkTaskPlan,
    ChunkTaskRefusal,
    ChunkWindowRun,
    ChunkWindowsMissing,
    Wording,
    chunk_task_problem,
    plan_chunk_tasks,
    reconcile_chunks,
)
from rivet_core.pipeline.faults import fault_point
from rivet_core.pipeline.quality import QualityIssue
from rivet_core.pipeline.resources.malloc_arenas import limit_malloc_arenas
from rivet_core.pipeline.runner import run_unit
from rivet_core.pipeline.single.job import ExportRun, RunOptions
from rivet_core.pipeline.staging.extract import StagedExtract
from rivet_core.pipeline.table_check import check_table
from rivet_core.pipeline.time_range import RangeStaged, TimeRangeRun
from rivet_core.redact import redact_secrets
from rivet_core.reporting.notify import RunNotice, send_notifications
from rivet_core.reporting.progress import ProgressTracker, callback_tracker
from rivet_core.runrecord.summary import RunSummary
from rivet_core.state import StateStore
from rivet_core.unit.resolve import DayWindow, TimeWindow, export_destination, partition_prefixes

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    # the chunk-task protocol: a chunked export's windows as tasks an orchestrator plans, runs
    # in batches and finalizes; the orchestrator words the refusals (rivet_core/pipeline/chunked/tasks.py)
    "ChunkFinalizeRun", "ChunkTaskBusy", "ChunkTaskPlan", "ChunkTaskRefusal", "ChunkWindowRun",
    "ChunkWindowsMissing", "Wording", "chunk_task_problem", "plan_chunk_tasks", "reconcile_chunks",
    # the windows' keys (rivet_core/chunks/keys.py), which an orchestrator may spell its own way
    "window_keys",
    # many time partitions in one run: one source query, one published unit per window
    "RangeStaged", "TimeRangeRun", "TimeWindow",
    "ConfigError", "DataIntegrityError", "DayWindow", "Destination", "ExportConfig", "ExportRun",
    "QualityIssue", "RivetConfig", "RivetError", "RunNotice", "RunOptions", "RunSummary",
    "SchemaDriftError", "StagedExtract", "StateStore", "TransientError", "Verification",
    "cdc_slots", "cdc_binlog_lag", "dataset_manifests", "destination_uri", "source_database", "url_env_database", "schema_baselines", "s3_client_provider", "export_destination", "load_config", "open_state", "run_checkpointed", "partition_prefixes", "read_manifest", "run_export",
    # partition_by exports: one sub-export per date bucket (rivet_core/pipeline/buckets/run.py)
    "PartitionedResult", "bucket_prefixes", "partitioned_dataset_rows", "run_partitioned", "verify_bucket_set",
    # a `table_format: delta` export read as its table (rivet_core/tableformat/read.py; imported on call)
    "read_table",
    # progress reporting through a callback (the adapter passes context.log.info)
    "ProgressTracker", "callback_tracker",
    "send_notifications", "verify_at_destination", "verify_export",
    # object-store clients from the host (an orchestrator's resources) for s3 / gcs / azure
    "client_provider",
    # a best-effort step: swallowed, logged with its name, redacted
    "best_effort",
    # process set-up: cap glibc malloc arenas before export threads start (pipeline/resources/malloc_arenas.py)
    "limit_malloc_arenas",
    # the package version, secret redaction for anything an adapter shows (redact.py), the
    # `rivet init` scaffold and the demo database (scaffold.py, demo.py; imported on call)
    "__version__", "ensure_demo_database", "redact_secrets", "scaffold_config",
    # an integration's namespaced rivet.yaml block (rivet_core/config/blocks.py; usually
    # registered by the `rivet.config_blocks` entry point)
    "ConfigBlock", "config_blocks", "register_config_block",
    # the fault hooks a test arms by environment (rivet_core/pipeline/faults.py), for readers outside the core
    "fault_point",
]


@accepts_legacy_run_id
def run_export(config: RivetConfig, export_name: str, *, validate: bool = False,
               orchestrator_run_id: str | None = None, orchestrator: str | None = None,
               window: DayWindow | None = None) -> RunSummary:
    """Run one export (or one time partition of it) end to end. `orchestrator_run_id` and
    `orchestrator` name the scheduler's run that started it (rivet_core/orchestrator.py)."""
    export = config.export(export_name)
    return run_unit(config, export, RunOptions(validate=validate, orchestrator_run_id=orchestrator_run_id,
                                               orchestrator=orchestrator, window=window))


def cdc_slots(config: RivetConfig) -> list[dict[str, Any]]:
    """Every logical replication slot of a PostgreSQL source with its retained WAL and lag
    in bytes (rivet_core/source/postgres/changes.py `slot_report`); [] for another engine."""
    from rivet_core.source.dialect import dialect_of

    if dialect_of(config.source.type).change_log != "slot":
        return []
    from rivet_core.source.postgres.changes import slot_report
    from rivet_core.source.postgres.session import pg_connect

    conn = pg_connect(config.source.resolve_url(config.config_dir))
    try:
        conn.autocommit = True
        return slot_report(conn)
    finally:
        conn.close()


def run_checkpointed(config: RivetConfig, export: ExportConfig, options: RunOptions) -> RunSummary:
    """Run a chunked export end to end with its checkpoint on (implied, as for chunk
    tasks), continuing the export's in-progress chunk run when there is one: a retried
    orchestrator step or a re-launched run resumes the windows already committed instead of
    being refused for the run in progress. Other modes run as `run_unit` does."""
    if export.mode != "chunked":
        return run_unit(config, export, options)
    export = export if export.chunk_checkpoint else export.model_copy(update={"chunk_checkpoint": True})
    state = StateStore.open(config.config_path)
    try:
        in_progress = state.find_in_progress_chunk_run(export.name) is not None
        options.resume = options.resume or in_progress
        return run_unit(config, export, options, state=state)
    finally:
        state.close()


def source_database(config: RivetConfig) -> str | None:
    """The source database's name, for names an orchestrator derives from it (asset keys,
    groups, pools), from the config file alone: `database` (beside `url_env` or `url_file`
    it only names the database), else the path of a literal `url` (None otherwise). Never
    from the environment, where a variable unset while definitions load would rename every
    key. SQLite sources are named by their file instead (so is a SQLAlchemy URL of a file
    database: `duckdb:///data/shop.duckdb` is `shop`)."""
    from rivet_core.config.source_url import SQLALCHEMY_PREFIX, database_named_by, url_database

    source = config.source
    if source.database:
        return source.database
    if source.url and source.type == "sqlalchemy":
        return database_named_by(source.type, SQLALCHEMY_PREFIX + source.url)
    return url_database(source.url) if source.url else None


def url_env_database(config: RivetConfig) -> str | None:
    """The database the `url_env` variable names right now (a SQLite file: its stem), or None
    — for a message that suggests the `database:` line, never for a name (`source_database`)."""
    import os

    from rivet_core.config.source_url import database_named_by

    variable = config.source.url_env
    url = os.environ.get(variable) if variable else None
    return database_named_by(config.source.type, url) if url else None


def source_kind(config: RivetConfig) -> str:
    """The source's kind for an orchestrator's tags and keys: `source.type`, or for a
    `type: sqlalchemy` source its dialect (`duckdb`, `mssql`, …) — from a literal `url`,
    else the `url_env` variable when set, else `sqlalchemy`."""
    import os

    from rivet_core.config.source_url import sqlalchemy_backend

    source = config.source
    if source.type != "sqlalchemy":
        return source.type
    url = source.url or (os.environ.get(source.url_env) if source.url_env else None)
    return sqlalchemy_backend(url) if url and "://" in url else "sqlalchemy"


def destination_uri(config: RivetConfig, export: ExportConfig) -> str:
    """Where an export writes, as a URI, from the config alone: no environment lookups and
    no connection, so a code location can show it when it loads (`file:///abs/dir/`,
    `s3://bucket/prefix/`, `gs://bucket/prefix/`, `az://container/prefix/`, `stdout:`). Date tokens are rendered at the current time."""
    from datetime import UTC, datetime

    from rivet_core.config import render_destination
    from rivet_core.redact import redact_secrets

    dest = render_destination(export.destination, export.name, datetime.now(UTC))
    if dest.type == "local":
        path = Path(dest.path or dest.prefix or ".")
        path = path if path.is_absolute() else config.config_dir / path
        return path.resolve().as_uri().rstrip("/") + "/"
    if dest.type in ("s3", "gcs", "azure"):
        prefix = (dest.prefix or "").lstrip("/")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        scheme = {"s3": "s3", "gcs": "gs", "azure": "az"}[dest.type]
        return redact_secrets(f"{scheme}://{dest.bucket}/{prefix}")
    return f"{dest.type}:"


def cdc_binlog_lag(config: RivetConfig, export: ExportConfig) -> int | None:
    """Bytes of binlog a MySQL/MariaDB CDC export has not published yet
    (rivet_core/pipeline/cdc/binlog_lag.py); None for another engine, before the first
    publish, or when the published position's file was purged."""
    from rivet_core.source.dialect import dialect_of

    if dialect_of(config.source.type).change_log != "binlog" or export.tables is not None:
        return None
    from rivet_core.pipeline.cdc.binlog_lag import binlog_bytes_after
    from rivet_core.pipeline.cdc.positions import parse_position
    from rivet_core.source.mysql.session import mysql_connect

    runs = dataset_manifests(config, export, latest_run_only=True)
    high = runs[0].source.extraction.cursor_high if runs and runs[0].source.extraction else None
    if high is None:
        return None
    conn = mysql_connect(config.source.resolve_url(config.config_dir))
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            logs = [(str(row[0]), int(row[1])) for row in cur.fetchall()]
    finally:
        conn.close()
    return binlog_bytes_after(logs, parse_position(str(high)))


def dataset_manifests(config: RivetConfig, export: ExportConfig, *, sub_prefix: str = "",
                      latest_run_only: bool = False) -> list[Manifest]:
    """The manifests whose parts together make the export's current dataset at a prefix.

    Full, time-window and chunked exports replace their data each run: the current
    `manifest.json` alone. Incremental exports (and keyset-incremental chunked ones) add
    rows each run: every successful run's manifest copy since the last run that started
    from nothing (no `cursor_low`: the first run or a full refresh), so a run that found
    nothing new does not hide the rows of the runs before it. `latest_run_only` keeps the
    current manifest only. [] when nothing was published. Retention (`rivet gc`, a
    `retention:` block) moves the copies of runs it no longer keeps out of the prefix root,
    so this is the union of the kept runs (docs/adr/0007-readable-layout-and-retention.md)."""
    from rivet_core.manifest import read_run_manifests
    from rivet_core.pipeline.retention.dataset_kind import adds_rows_each_run

    dest = export_destination(config, export, sub_prefix=sub_prefix)
    current = read_manifest(dest)
    if current is None:
        return []
    if latest_run_only or not adds_rows_each_run(export):
        return [current[0]]
    runs = read_run_manifests(dest)
    baseline = max((i for i, m in enumerate(runs)
                    if m.source.extraction is None or m.source.extraction.cursor_low is None), default=0)
    return runs[baseline:] or [current[0]]


def schema_baselines(config: RivetConfig) -> dict[str, list[dict[str, str]]]:
    """Export name → the columns (`name`, `type`) its last run recorded as the schema-drift
    baseline, read without side effects: only from an existing SQLite state store, opened
    read-only (no file created, no migration, no connection to a PostgreSQL store), and {}
    on any problem — a caller shows what is known, never fails for it."""
    import json
    import sqlite3

    from rivet_core.state.url import state_url_for

    try:
        if not state_url_for(config.config_path).startswith("sqlite"):
            return {}
        path = config.state_path
        if not path.is_file():
            return {}
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1)
        try:
            rows = conn.execute("SELECT export_name, columns_json FROM export_schema").fetchall()
        finally:
            conn.close()
        return {str(name): json.loads(raw) for name, raw in rows if raw}
    except (sqlite3.Error, OSError, ValueError, RivetError):  # no store, no table, a bad row, a bad URL
        return {}


def verify_export(config: RivetConfig, export_name: str, *, sub_prefix: str = "",
                  depth: str = "sample") -> tuple[Destination, Verification]:
    """`verify_at_destination` on an export's prefix (the CLI and an adapter's checks share this).
    `depth`: light | sample | full (rivet_core/manifest/verify.py); an adapter passes the
    depth its config asks for."""
    export, expected = config.export(export_name), export_name
    if export.partition_by:  # a bucket's prefix under the root; its manifest names the sub-export
        from rivet_core.pipeline.buckets.run import bucket_targets, root_export

        expected = bucket_targets(export, [sub_prefix])[0][2] if sub_prefix else export_name
        export = root_export(export)
    dest = export_destination(config, export, sub_prefix=sub_prefix, create=False)
    return dest, verify_at_destination(dest, depth=depth, export_name=expected, export=export,
                                       table_check=check_table)


def partitioned_dataset_rows(config: RivetConfig, export: ExportConfig) -> int:
    """Rows of a `partition_by` export's whole dataset: over every bucket prefix that holds a
    manifest, the rows its dataset manifests list (`dataset_manifests`: the current run, or
    every kept run of an incremental bucket)."""
    from rivet_core.pipeline.buckets.run import bucket_targets, root_export

    total = 0
    for prefix, _label, name in bucket_targets(export, bucket_prefixes(config, export)):
        bucket = root_export(export).model_copy(update={"name": name})
        total += sum(m.row_count for m in dataset_manifests(config, bucket, sub_prefix=prefix))
    return total


def open_state(config: RivetConfig | Path | str) -> StateStore:
    path = config.config_path if isinstance(config, RivetConfig) else Path(config)
    return StateStore.open(path)


def scaffold_config(output: Path, *, source_env: str, schema: str | None = None, table: str | None = None) -> None:
    """Write a starter config for the source `source_env` names, as `rivet init` does
    (introspects the source; rivet_core/ops/scaffold.py). Imported on call: only scaffolding
    needs the introspection modules."""
    from rivet_core.ops.scaffold import InitOptions, write_scaffold

    write_scaffold(InitOptions(source_env=source_env, schema=schema, table=table), output)


def read_table(dest: Destination, sub_prefix: str = "", export: ExportConfig | None = None) -> tuple[
        pa.Table, int] | None:
    """(rows, table version) of the table at `dest`'s prefix (a time partition's
    `sub_prefix`: only its files), None when there is no table yet — what a downstream
    reader of a `table_format:` export sees (rivet_core/tableformat/read.py). `export`: the
    export's config, which an Iceberg table needs (its catalog); without it the prefix is
    read as a Delta table. Imported on call: only table-format exports need deltalake or
    pyiceberg."""
    from rivet_core.tableformat.read import read_table_format

    return read_table_format(dest, sub_prefix, export)


def ensure_demo_database(path: Path | None = None, *, reset: bool = False) -> Path:
    """Create the demo SQLite database if it does not exist (or `reset`); return its path
    (rivet_core/ops/demo.py; imported on call)."""
    from rivet_core.ops.demo import DEFAULT_PATH
    from rivet_core.ops.demo import ensure_demo_database as ensure

    return ensure(path or DEFAULT_PATH, reset=reset)


def __getattr__(name: str) -> Any:
    """Deprecated names: the models of an integration's config block (blocks.py) were once
    published here; they now belong to the integration's package, which registers them."""
    return deprecated_block_model(__name__, name)
