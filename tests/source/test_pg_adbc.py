"""PostgreSQL ADBC read path (binary COPY on a second connection in the session's snapshot).

The row path is the oracle, as for the binary path (tests/source/test_pg_read_paths.py): the same
query is read through both and must be identical, schema metadata included. Around it: the
snapshot is really shared, errors keep their meaning (permanent vs transient, the row
path's messages), abandoned streams release the second connection, and a second connection
that cannot be opened falls back to the row path instead of failing the export. Parameter
binding and error parity are shared with the binary path (parametrized in
test_pg_read_paths.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import urllib.parse
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pyarrow as pa
import pytest

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import SourceError, TransientError
from rivet_core.source import open_source
from tests.source.test_pg_read_paths import (  # noqa: F401 - eligible_db is a fixture
    BIG,
    TUNING,
    assert_identical,
    eligible_db,
    paths_used,
    pg_exec,
    read,
)

pytestmark = pytest.mark.postgres

ADBC_COLUMNS = ("id, s2, i8, flag, f4, f8, n38, n38i, n12, txt, vc, ch, nm, d, t, ts, tstz, "
                "u, j, jb, dom")


@contextlib.contextmanager
def wide_session(url: str, rows: int, monkeypatch: pytest.MonkeyPatch
                 ) -> Iterator[tuple[Any, pa.Schema]]:
    """A `wide` table (~256 bytes a row: a stream outlives the socket buffers) and an open
    session on the ADBC path with the schema of `SELECT * FROM wide`."""
    pg_exec(url, "CREATE TABLE wide AS SELECT g AS id, repeat(md5(g::text), 8) AS t "
                 f"FROM generate_series(1, {rows}) g")
    monkeypatch.setenv("RIVET_PG_READ_PATH", "adbc")
    with open_source(url, TUNING) as session:
        yield session, session.describe("SELECT * FROM wide")


def rivet_backends(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                            "current_database() AND application_name = 'rivet'").fetchone()[0]


def test_adbc_path_is_identical_to_the_row_path_for_every_eligible_type(
    eligible_db: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sql = f"SELECT {ADBC_COLUMNS} FROM eligible ORDER BY id"
    caplog.set_level(logging.INFO, logger="rivet.source")
    rows, _ = read(eligible_db, sql, "rows", monkeypatch, batch_rows=2)
    adbc, sizes = read(eligible_db, sql, "adbc", monkeypatch, batch_rows=2)
    used = paths_used(caplog)
    assert used[1].startswith("PG read path: adbc"), used
    assert sizes == [2, 2, 1]
    assert_identical(adbc, rows)
    by_id = {r["id"]: r for r in adbc.to_pylist()}
    assert by_id[5]["txt"] == BIG and by_id[2]["txt"] == "" and by_id[4]["txt"] is None
    assert str(by_id[1]["n38"]) == "1234567890123456789012345678.9012345678"
    assert by_id[3]["ch"] == 'a"b' and by_id[5]["ch"] == " , "  # bpchar keeps its padding


def test_columns_without_an_exact_binary_form_take_the_row_path(
    eligible_db: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rivet.source")
    for column in ("o", "c1", "iv"):  # oid, "char", interval (the binary path casts them on the server)
        read(eligible_db, f"SELECT id, {column} FROM eligible", "adbc", monkeypatch)
    read(eligible_db, "SELECT id, m FROM eligible", "adbc", monkeypatch)  # enum: ADBC refuses
    used = paths_used(caplog)
    assert [u.split(" (")[0] for u in used] == ["PG read path: rows"] * 4, used
    assert "column 'm' is an enum" in used[-1]


def test_bytea_reads_exactly_on_the_adbc_path(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg_exec(pg_url, "CREATE TABLE blobs (id int, b bytea)",
            "INSERT INTO blobs VALUES (1, '\\x00ff'), (2, NULL), (3, ''), "
            "(4, decode(repeat('00ff7f', 100000), 'hex'))")
    sql = "SELECT id, b FROM blobs ORDER BY id"
    rows, _ = read(pg_url, sql, "rows", monkeypatch)
    adbc, _ = read(pg_url, sql, "adbc", monkeypatch)
    assert_identical(adbc, rows)
    assert adbc.column("b").to_pylist()[:3] == [b"\x00\xff", None, b""]


@pytest.mark.parametrize("path", ["adbc", "binary"])  # a second connection / the session's
def test_the_binary_read_paths_read_the_sessions_snapshot(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    pg_exec(pg_url, "CREATE TABLE snap AS SELECT g AS id, 'v1'::text AS v "
                    "FROM generate_series(1, 1000) g")
    caplog.set_level(logging.INFO, logger="rivet.source")
    monkeypatch.setenv("RIVET_PG_READ_PATH", path)
    with open_source(pg_url, TUNING) as session:
        assert session.scalar("SELECT max(id) FROM snap") == 1000  # the snapshot is taken
        # committed by another client after the snapshot: invisible to the whole session
        pg_exec(pg_url, "INSERT INTO snap VALUES (1001, 'late')", "UPDATE snap SET v = 'v2'",
                "DELETE FROM snap WHERE id = 1")
        schema = session.describe("SELECT id, v FROM snap")
        table = pa.Table.from_batches(
            list(session.stream("SELECT id, v FROM snap", [], schema, 300)), schema=schema)
    assert paths_used(caplog)[0].startswith(f"PG read path: {path}")
    assert sorted(table.column("id").to_pylist()) == list(range(1, 1001))
    assert set(table.column("v").to_pylist()) == {"v1"}


@pytest.mark.parametrize("path", ["adbc", "binary"])
def test_many_batches_arrive_in_order_and_bounded(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    pg_exec(pg_url, "CREATE TABLE big AS SELECT g AS id, md5(g::text) AS h, "
                    "gen_random_uuid() AS u, now() AS at FROM generate_series(1, 200000) g")
    caplog.set_level(logging.INFO, logger="rivet.source")
    monkeypatch.setenv("RIVET_PG_READ_PATH", path)
    sql = "SELECT id, h, u, at FROM big ORDER BY id"
    with open_source(pg_url, TUNING) as session:
        schema = session.describe(sql)
        expected, batches = 1, 0
        for batch in session.stream(sql, [], schema, 7_000):
            assert batch.schema.equals(schema, check_metadata=True)
            assert 0 < batch.num_rows <= 7_000
            ids = range(expected, expected + batch.num_rows)
            assert batch.column("id").to_pylist() == list(ids)
            assert batch.column("h").to_pylist() == [
                hashlib.md5(str(i).encode()).hexdigest() for i in ids]
            assert batch.column("u").null_count == batch.column("at").null_count == 0
            expected += batch.num_rows
            batches += 1
    assert paths_used(caplog)[0].startswith(f"PG read path: {path}")
    assert expected == 200_001 and batches >= 29


@pytest.mark.parametrize("value", [
    "timestamptz 'infinity'", "timestamptz '-infinity'", "timestamp 'infinity'",
    "date 'infinity'", "date '-infinity'", "time '24:00:00'", "timestamp '0044-03-15 BC'",
    "timestamp '-infinity'",
])
def test_values_arrow_cannot_hold_fail_instead_of_wrapping(
    pg_url: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADBC turns `infinity` into a wrapped, plausible-looking date; every path must refuse
    (the fast paths name the column and suggest a cast; the row path's message is the
    driver's)."""
    sql = f"SELECT 1 AS id, {value} AS v"
    for path in ("rows", "adbc", "binary"):
        with pytest.raises(SourceError) as caught:
            read(pg_url, sql, path, monkeypatch)
        assert not isinstance(caught.value, TransientError), (path, caught.value)
    assert "column 'v'" in str(caught.value) and "cast the column in SQL" in str(caught.value)


