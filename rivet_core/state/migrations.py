"""Versioned migrations of the state store, safe to run from two processes at once.

The ladder is an ordered list of (version, step). Each process runs `migrate()` on open:
- SQLite: the whole ladder runs inside one `BEGIN IMMEDIATE` transaction, so a second
  process waits on the lock and then sees the versions already applied.
- PostgreSQL: the ladder runs in one transaction holding `pg_advisory_xact_lock`
  (DDL is transactional there), with the same effect.
A step must be idempotent-safe under that lock (it only ever runs once per database).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import sqlalchemy as sa

from rivet_core.orchestrator import display_name, legacy_run_id_name
from rivet_core.state import schema

_ADVISORY_KEY = 0x72697665745F6D69  # "rivet_mi"


def _v1_create_core_tables(conn: sa.Connection) -> None:
    schema.partial_indexes()  # attached to export_metrics: created with it
    for table in schema.V1_TABLES:
        table.create(conn, checkfirst=True)


def _v2_create_chunk_checkpoint_tables(conn: sa.Connection) -> None:
    """chunk_run + chunk_task (issue 4), with the partial unique index that allows one
    in-progress run per export. New tables, so there are no duplicate rows to demote."""
    schema.partial_indexes()  # attached to chunk_run: created with it
    for table in schema.V2_TABLES:
        table.create(conn, checkfirst=True)


def _v3_export_lock_and_chunk_worker_process(conn: sa.Connection) -> None:
    """export_lock (issue 7): who runs an export right now (state/locks.py), a new table; and
    chunk_task.worker_pid / worker_host (which process claimed a window), nullable columns
    added to a v2 table (a store created at v2 by this release already has them)."""
    for table in schema.V3_TABLES:
        table.create(conn, checkfirst=True)
    present = {c["name"] for c in sa.inspect(conn).get_columns("chunk_task")}
    for name in schema.V3_CHUNK_TASK_COLUMNS:
        if name not in present:
            column = schema.chunk_task.c[name]
            kind = column.type.compile(dialect=conn.dialect)
            conn.execute(sa.text(f"ALTER TABLE chunk_task ADD COLUMN {name} {kind}"))


def _v4_export_metrics_reconcile(conn: sa.Connection) -> None:
    """export_metrics.source_count / reconciled (`rivet run --reconcile`), nullable columns added
    to a v1 table (a store created at v1 by this release already has them)."""
    present = {c["name"] for c in sa.inspect(conn).get_columns("export_metrics")}
    for name in schema.V4_EXPORT_METRICS_COLUMNS:
        if name not in present:
            kind = schema.export_metrics.c[name].type.compile(dialect=conn.dialect)
            conn.execute(sa.text(f"ALTER TABLE export_metrics ADD COLUMN {name} {kind}"))


def _v5_neutral_orchestrator_run_id(conn: sa.Connection) -> None:
    """The orchestrator's run id column of export_metrics, run_status and export_lock was named
    after the one integration that set it (`<name>_run_id`); it becomes `orchestrator_run_id`
    (rivet_core/orchestrator.py), renamed in place so every row keeps its value. export_lock
    gains `orchestrator` (the display name of a lock refusal), filled for the rows that carry
    an id with the name the old column spelled. A store created by this release already has
    both columns, and then nothing is done."""
    inspector = sa.inspect(conn)
    for table in schema.V5_RUN_ID_TABLES:
        present = [c["name"] for c in inspector.get_columns(table)]
        if "orchestrator" not in present and table == "export_lock":
            kind = schema.export_lock.c.orchestrator.type.compile(dialect=conn.dialect)
            conn.execute(sa.text(f"ALTER TABLE export_lock ADD COLUMN orchestrator {kind}"))
        if "orchestrator_run_id" in present:
            continue
        legacy = [c for c in present if legacy_run_id_name(c) is not None and c not in schema.metadata.tables[table].c]
        if len(legacy) != 1:
            raise RuntimeError(f"state store table {table} has neither orchestrator_run_id nor one legacy "
                               f"<name>_run_id column (found {legacy or 'none'}) — it was not made by Rivet")
        old = legacy[0]
        conn.execute(sa.text(f"ALTER TABLE {table} RENAME COLUMN {old} TO orchestrator_run_id"))
        if table == "export_lock":
            conn.execute(sa.text("UPDATE export_lock SET orchestrator = :name "
                                 "WHERE orchestrator_run_id IS NOT NULL AND orchestrator IS NULL"),
                         {"name": display_name(legacy_run_id_name(old) or old)})


#: The ladder. Append only; never edit a released step.
MIGRATIONS: list[tuple[int, Callable[[sa.Connection], None]]] = [
    (1, _v1_create_core_tables),
    (2, _v2_create_chunk_checkpoint_tables),
    (3, _v3_export_lock_and_chunk_worker_process),
    (4, _v4_export_metrics_reconcile),
    (5, _v5_neutral_orchestrator_run_id),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


def current_version(engine: sa.Engine) -> int | None:
    """The store's applied version, read without DDL or reflection; None when there is no
    readable `schema_version` table yet (a new store: the full ladder runs)."""
    try:
        with engine.connect() as conn:
            return conn.execute(sa.select(sa.func.max(schema.schema_version.c.version))).scalar()
    except sa.exc.DBAPIError:
        return None  # no table yet (or unreachable: the ladder below reports it)


def migrate(engine: sa.Engine) -> int:
    """Bring the database to SCHEMA_VERSION; returns the version reached.

    Every `rivet` process opens the store, and nearly always it is already current: one
    SELECT settles that, without the ladder's table-existence checks (`create(checkfirst)`
    reflection) and, on PostgreSQL, without the advisory lock (tests/test_startup.py)."""
    if current_version(engine) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_KEY - (1 << 63)})
        schema.schema_version.create(conn, checkfirst=True)
        applied = set(conn.execute(sa.select(schema.schema_version.c.version)).scalars())
        for version, step in MIGRATIONS:
            if version in applied:
                continue
            step(conn)
            conn.execute(
                schema.schema_version.insert().values(
                    version=version, applied_at=datetime.now(UTC).isoformat()
                )
            )
        current = conn.execute(sa.select(sa.func.max(schema.schema_version.c.version))).scalar()
    if current != SCHEMA_VERSION:
        raise RuntimeError(f"state store migration incomplete: at v{current}, expected v{SCHEMA_VERSION}")
    return int(current)
