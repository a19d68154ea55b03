"""The state store's SQL layer (rivet_core/state/database.py): parameter style, transactions,
the SQLite write lock and the PostgreSQL pool — on real SQLite files and a real server."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rivet_core.state.database import (
    PostgresDatabase,
    SqliteDatabase,
    StateDatabase,
    _pyformat,
    in_list,
)
from tests.helpers import pg_exec


def test_named_parameters_become_psycopg_placeholders_and_casts_and_percent_signs_survive() -> None:
    assert _pyformat("SELECT :a, x::text, '5%' FROM t WHERE b = :b_2") == (
        "SELECT %(a)s, x::text, '5%%' FROM t WHERE b = %(b_2)s")


def test_in_list_names_one_parameter_per_value_and_refuses_an_empty_list() -> None:
    assert in_list("run_id", ["a", "b"]) == ("(:run_id_0, :run_id_1)", {"run_id_0": "a", "run_id_1": "b"})
    with pytest.raises(ValueError, match="no values"):
        in_list("run_id", [])


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateDatabase]:
    if request.param == "postgresql":
        db: StateDatabase = PostgresDatabase(request.getfixturevalue("pg_url"))
    else:
        db = SqliteDatabase(f"sqlite:///{tmp_path / 'state.db'}")
    with db.transaction() as tx:
        tx.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)")
    yield db
    db.close()


def test_a_transaction_commits_on_success_and_rolls_back_on_error(database: StateDatabase) -> None:
    with database.transaction() as tx:
        tx.executemany("INSERT INTO t (k, v) VALUES (:k, :v)", [{"k": "a", "v": 1}, {"k": "b", "v": 2}])
    with pytest.raises(RuntimeError, match="boom"), database.transaction() as tx:
        tx.execute("UPDATE t SET v = :v", {"v": 99})
        raise RuntimeError("boom")
    with pytest.raises(database.IntegrityError), database.transaction() as tx:
        tx.execute("INSERT INTO t (k, v) VALUES (:k, :v)", {"k": "c", "v": 3})
        tx.execute("INSERT INTO t (k, v) VALUES (:k, :v)", {"k": "a", "v": 4})  # duplicate key
    with database.transaction() as tx:  # the connection that failed is usable again (PostgreSQL: pooled)
        rows = tx.execute("SELECT k, v FROM t ORDER BY k").all()
        updated = tx.execute("UPDATE t SET v = v + 1 WHERE k = :k", {"k": "a"}).rowcount
    assert rows == [{"k": "a", "v": 1}, {"k": "b", "v": 2}]
    assert updated == 1


def test_a_sqlite_transaction_holds_the_write_lock_from_its_first_statement(tmp_path: Path) -> None:
    """BEGIN IMMEDIATE: even a transaction that has only read excludes every other writer,
    so a read-then-write sequence is atomic across processes (state/chunks.py claims)."""
    path = tmp_path / "state.db"
    database = SqliteDatabase(f"sqlite:///{path}")
    with database.transaction() as tx:
        tx.execute("CREATE TABLE t (k TEXT)")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        with database.transaction() as tx:
            assert tx.execute("SELECT count(*) FROM t").scalar() == 0
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")  # released at commit
        other.execute("ROLLBACK")
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        other.close()


def test_a_pooled_postgresql_connection_the_server_closed_is_replaced(pg_url: str) -> None:
    """What SQLAlchemy's pre-ping did: the pooled connection's BEGIN fails, a fresh one is used."""
    database = PostgresDatabase(pg_url)
    try:
        with database.transaction() as tx:
            first = tx.execute("SELECT pg_backend_pid() AS pid").scalar()
        pg_exec(pg_url, f"SELECT pg_terminate_backend({int(first)})")
        deadline = time.monotonic() + 30
        while pg_exec(pg_url, f"SELECT 1 FROM pg_stat_activity WHERE pid = {int(first)}"):
            assert time.monotonic() < deadline, "the terminated backend never went away"
            time.sleep(0.05)  # polling the server's own view, not waiting a fixed time
        with database.transaction() as tx:
            second = tx.execute("SELECT pg_backend_pid() AS pid").scalar()
        assert second != first
    finally:
        database.close()
