"""A chunked run's windows reuse idle source sessions (rivet_core/pipeline/resources/window_sessions.py)
while each window still reads in a snapshot of its own: on PostgreSQL and MariaDB a session's
next read sees what was committed after its previous one, runs with the read's settings again
(UTC), and a window that failed is never handed its broken session. The connections a chunked
run opens are counted by the server (PostgreSQL `pg_stat_database.sessions`), and the exported
rows are re-read with pyarrow and compared with the source.

A window's read runs on a reader thread and gives its read slot back when the source has sent
its last row (pipeline/facade/chunk_commit.py `stage_window`): the next window's query starts
while the previous window is still being encoded, and an encoder that fails mid-read stops the
read and leaves no session open on the server."""

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
from rivet_core.pipeline.resources.window_sessions import WindowSessions
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
            assert second is first  # the idle session, kept
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


def _rows_table(url: str, rows: int) -> None:
    _execute(url, "CREATE TABLE t (id int PRIMARY KEY, note varchar(40))")
    if url.startswith("mysql"):
        values = ", ".join(f"({i}, 'n{i}')" for i in range(1, rows + 1))
        _execute(url, f"INSERT INTO t VALUES {values}")
    else:
        _execute(url, f"INSERT INTO t SELECT g, 'n' || g FROM generate_series(1, {rows}) g")


def _source_ids(url: str) -> list[int]:
    if url.startswith("mysql"):
        conn = _mysql(url)
        with conn.cursor() as cur:
            cur.execute("SELECT id FROM t ORDER BY id")
            ids = [int(r[0]) for r in cur.fetchall()]
        conn.close()
        return ids
    with psycopg.connect(url) as conn:
        return [int(r[0]) for r in conn.execute("SELECT id FROM t ORDER BY id").fetchall()]


