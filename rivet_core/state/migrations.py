"""Versioned migrations of the state store, safe to run from two processes at once.

The ladder is an ordered list of (version, step). Each process runs `migrate()` on open:
- SQLite: the whole ladder runs inside one `BEGIN IMMEDIATE` transaction, so a second
  process waits on the lock and then sees the versions already applied.
- PostgreSQL: the ladder runs in one transaction holding `pg_advisory_xact_lock`
  (DDL is transactional there), with the same effect.
A step must be idempotent-safe under that lock (it only ever runs once per database).
A table is created only when it does not exist yet, with the indexes of its definition
(schema.py), and a column is added only when the table lacks it: a store created by a
later release already has both.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from rivet_core.orchestrator import display_name, legacy_run_id_name
from rivet_core.state import schema
from rivet_core.state.database import StateDatabase, Transaction

_ADVISORY_KEY = 0x72697665745F6D69  # "rivet_mi"


def _has_table(tx: Transaction, name: str) -> bool:
    if tx.postgresql:
        return tx.execute("SELECT to_regclass(:name) IS NOT NULL AS present", {"name": name}).scalar()
    return tx.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = :name",
                      {"name": name}).scalar() > 0


def _columns(tx: Transaction, table: str) -> list[str]:
    """The table's column names, in order."""
    if tx.postgresql:
        return tx.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = "
                          "current_schema() AND table_name = :name ORDER BY ordinal_position",
                          {"name": table}).scalars()
    return [row["name"] for row in tx.execute(f"PRAGMA table_info({table})").all()]


def _create(tx: Transaction, tables: tuple[schema.Table, ...]) -> None:
    for table in tables:
        if not _has_table(tx, table.name):
            for statement in table.ddl(tx.dialect):
                tx.execute(statement)


def _add_missing_columns(tx: Transaction, table: schema.Table, names: tuple[str, ...]) -> None:
    present = set(_columns(tx, table.name))
    for name in names:
        if name not in present:
            tx.execute(f"ALTER TABLE {table.name} ADD COLUMN {name} {table.column_type(name)}")


def _v1_create_core_tables(tx: Transaction) -> None:
    _create(tx, schema.V1_TABLES)


def _v2_create_chunk_checkpoint_tables(tx: Transaction) -> None:
    """chunk_run + chunk_task, with the partial unique index that allows one
    in-progress run per export. New tables, so there are no duplicate rows to demote."""
    _create(tx, schema.V2_TABLES)


def _v3_export_lock_and_chunk_worker_process(tx: Transaction) -> None:
    """export_lock: who runs an export right now (state/locks.py), a new table; and
    chunk_task.worker_pid / worker_host (which process claimed a window), nullable columns
    added to a v2 table (a store created at v2 by this release already has them)."""
    _create(tx, schema.V3_TABLES)
    _add_missing_columns(tx, schema.chunk_task, schema.V3_CHUNK_TASK_COLUMNS)


def _v4_export_metrics_reconcile(tx: Transaction) -> None:
    """export_metrics.source_count / reconciled (`rivet run --reconcile`), nullable columns added
    to a v1 table (a store created at v1 by this release already has them)."""
    _add_missing_columns(tx, schema.export_metrics, schema.V4_EXPORT_METRICS_COLUMNS)


def _v5_neutral_orchestrator_run_id(tx: Transaction) -> None:
    """The orchestrator's run id column of export_metrics, run_status and export_lock was named
    after the one integration that set it (`<name>_run_id`); it becomes `orchestrator_run_id`
    (rivet_core/orchestrator.py), renamed in place so every row keeps its value. export_lock
    gains `orchestrator` (the display name of a lock refusal), filled for the rows that carry
    an id with the name the old column spelled. A store created by this release already has
    both columns, and then nothing is done."""
    for table in schema.V5_RUN_ID_TABLES:
        present = _columns(tx, table)
        if "orchestrator" not in present and table == "export_lock":
            tx.execute(f"ALTER TABLE export_lock ADD COLUMN orchestrator "
                       f"{schema.export_lock.column_type('orchestrator')}")
        if "orchestrator_run_id" in present:
            continue
        known = schema.TABLES[table].column_names
        legacy = [c for c in present if legacy_run_id_name(c) is not None and c not in known]
        if len(legacy) != 1:
            raise RuntimeError(f"state store table {table} has neither orchestrator_run_id nor one legacy "
                               f"<name>_run_id column (found {legacy or 'none'}) — it was not made by Rivet")
        old = legacy[0]
        tx.execute(f"ALTER TABLE {table} RENAME COLUMN {old} TO orchestrator_run_id")
        if table == "export_lock":
            tx.execute("UPDATE export_lock SET orchestrator = :name "
                       "WHERE orchestrator_run_id IS NOT NULL AND orchestrator IS NULL",
                       {"name": display_name(legacy_run_id_name(old) or old)})


#: The ladder. Append only; never edit a released step.
MIGRATIONS: list[tuple[int, Callable[[Transaction], None]]] = [
    (1, _v1_create_core_tables),
    (2, _v2_create_chunk_checkpoint_tables),
    (3, _v3_export_lock_and_chunk_worker_process),
    (4, _v4_export_metrics_reconcile),
    (5, _v5_neutral_orchestrator_run_id),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]

#: The one statement an open of a current store sends (tests/test_startup.py).
VERSION_QUERY = f"SELECT max(version) AS version FROM {schema.schema_version.name}"


def current_version(database: StateDatabase) -> int | None:
    """The store's applied version, read without DDL or reflection; None when there is no
    readable `schema_version` table yet (a new store: the full ladder runs)."""
    try:
        with database.transaction() as tx:
            return tx.execute(VERSION_QUERY).scalar()
    except database.Error:
        return None  # no table yet (or unreachable: the ladder below reports it)


def migrate(database: StateDatabase) -> int:
    """Bring the database to SCHEMA_VERSION; returns the version reached.

    Every `rivet` process opens the store, and nearly always it is already current: one
    SELECT settles that, without the ladder's table-existence checks and, on PostgreSQL,
    without the advisory lock (tests/test_startup.py)."""
    if current_version(database) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    with database.transaction() as tx:
        if tx.postgresql:
            tx.execute("SELECT pg_advisory_xact_lock(:k)", {"k": _ADVISORY_KEY - (1 << 63)})
        _create(tx, (schema.schema_version,))
        applied = set(tx.execute(f"SELECT version FROM {schema.schema_version.name}").scalars())
        for version, step in MIGRATIONS:
            if version in applied:
                continue
            step(tx)
            tx.execute(schema.insert_sql(schema.schema_version, ("version", "applied_at")),
                       {"version": version, "applied_at": datetime.now(UTC).isoformat()})
        current = tx.execute(VERSION_QUERY).scalar()
    if current != SCHEMA_VERSION:
        raise RuntimeError(f"state store migration incomplete: at v{current}, expected v{SCHEMA_VERSION}")
    return int(current)
