"""The state store's on-disk schema never drifts (tests/state/schema_dump.py: the golden files).

A store is shared by every rivet release that opens it: an older store must open with this
code, and a store this code creates must be the one older code created. So the schema a
new store gets, and the one every partial ladder (a store left at v1…v4 by an earlier
release) reaches, are compared with golden files written by the SQLAlchemy Core state
store — byte-identical DDL text on SQLite, the same catalogue on PostgreSQL. And a SQLite
store made and filled by that code (tests/state/golden/sqlite_store.sql, the `iterdump` of a
store at v5 written through its public methods at commit 20b6d1b: cursor, baseline, two parts,
a running and a terminal metrics row, journal, run status, progression, a chunk run with a
completed, a failed and a pending task, a foreign lock) opens, reads and writes with this one.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from rivet_core.state import SCHEMA_VERSION, StateStore, migrations
from tests.state.schema_dump import (
    POSTGRESQL_GOLDEN,
    SQLITE_GOLDEN,
    postgresql_schema,
    sqlite_schema,
)

STORE_DUMP = SQLITE_GOLDEN.parent / "sqlite_store.sql"


def _schema(backend: str, tmp_path: Path, url: str) -> object:
    return sqlite_schema(tmp_path / ".rivet_state.db") if backend == "sqlite" else postgresql_schema(url)


def _golden(backend: str) -> object:
    return json.loads((SQLITE_GOLDEN if backend == "sqlite" else POSTGRESQL_GOLDEN).read_text())


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """(backend name, state URL: "" = the SQLite file beside the config)."""
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    return request.param, request.getfixturevalue("pg_url") if request.param == "postgresql" else ""


def test_a_new_store_has_exactly_the_golden_schema(backend: tuple[str, str], tmp_path: Path) -> None:
    name, url = backend
    StateStore.open(tmp_path / "rivet.yaml", state_url=url).close()
    assert _schema(name, tmp_path, url) == _golden(name)


@pytest.mark.parametrize("left_at", range(1, SCHEMA_VERSION))
def test_a_store_left_at_an_earlier_version_migrates_to_the_golden_schema(
        backend: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, left_at: int) -> None:
    name, url = backend
    with monkeypatch.context() as m:  # the ladder as a release at `left_at` ran it
        m.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:left_at])
        m.setattr(migrations, "SCHEMA_VERSION", left_at)
        StateStore.open(tmp_path / "rivet.yaml", state_url=url).close()
    store = StateStore.open(tmp_path / "rivet.yaml", state_url=url)
    try:
        store.set_cursor("orders", "7")
        assert store.get_cursor("orders") == "7"
    finally:
        store.close()
    assert _schema(name, tmp_path, url) == _golden(name)


def test_a_sqlite_store_made_by_the_sqlalchemy_store_opens_reads_and_writes(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    with sqlite3.connect(tmp_path / ".rivet_state.db") as conn:
        conn.executescript(STORE_DUMP.read_text())
    before = sqlite_schema(tmp_path / ".rivet_state.db")
    assert before == _golden("sqlite")
    store = StateStore.open(tmp_path / "rivet.yaml")
    try:
        assert store.get_cursor("orders") == "41"
        assert store.get_schema_baseline("orders") == [{"name": "id", "type": "int64"}]
        assert [(f.file_name, f.row_count, f.bytes, f.cursor_high) for f in store.list_files_for_run("orders_r1")] == [
            ("part-0.parquet", 10, 100, "41"), ("part-1.parquet", 5, 50, "41")]
        running, terminal = store.list_metrics("orders")[::-1]
        assert (running["status"], running["total_rows"], running["files_committed"]) == ("running", 15, 2)
        assert (terminal["status"], terminal["validated"], terminal["schema_changed"], terminal["reconciled"],
                terminal["files_produced"]) == ("success", True, False, None, 0)
        assert store.get_run_status("orders_r1")["status"] == "success"
        assert store.core_reported_failure("dg-1") is False
        assert store.list_journals("orders") == [{"events": [{"k": "v"}]}]
        assert store.get_progression("orders")["last_committed_cursor"] == "41"
        assert [(t.chunk_index, t.status, t.attempts, t.file_name) for t in store.list_chunk_tasks("big_r1")] == [
            (0, "completed", 1, "big-0.parquet"), (1, "failed", 3, None), (2, "pending", 0, None)]
        [holder] = store.list_export_locks("big")
        assert "(Dagster run dg-2)" in holder.describe()
        store.set_cursor("orders", "42")
        claimed = store.claim_next_chunk_task("big_r1", worker="w-c")
        assert claimed is not None and claimed.chunk_index == 2
    finally:
        store.close()
    assert sqlite_schema(tmp_path / ".rivet_state.db") == before  # opening changed no DDL
