"""A chunked run's windows reuse their worker's source session (rivet_core/pipeline/
window_sessions.py) while each window still reads in a snapshot of its own: on PostgreSQL and
MariaDB a session's next read sees what was committed after its previous one, runs with the
read's settings again (UTC), and a window that failed is never handed its broken session. The
connections a chunked run opens are counted by the server (PostgreSQL `pg_stat_database.
sessions`), and the exported rows are re-read with pyarrow and compared with the source."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pymysql
import pytest

from rivet_core import api
from rivet_core.config.tuning import resolve_tuning
from rivet_core.pipeline.window_sessions import WindowSessions
from tests.helpers import source_block, write_config

ROWS = 4_000
WINDOWS = 16


def _mysql(url: str) -> Any:
    u = urllib.parse.urlsplit(url)
    return pymysql.connect(host=u.hostname, port=u.port or 3306, user=urllib.parse.unquote(u.username or "root"),
                           password=urllib.parse.unquote(u.password or ""), database=u.path.lstrip("/"),
                           autocommit=True)


def _execute(url: str, sql: str) -> None:
    if url.startswith("mysql"):
        conn = _mysql(url)
        with conn.cursor() as cur:
            cur.execute(sql)
        conn.close()
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql)


@pytest.fixture(params=["pg", "mysql"])
def url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("pg_url" if request.param == "pg" else "mysql_url")


def _count(src: Any) -> int:
    batches = list(src.stream("SELECT id FROM t", [], src.describe("SELECT id FROM t", []), 1_000))
    return sum(b.num_rows for b in batches)


def _zone(src: Any) -> str:
    sql = ("SELECT @@session.time_zone AS tz" if src.engine == "mysql"
           else "SELECT current_setting('TimeZone') AS tz")
    batch = next(iter(src.stream(sql, [], src.describe(sql, []), 10)))
    return str(batch.column(0)[0].as_py())


def test_each_read_of_a_reused_session_takes_a_new_snapshot_with_its_settings(url: str) -> None:
    _execute(url, "CREATE TABLE t (id int PRIMARY KEY)")
    _execute(url, "INSERT INTO t VALUES (1), (2)")
    sessions = WindowSessions(url, resolve_tuning(None, None))
    try:
        with sessions.session() as first:
            assert _count(first) == 2
            _execute(url, "INSERT INTO t VALUES (3)")  # committed while this read is open
            assert _count(first) == 2  # the read's own snapshot does not see it
            assert _zone(first) in ("UTC", "+00:00")
        with sessions.session() as second:
            assert second is first  # the thread's session, kept
            assert _count(second) == 3  # a new snapshot: the row committed meanwhile
            assert _zone(second) in ("UTC", "+00:00")  # the read's settings, set again
        assert sessions.opened == 1
    finally:
        sessions.close()


def test_a_window_that_fails_closes_its_session_and_the_next_gets_a_new_one(url: str) -> None:
    _execute(url, "CREATE TABLE t (id int PRIMARY KEY)")
    sessions = WindowSessions(url, resolve_tuning(None, None))
    try:
        with pytest.raises(RuntimeError), sessions.session() as broken:
            raise RuntimeError("the window failed")
        with sessions.session() as fresh:
            assert fresh is not broken
            assert _count(fresh) == 0
        assert sessions.opened == 2
    finally:
        sessions.close()


def _pg_sessions(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        return int(conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
                   .fetchone()[0])


@pytest.mark.parametrize("parallel", [1, 2])
def test_a_chunked_run_connects_per_worker_not_per_window_and_exports_every_row(
        tmp_path: Path, pg_url: str, parallel: int) -> None:
    _execute(pg_url, "CREATE TABLE t (id int PRIMARY KEY, note text, at timestamptz)")
    _execute(pg_url, f"INSERT INTO t SELECT g, md5(g::text), timestamptz '2026-01-01 00:00+00' + g * interval '1 minute' "
                     f"FROM generate_series(1, {ROWS}) g")
    config = write_config(tmp_path, source_block(pg_url),
                          [{"name": "t", "table": "t", "mode": "chunked", "format": "parquet", "chunk_column": "id",
                            "chunk_count": WINDOWS, "parallel": parallel,
                            "destination": {"type": "local", "path": str(tmp_path / "out")}}])
    before = _pg_sessions(pg_url)
    summary = api.run_export(api.load_config(config), "t")
    assert summary.status == "success", summary.error_message
    opened = _pg_sessions(pg_url) - before - 1  # the second count's own connection
    # Planning and the row estimate connect too; the windows at most once per worker
    # (parallel + 1 workers). One connection per window would be ≥ WINDOWS.
    assert opened <= 4 + parallel + 1 < WINDOWS, opened
    import pyarrow.parquet as pq

    table = pa.concat_tables(pq.read_table(p) for p in sorted((tmp_path / "out").rglob("*.parquet")))
    table = table.sort_by("id")
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT id, note, at FROM t ORDER BY id").fetchall()
    assert table.column("id").to_pylist() == [r[0] for r in rows]
    assert table.column("note").to_pylist() == [r[1] for r in rows]
    assert table.column("at").to_pylist() == [r[2] for r in rows]
