"""Table definitions of the state store (docs/rivet-compat.md "State store"), dialect-neutral.

SQLAlchemy Core tables shared by the SQLite file store and the PostgreSQL store, so there is
one code path for both. Timestamps are RFC3339 UTC text, as in Rivet, so rows compare and
sort the same on either backend. The tables and their writers:

- export_state       — incremental cursor (RunStore, after the manifest landed: I3)
- file_log           — ledger of committed parts (record_part, warn-on-fail: I7)
- export_metrics     — one `running` row projected from file_log during a run, replaced by
                       exactly one terminal row after the verdict (I4)
- export_schema      — schema-drift baseline (schema_drift facade)
- run_journal        — the per-run event log
- run_status         — lifecycle ledger (running → success|failed|skipped)
- export_progression — advisory committed/verified boundaries (PG2)
- chunk_run          — (v2) one row per checkpointed chunked run; the database allows at most
                       one `in_progress` run per export (partial unique index)
- chunk_task         — (v2) one row per chunk window: pending → running → completed|failed
                       (I5: a completed task is never claimed again; I6: a run is finalized only
                       when every task is completed) — operations in chunks.py
"""

from __future__ import annotations

import functools

import sqlalchemy as sa

metadata = sa.MetaData()

schema_version = sa.Table(
    "rivet_schema_version", metadata,
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("applied_at", sa.Text, nullable=False),
)

export_state = sa.Table(
    "export_state", metadata,
    sa.Column("export_name", sa.Text, primary_key=True),
    sa.Column("last_cursor_value", sa.Text),
    sa.Column("last_run_at", sa.Text),
    sa.Column("resume_run_id", sa.Text),
)

