"""Migration v5 (rivet_core/state/migrations.py): a store whose orchestrator run id columns are
still named after the integration (`dagster_run_id`, the schema up to v4) upgrades in place —
the columns become `orchestrator_run_id`, export_lock gains `orchestrator`, and every row keeps
its values. On SQLite and on PostgreSQL (the two state store backends, rivet_core/state/database.py).

The v4 store is made by opening a store with this release and turning its three columns back
into the v4 spelling (and forgetting v5), then filled with rows through plain SQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rivet_core.state import SCHEMA_VERSION, StateStore
from rivet_core.state.database import StateDatabase

OLD = "dagster_run_id"
TABLES = ("export_metrics", "run_status", "export_lock")


def _columns(database: StateDatabase, table: str) -> set[str]:
    with database.transaction() as tx:
        if tx.postgresql:
            return set(tx.execute("SELECT column_name FROM information_schema.columns WHERE table_name = :t",
                                  {"t": table}).scalars())
        return {row["name"] for row in tx.execute(f"PRAGMA table_info({table})").all()}


def _make_v4_store(config: Path, url: str | None) -> None:
    store = StateStore.open(config, url)
    with store.database.transaction() as tx:
        for table in TABLES:
            tx.execute(f"ALTER TABLE {table} RENAME COLUMN orchestrator_run_id TO {OLD}")
        tx.execute("ALTER TABLE export_lock DROP COLUMN orchestrator")
        tx.execute("DELETE FROM rivet_schema_version WHERE version = 5")
        tx.execute(f"INSERT INTO run_status (run_id, export_name, status, started_at, {OLD}) "
                   "VALUES ('r1', 'orders', 'failed', '2026-01-01T00:00:00+00:00', 'dg-run-1')")
        tx.execute(f"INSERT INTO export_metrics (run_id, export_name, run_at, duration_ms, total_rows, "
                   f"status, {OLD}) VALUES ('r1', 'orders', '2026-01-01T00:00:00+00:00', 5, 0, "
                   "'failed', 'dg-run-1')")
        tx.execute(
            f"INSERT INTO export_lock (lock_key, token, mode, export_name, run_id, {OLD}, pid, host, "
            "started_at, heartbeat_at, expires_at) VALUES ('orders', 't1', 'shared', 'orders', 'r1', "
            "'dg-run-1', 1, 'elsewhere', '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00', "
            "'2999-01-01T00:00:00+00:00')")
    assert all(OLD in _columns(store.database, t) for t in TABLES)
    store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_v4_store_upgrades_to_the_neutral_orchestrator_run_id_and_keeps_its_rows(
        tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    config = tmp_path / "rivet.yaml"
    _make_v4_store(config, url)

    store = StateStore.open(config, url)  # migrates v4 → v5
    try:
        database = store.database
        for table in TABLES:
            assert "orchestrator_run_id" in _columns(database, table) and OLD not in _columns(database, table), table
        with database.transaction() as tx:
            versions = tx.execute("SELECT version FROM rivet_schema_version ORDER BY version").scalars()
            assert versions == list(range(1, SCHEMA_VERSION + 1))
            assert tx.execute("SELECT run_id, orchestrator_run_id FROM run_status").all() == [
                {"run_id": "r1", "orchestrator_run_id": "dg-run-1"}]
            assert tx.execute("SELECT run_id, orchestrator_run_id FROM export_metrics").all() == [
                {"run_id": "r1", "orchestrator_run_id": "dg-run-1"}]
            assert tx.execute("SELECT run_id, orchestrator_run_id, orchestrator FROM export_lock").all() == [
                {"run_id": "r1", "orchestrator_run_id": "dg-run-1", "orchestrator": "Dagster"}]
        # the store's readers see the old rows under the new names
        assert store.core_reported_failure("dg-run-1") and not store.core_reported_failure("dg-run-2")
        holder, = store.list_export_locks("orders")
        assert "(Dagster run dg-run-1)" in holder.describe()
    finally:
        store.close()
    StateStore.open(config, url).close()  # a second open is a no-op on a v5 store
