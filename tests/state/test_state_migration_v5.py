"""Migration v5 (rivet_core/state/migrations.py): a store whose orchestrator run id columns are
still named after the integration (`dagster_run_id`, the schema up to v4) upgrades in place —
the columns become `orchestrator_run_id`, export_lock gains `orchestrator`, and every row keeps
its values. On SQLite and on PostgreSQL (the two state store backends, rivet_core/state/engine.py).

The v4 store is made by opening a store with this release and turning its three columns back
into the v4 spelling (and forgetting v5), then filled with rows through plain SQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from rivet_core.state import SCHEMA_VERSION, StateStore

OLD = "dagster_run_id"
TABLES = ("export_metrics", "run_status", "export_lock")


def _columns(engine: sa.Engine, table: str) -> set[str]:
    return {c["name"] for c in sa.inspect(engine).get_columns(table)}


def _make_v4_store(config: Path, url: str | None) -> None:
    store = StateStore.open(config, url)
    with store.engine.begin() as conn:
        for table in TABLES:
            conn.execute(sa.text(f"ALTER TABLE {table} RENAME COLUMN orchestrator_run_id TO {OLD}"))
        conn.execute(sa.text("ALTER TABLE export_lock DROP COLUMN orchestrator"))
        conn.execute(sa.text("DELETE FROM rivet_schema_version WHERE version = 5"))
        conn.execute(sa.text(f"INSERT INTO run_status (run_id, export_name, status, started_at, {OLD}) "
                             "VALUES ('r1', 'orders', 'failed', '2026-01-01T00:00:00+00:00', 'dg-run-1')"))
        conn.execute(sa.text(f"INSERT INTO export_metrics (run_id, export_name, run_at, duration_ms, total_rows, "
                             f"status, {OLD}) VALUES ('r1', 'orders', '2026-01-01T00:00:00+00:00', 5, 0, "
                             "'failed', 'dg-run-1')"))
        conn.execute(sa.text(
            f"INSERT INTO export_lock (lock_key, token, mode, export_name, run_id, {OLD}, pid, host, "
            "started_at, heartbeat_at, expires_at) VALUES ('orders', 't1', 'shared', 'orders', 'r1', "
            "'dg-run-1', 1, 'elsewhere', '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00', "
            "'2999-01-01T00:00:00+00:00')"))
    assert all(OLD in _columns(store.engine, t) for t in TABLES)
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
        engine = store.engine
        for table in TABLES:
            assert "orchestrator_run_id" in _columns(engine, table) and OLD not in _columns(engine, table), table
        with engine.begin() as conn:
            versions = conn.execute(sa.text("SELECT version FROM rivet_schema_version ORDER BY version")).scalars()
            assert list(versions) == list(range(1, SCHEMA_VERSION + 1))
            assert conn.execute(sa.text("SELECT run_id, orchestrator_run_id FROM run_status")).all() == [
                ("r1", "dg-run-1")]
            assert conn.execute(sa.text("SELECT run_id, orchestrator_run_id FROM export_metrics")).all() == [
                ("r1", "dg-run-1")]
            assert conn.execute(sa.text("SELECT run_id, orchestrator_run_id, orchestrator FROM export_lock")).all() == [
                ("r1", "dg-run-1", "Dagster")]
        # the store's readers see the old rows under the new names
        assert store.core_reported_failure("dg-run-1") and not store.core_reported_failure("dg-run-2")
        holder, = store.list_export_locks("orders")
        assert "(Dagster run dg-run-1)" in holder.describe()
    finally:
        store.close()
    StateStore.open(config, url).close()  # a second open is a no-op on a v5 store