@pytest.mark.parametrize("path", ["adbc", "binary"])
def test_statement_timeout_applies_to_the_binary_reads(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    caplog.set_level(logging.INFO, logger="rivet.source")
    sql = ("SELECT g AS id FROM generate_series(1, 4) g, "
           "LATERAL (SELECT pg_sleep(0.5) WHERE g > 0) s")
    with pytest.raises(SourceError, match="statement timeout") as caught:
        read(pg_url, sql, path, monkeypatch, tuning=ResolvedTuning(statement_timeout_s=1))
    assert not isinstance(caught.value, TransientError)  # the same query would time out again
    assert paths_used(caplog)[-1].startswith(f"PG read path: {path}")


def test_abandoning_an_adbc_stream_releases_the_second_connection(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with wide_session(pg_url, 300000, monkeypatch) as (session, schema):
        for _ in range(3):
            stream = session.stream("SELECT * FROM wide", [], schema, 100)
            assert next(stream).num_rows == 100
            assert rivet_backends(pg_url) == 2  # the session and its ADBC reader
            stream.close()
            assert rivet_backends(pg_url) == 1
            assert session.scalar("SELECT count(*) FROM wide") == 300000


def test_a_second_connection_refused_falls_back_to_the_row_path(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    role = f"solo_{uuid.uuid4().hex[:10]}"
    pg_exec(pg_url, "CREATE TABLE t (id int, s text)",
            "INSERT INTO t SELECT g, g::text FROM generate_series(1, 5000) g",
            f"CREATE ROLE {role} LOGIN PASSWORD 'solo-pw-7' CONNECTION LIMIT 1",
            f"GRANT SELECT ON t TO {role}")
    parts = urllib.parse.urlsplit(pg_url)
    solo_url = parts._replace(netloc=f"{role}:solo-pw-7@{parts.hostname}:{parts.port}").geturl()
    caplog.set_level(logging.INFO, logger="rivet.source")
    try:
        rows, _ = read(solo_url, "SELECT id, s FROM t ORDER BY id", "rows", monkeypatch)
        adbc, _ = read(solo_url, "SELECT id, s FROM t ORDER BY id", "adbc", monkeypatch)
    finally:
        pg_exec(pg_url, f"DROP OWNED BY {role}", f"DROP ROLE {role}")
    assert_identical(adbc, rows)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("ADBC read path unavailable" in w and "too many connections" in w
               for w in warnings), warnings
    assert not any("solo-pw-7" in r.getMessage() for r in caplog.records)
    assert paths_used(caplog)[-1].startswith("PG read path: rows (ADBC unavailable")


def test_a_terminated_adbc_backend_is_a_transient_error(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with wide_session(pg_url, 400000, monkeypatch) as (session, schema):
        own = session.scalar("SELECT pg_backend_pid()")
        stream = session.stream("SELECT * FROM wide", [], schema, 1000)
        assert next(stream).num_rows == 1000
        with psycopg.connect(pg_url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                "current_database() AND application_name = 'rivet' AND pid <> %s", [own]
            ).fetchall()
        assert killed == [(True,)]
        with pytest.raises(TransientError, match="terminating connection|closed the connection"):
            for _ in stream:
                pass
        assert session.scalar("SELECT 1") == 1  # the session's own connection is untouched
