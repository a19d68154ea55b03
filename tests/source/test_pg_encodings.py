"""PostgreSQL databases in other encodings: every session reads as UTF-8 (`client_encoding`
is set at connect), the server converts, and what cannot be converted is a clear error.

Found while testing the binary path: a SQL_ASCII database's default client encoding made
psycopg hand the catalog's type names over as bytes, and `describe()` crashed with
`AttributeError: 'bytes' object has no attribute 'encode'`."""

from __future__ import annotations

import contextlib
import logging
import urllib.parse
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from rivet_core.errors import SourceError
from tests.source.test_pg_read_paths import assert_identical, paths_used, read

pytestmark = pytest.mark.postgres


@contextlib.contextmanager
def database_in(admin: str, encoding: str) -> Iterator[str]:
    """URL of a fresh database in server encoding `encoding`; dropped afterwards."""
    db = f"rivet_e_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE \"{db}\" ENCODING '{encoding}' LC_COLLATE 'C' "
                     "LC_CTYPE 'C' TEMPLATE template0")
    try:
        yield urllib.parse.urlunsplit(urllib.parse.urlsplit(admin)._replace(path="/" + db))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


@pytest.fixture(params=["SQL_ASCII", "LATIN1"])
def encoded_db(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database in the parametrized server encoding with a text table `t`."""
    admin = request.getfixturevalue("pg_url")  # fails clearly when no server is reachable
    with database_in(admin, request.param) as url:
        with psycopg.connect(url, autocommit=True, client_encoding="UTF8") as conn:
            conn.execute("CREATE TABLE t (id int, s text, n numeric(6,2))")
            conn.execute("INSERT INTO t VALUES (1, 'plain', 1.50), (2, 'café', NULL), (3, NULL, 2)")
        yield url


@pytest.mark.parametrize("path", ["rows", "binary"])
def test_every_read_path_reads_a_non_utf8_database_as_utf8(
    encoded_db: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    caplog.set_level(logging.INFO, logger="rivet.source")
    table, _ = read(encoded_db, "SELECT id, s, n FROM t ORDER BY id", path, monkeypatch)
    assert paths_used(caplog)[-1].startswith(f"PG read path: {path}")  # no silent fallback
    assert table.column("s").to_pylist() == ["plain", "café", None]
    rows, _ = read(encoded_db, "SELECT id, s, n FROM t ORDER BY id", "rows", monkeypatch)
    assert_identical(table, rows)


@pytest.mark.parametrize("path", ["rows", "binary"])
def test_bytes_that_are_not_utf8_in_a_sql_ascii_database_fail_clearly(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    with database_in(pg_url, "SQL_ASCII") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (id int, s text)")
            conn.execute("INSERT INTO t VALUES (1, convert_from('\\xff'::bytea, 'SQL_ASCII'))")
        with pytest.raises(SourceError, match="(?i)invalid byte sequence for encoding"):
            read(url, "SELECT id, s FROM t", path, monkeypatch)