def test_the_next_window_reads_while_the_previous_one_is_still_encoded(
        tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`parallel: 1` and the first window's encoder held at its first batch until the second
    window's read has begun: that only happens when the first window's read slot is given back
    once its rows are read, not once they are encoded (before, this run waited for ever)."""
    import threading

    from rivet_core.format import PartRotator
    from rivet_core.pipeline.facade import chunk_commit

    _rows_table(url, 2_000)
    reads: list[str] = []
    second_read = threading.Event()
    waited: list[bool] = []
    real_source, real_write = chunk_commit.WindowContext.source, PartRotator.write_batch

    def source(self: Any) -> Any:
        reads.append(threading.current_thread().name)
        if len(reads) == 2:
            second_read.set()
        return real_source(self)

    def write_batch(self: Any, batch: Any) -> None:
        if not waited:  # the first window's first batch: its read is done, the next one may start
            waited.append(second_read.wait(timeout=60))
        real_write(self, batch)

    monkeypatch.setattr(chunk_commit.WindowContext, "source", source)
    monkeypatch.setattr(PartRotator, "write_batch", write_batch)
    config = write_config(tmp_path, source_block(url),
                          [{"name": "t", "table": "t", "mode": "chunked", "format": "parquet", "chunk_column": "id",
                            "chunk_count": 2, "parallel": 1,
                            "destination": {"type": "local", "path": str(tmp_path / "out")}}])
    summary = api.run_export(api.load_config(config), "t")
    assert summary.status == "success", summary.error_message
    assert waited == [True], "the second window's read never began while the first was being encoded"
    assert len(reads) == 2 and all(name.startswith("rivet-window-") for name in reads), reads
    import pyarrow.parquet as pq

    table = pa.concat_tables(pq.read_table(p) for p in sorted((tmp_path / "out").rglob("*.parquet")))
    assert sorted(table.column("id").to_pylist()) == _source_ids(url)


def test_an_encoder_that_fails_mid_read_stops_the_read_and_closes_its_session(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window's rows outgrow the read-ahead (the reader is still streaming) when its
    encoder fails: the run fails with the encoder's error, and the server is left with no
    session of the run — none idle in a transaction, none still copying."""
    from rivet_core.format import PartRotator

    _execute(pg_url, "CREATE TABLE t (id int PRIMARY KEY, note text)")
    _execute(pg_url, "INSERT INTO t SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, 200000) g")

    def write_batch(self: Any, batch: Any) -> None:
        raise OSError(28, "No space left on device (injected by the test)")

    monkeypatch.setattr(PartRotator, "write_batch", write_batch)
    config = write_config(tmp_path, source_block(pg_url),
                          [{"name": "t", "table": "t", "mode": "chunked", "format": "parquet", "chunk_column": "id",
                            "chunk_count": 2, "parallel": 1,
                            "destination": {"type": "local", "path": str(tmp_path / "out")}}])
    summary = api.run_export(api.load_config(config), "t")
    assert summary.status == "failed" and "No space left on device" in (summary.error_message or "")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        left = conn.execute("SELECT state, query FROM pg_stat_activity WHERE datname = current_database() "
                            "AND application_name = 'rivet'").fetchall()
    assert left == [], left
    assert not list((tmp_path / "out").rglob("*.parquet"))


def _claimed_batch(tmp_path: Path, url: str, **export: Any) -> tuple[Any, Any]:
    """(plan, a ChunkWindowRun that claimed every window) of a checkpointed export of `t` in
    1,000-id windows, as an orchestrator's batch runs it."""
    config = write_config(tmp_path, source_block(url),
                          [{"name": "t", "table": "t", "mode": "chunked", "format": "parquet", "chunk_column": "id",
                            "chunk_size": 1000, "chunk_checkpoint": True, **export,
                            "destination": {"type": "local", "path": str(tmp_path / "out")}}])
    cfg = api.load_config(config)
    plan = api.plan_chunk_tasks(cfg, cfg.export("t"))
    run = api.ChunkWindowRun(cfg, cfg.export("t"), plan.keys, run_label="batch-1")
    run.claim()
    return plan, run


def test_a_window_batch_reads_the_next_window_while_the_previous_one_is_still_encoded(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An orchestrator's batch of windows (`ChunkWindowRun.extract`) overlaps the same way,
    one query at a time; every window is committed and its rows re-read equal the source."""
    import threading

    import pyarrow.parquet as pq

    from rivet_core.format import PartRotator
    from rivet_core.pipeline.facade import chunk_commit

    _rows_table(pg_url, 3_000)
    reading = threading.Semaphore(0)  # released when a window's read begins
    at_once: list[int] = []
    active = [0]
    guard = threading.Lock()
    waited: list[bool] = []
    real_source, real_write = chunk_commit.WindowContext.source, PartRotator.write_batch

    class _Counted:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __enter__(self) -> Any:
            with guard:
                active[0] += 1
                at_once.append(active[0])
            reading.release()
            return self.inner.__enter__()

        def __exit__(self, *exc: Any) -> Any:
            with guard:
                active[0] -= 1
            return self.inner.__exit__(*exc)

    def source(self: Any) -> Any:
        return _Counted(real_source(self))

    def write_batch(self: Any, batch: Any) -> None:
        if not waited:  # the first window's first batch: hold it until a second read began
            reading.acquire()
            waited.append(reading.acquire(timeout=60))
        real_write(self, batch)

    monkeypatch.setattr(chunk_commit.WindowContext, "source", source)
    monkeypatch.setattr(PartRotator, "write_batch", write_batch)
    plan, run = _claimed_batch(tmp_path, pg_url)
    run.extract()
    results = run.publish()
    assert waited == [True], "the second window's read never began while the first was being encoded"
    assert max(at_once) == 1, at_once  # one query at a time
    assert len(plan.keys) >= 3 and sorted(r.chunk_index for r in results) == list(range(len(plan.keys)))
    table = pa.concat_tables(pq.read_table(p) for p in sorted((tmp_path / "out").rglob("*.parquet")))
    assert sorted(table.column("id").to_pylist()) == _source_ids(pg_url)


@pytest.mark.parametrize("change_column", [None, "id"])
def test_a_window_batch_fingerprints_each_window_in_the_snapshot_its_rows_are_read_in(
        tmp_path: Path, url: str, change_column: str | None) -> None:
    """Rows committed after the batch claimed its windows but before their reads are in the
    exported rows and in the recorded fingerprint alike: the count is the rows the window
    read, MAX(change_column) is asked on the window's read session in its snapshot (before, a
    grouped query at claim time recorded a fingerprint the export did not match)."""
    import pyarrow.parquet as pq

    _rows_table(url, 1_500)
    _, run = _claimed_batch(tmp_path, url, **({"change_column": change_column} if change_column else {}))
    _execute(url, "INSERT INTO t VALUES (1600, 'late'), (1601, 'late')")  # into the second window
    run.extract()
    results = run.publish()
    exported: dict[int, int] = {}
    for result in results:
        rows = sum(pq.read_metadata(tmp_path / "out" / r.path).num_rows for r in result.records)
        exported[result.chunk_index] = rows
    assert sum(exported.values()) == len(_source_ids(url)) == 1_502
    by_index = {int(r.chunk_index): run.fingerprints[key].rows
                for key, r in zip(sorted(run.fingerprints), sorted(results, key=lambda r: r.chunk_index), strict=True)}
    assert by_index == exported, (by_index, exported)
    latest = [run.fingerprints[key].latest for key in sorted(run.fingerprints)]
    assert latest == (["999", "1601"] if change_column else [None, None])