file_log = sa.Table(
    "file_log", metadata,
    sa.Column("id", sa.Integer().with_variant(sa.BigInteger, "postgresql"), primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("export_name", sa.Text, nullable=False),
    sa.Column("file_name", sa.Text, nullable=False),
    sa.Column("row_count", sa.BigInteger, nullable=False),
    sa.Column("bytes", sa.BigInteger, nullable=False),
    sa.Column("format", sa.Text),
    sa.Column("compression", sa.Text),
    sa.Column("created_at", sa.Text, nullable=False),
    sa.Column("cursor_high", sa.Text),
    sa.Index("idx_file_log_export", "export_name", "id"),
    sa.Index("idx_file_log_run", "run_id", "file_name"),
)

export_metrics = sa.Table(
    "export_metrics", metadata,
    sa.Column("id", sa.Integer().with_variant(sa.BigInteger, "postgresql"), primary_key=True, autoincrement=True),
    sa.Column("export_name", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("run_at", sa.Text, nullable=False),
    sa.Column("duration_ms", sa.BigInteger, nullable=False, default=0),
    sa.Column("total_rows", sa.BigInteger, nullable=False, default=0),
    sa.Column("peak_rss_mb", sa.BigInteger),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("error_message", sa.Text),
    sa.Column("error_class", sa.Text),
    sa.Column("tuning_profile", sa.Text),
    sa.Column("format", sa.Text),
    sa.Column("mode", sa.Text),
    sa.Column("files_produced", sa.BigInteger, default=0),
    sa.Column("files_committed", sa.BigInteger, default=0),
    sa.Column("bytes_written", sa.BigInteger, default=0),
    sa.Column("retries", sa.Integer, default=0),
    sa.Column("validated", sa.Boolean),
    sa.Column("schema_changed", sa.Boolean),
    sa.Column("quality_passed", sa.Boolean),
    sa.Column("skip_reason", sa.Text),
    sa.Column("schema_fingerprint", sa.Text),
    sa.Column("batch_size", sa.BigInteger),
    sa.Column("source_type", sa.Text),
    sa.Column("destination_type", sa.Text),
    sa.Column("cursor_min", sa.Text),
    sa.Column("cursor_max", sa.Text),
    sa.Column("rivet_version", sa.Text),
    sa.Column("orchestrator_run_id", sa.Text),
    # v4: `rivet run --reconcile` — the source COUNT(*) in the export's snapshot, and the verdict.
    sa.Column("source_count", sa.BigInteger),
    sa.Column("reconciled", sa.Boolean),
    sa.Index("idx_export_metrics_export", "export_name", "id"),
    # At most one in-flight projection per run (reference v21): `partial_indexes()`.
)

export_schema = sa.Table(
    "export_schema", metadata,
    sa.Column("export_name", sa.Text, primary_key=True),
    sa.Column("columns_json", sa.Text, nullable=False),
    sa.Column("updated_at", sa.Text, nullable=False),
)

run_journal = sa.Table(
    "run_journal", metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("export_name", sa.Text, nullable=False),
    sa.Column("finished_at", sa.Text, nullable=False),
    sa.Column("journal_json", sa.Text, nullable=False),
    sa.Index("idx_run_journal_export", "export_name", "finished_at"),
)

run_status = sa.Table(
    "run_status", metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("export_name", sa.Text, nullable=False),
    sa.Column("prefix", sa.Text),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("started_at", sa.Text, nullable=False),
    sa.Column("finished_at", sa.Text),
    sa.Column("orchestrator_run_id", sa.Text),
    sa.Index("idx_run_status_prefix", "prefix"),
)

export_progression = sa.Table(
    "export_progression", metadata,
    sa.Column("export_name", sa.Text, primary_key=True),
    sa.Column("last_committed_strategy", sa.Text),
    sa.Column("last_committed_cursor", sa.Text),
    sa.Column("last_committed_chunk_index", sa.BigInteger),
    sa.Column("last_committed_run_id", sa.Text),
    sa.Column("last_committed_at", sa.Text),
    sa.Column("last_verified_strategy", sa.Text),
    sa.Column("last_verified_cursor", sa.Text),
    sa.Column("last_verified_chunk_index", sa.BigInteger),
    sa.Column("last_verified_run_id", sa.Text),
    sa.Column("last_verified_at", sa.Text),
)

#: Tables created by migration 1, in dependency order.
V1_TABLES = (export_state, file_log, export_metrics, export_schema, run_journal, run_status,
             export_progression)

# ---------------------------------------------------------------- v2: chunk checkpoint
CHUNK_RUN_STATUSES = ("in_progress", "completed", "interrupted")
CHUNK_TASK_STATUSES = ("pending", "running", "completed", "failed")


def _one_of(column: str, values: tuple[str, ...], name: str) -> sa.CheckConstraint:
    return sa.CheckConstraint(f"{column} IN ({', '.join(repr(v) for v in values)})", name=name)


chunk_run = sa.Table(
    "chunk_run", metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("export_name", sa.Text, nullable=False),
    sa.Column("plan_hash", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("max_chunk_attempts", sa.Integer, nullable=False, server_default=sa.text("3")),
    sa.Column("strategy", sa.Text),
    sa.Column("chunk_column", sa.Text),
    sa.Column("chunk_size", sa.BigInteger),
    sa.Column("created_at", sa.Text, nullable=False),
    sa.Column("updated_at", sa.Text, nullable=False),
    _one_of("status", CHUNK_RUN_STATUSES, "ck_chunk_run_status"),
    sa.Index("idx_chunk_run_export_status", "export_name", "status"),
    # The database, not a pre-check, enforces one in-progress run per export (reference v15):
    # `partial_indexes()`.
)

chunk_task = sa.Table(
    "chunk_task", metadata,
    sa.Column("id", sa.Integer().with_variant(sa.BigInteger, "postgresql"), primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("chunk_index", sa.Integer, nullable=False),
    sa.Column("start_key", sa.Text),
    sa.Column("end_key", sa.Text),
    sa.Column("window_key", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("last_error", sa.Text),
    sa.Column("rows_written", sa.BigInteger),
    sa.Column("file_name", sa.Text),
    sa.Column("worker", sa.Text),
    sa.Column("updated_at", sa.Text, nullable=False),
    # (v3) the OS process that claimed the task last: pid and host (forensics of a
    # distributed run — which machine ran which window; `worker` names the orchestrator's run).
    sa.Column("worker_pid", sa.Integer),
    sa.Column("worker_host", sa.Text),
    sa.UniqueConstraint("run_id", "chunk_index", name="uq_chunk_task_run_index"),
    _one_of("status", CHUNK_TASK_STATUSES, "ck_chunk_task_status"),
    sa.Index("idx_chunk_task_run_status", "run_id", "status"),
)

#: Tables created by migration 2.
V2_TABLES = (chunk_run, chunk_task)


@functools.cache
def partial_indexes() -> tuple[sa.Index, sa.Index]:
    """The two partial unique indexes: one `running` export_metrics row per run, one
    `in_progress` chunk run per export (state/chunks.py). Built on first call and
    attached to their tables, so the migrations that create those tables create them too.

    Not built at import: the `sqlite_where` / `postgresql_where` arguments make SQLAlchemy
    import both dialect packages (27 modules, PostgreSQL's with its asyncpg/pg8000/psycopg2
    drivers) to validate them, and every `rivet` process imports this module while only a
    migration needs the indexes (tests/test_startup.py). Cached: a second construction would
    attach a duplicate index to the table."""
    return (
        sa.Index("export_metrics_one_running_per_run", export_metrics.c.run_id, unique=True,
                 sqlite_where=sa.text("status = 'running'"), postgresql_where=sa.text("status = 'running'")),
        sa.Index("idx_chunk_run_one_inprogress", chunk_run.c.export_name, unique=True,
                 sqlite_where=sa.text("status = 'in_progress'"),
                 postgresql_where=sa.text("status = 'in_progress'")),
    )

# ---------------------------------------------------------------- v3: export locks
#: One row per holder of an export's run lock (state/locks.py): an exclusive CLI run, or each
#: shared worker of an orchestrated chunked export. Timestamps are RFC3339 UTC text like the rest.
export_lock = sa.Table(
    "export_lock", metadata,
    sa.Column("lock_key", sa.Text, primary_key=True),
    sa.Column("token", sa.Text, primary_key=True),
    sa.Column("mode", sa.Text, nullable=False),
    sa.Column("export_name", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text),
    sa.Column("orchestrator_run_id", sa.Text),
    sa.Column("orchestrator", sa.Text),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("host", sa.Text, nullable=False),
    sa.Column("process_start", sa.Text),
    sa.Column("started_at", sa.Text, nullable=False),
    sa.Column("heartbeat_at", sa.Text, nullable=False),
    sa.Column("expires_at", sa.Text, nullable=False),
    sa.CheckConstraint("mode IN ('exclusive', 'shared')", name="ck_export_lock_mode"),
    sa.Index("idx_export_lock_export", "export_name"),
)

#: Tables created by migration 3 (which also adds chunk_task.worker_pid / worker_host).
V3_TABLES = (export_lock,)
V3_CHUNK_TASK_COLUMNS = ("worker_pid", "worker_host")
#: v4: nullable export_metrics columns (`--reconcile`).
V4_EXPORT_METRICS_COLUMNS = ("source_count", "reconciled")
#: v5: the tables whose orchestrator run id column was named after an integration
#: (`<name>_run_id`) before it became `orchestrator_run_id` (rivet_core/orchestrator.py);
#: export_lock also gains `orchestrator`, the display name its refusal message shows.
V5_RUN_ID_TABLES = ("export_metrics", "run_status", "export_lock")
