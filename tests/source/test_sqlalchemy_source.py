"""`source: {type: sqlalchemy}`: any database SQLAlchemy reaches, through the real CLI.

Oracles, never the tool's counters: each database read by its own driver (duckdb, psycopg,
PyMySQL, sqlite3), the published parts re-read with pyarrow, and — for PostgreSQL,
MariaDB and SQLite — the same table exported by the native reader, compared row by row
and Arrow type by Arrow type with the generic path's parts.

Other dialects (SQL Server, Oracle, Snowflake …) run where `TEST_SQLALCHEMY_URLS` names
them (space-separated SQLAlchemy URLs of databases holding a table `rivet_probe`); a URL
that is given and unreachable fails the test naming it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from tests.helpers import (
    manifest_table,
    mysql_exec,
    pg_exec,
    rivet_quick,
    success_manifests,
    write_config,
)

PARQUET = {"format": "parquet"}


def export(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "table": name, "mode": "full", **PARQUET,
            "destination": {"type": "local", "path": f"out/{fields.pop('out', name)}"}, **fields}


def run(config: Path, *extra: str, env: dict[str, str] | None = None) -> Any:
    return rivet_quick("run", "-c", str(config), *extra, env=env)


def published(tmp: Path, out: str) -> pa.Table:
    return manifest_table(tmp / "out" / out)


def rows_by_id(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def arrow_types(table: pa.Table) -> dict[str, pa.DataType]:
    return {f.name: f.type for f in table.schema}


# ------------------------------------------------------------------------------ DuckDB

@pytest.fixture
def duck_file(tmp_path: Path) -> Path:
    path = tmp_path / "shop.duckdb"
    con = duckdb.connect(str(path))
    con.execute("""
        CREATE TABLE every_type (
            id INTEGER PRIMARY KEY, tiny TINYINT, small SMALLINT, big BIGINT, ubig UBIGINT,
            price DECIMAL(12,2), wide DECIMAL(38,10), f4 FLOAT, f8 DOUBLE, born DATE, at_time TIME,
            seen TIMESTAMP, seen_tz TIMESTAMPTZ, name VARCHAR, payload BLOB, ok BOOLEAN,
            doc JSON, uid UUID)""")
    con.execute("""
        INSERT INTO every_type VALUES
          (1, -128, -32768, 9007199254740993, 18446744073709551615, 12.34,
           1234567890123456789012345678.0123456789, 0.5, 0.1, DATE '2024-02-29',
           TIME '23:59:59.999999', TIMESTAMP '2024-03-10 01:30:00.123456',
           TIMESTAMPTZ '2024-03-10 01:30:00+05', 'O''Brien 😀 :name', '\\x00\\xff'::BLOB, true,
           '{"a": [1, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
          (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL)""")
    con.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, updated_at TIMESTAMP, "
                "created_at TIMESTAMP, note VARCHAR)")
    con.execute("INSERT INTO events SELECT i, TIMESTAMP '2024-01-01' + to_hours(i), "
                "TIMESTAMP '2023-01-01', 'n' || i FROM range(1, 41) r(i)")
    con.execute("CREATE TABLE odd (id INTEGER, huge HUGEINT, span INTERVAL)")
    con.execute("INSERT INTO odd VALUES (1, 170141183460469231731687303715884105727, INTERVAL 1 DAY)")
    con.close()
    return path


def duck_rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_a_duckdb_file_exports_every_type_exactly_as_duckdb_reads_it(tmp_path: Path, duck_file: Path) -> None:
    config = write_config(tmp_path, {"type": "sqlalchemy", "url": "duckdb:///shop.duckdb"},
                          [export("every_type")])
    proc = run(config)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = published(tmp_path, "every_type")
    assert arrow_types(table) == {
        "id": pa.int32(), "tiny": pa.int16(), "small": pa.int16(), "big": pa.int64(),
        "ubig": pa.uint64(), "price": pa.decimal128(12, 2), "wide": pa.decimal128(38, 10),
        "f4": pa.float32(), "f8": pa.float64(), "born": pa.date32(), "at_time": pa.time64("us"),
        "seen": pa.timestamp("us"), "seen_tz": pa.timestamp("us", tz="UTC"), "name": pa.string(),
        "payload": pa.binary(), "ok": pa.bool_(), "doc": pa.json_(pa.string()), "uid": pa.uuid(),
    }
    source = duck_rows(duck_file, "SELECT * FROM every_type ORDER BY id")
    got = rows_by_id(table)
    assert len(got) == len(source) == 2
    first = got[0]
    want = source[0]
    assert [first[k] for k in ("id", "tiny", "small", "big", "ubig", "price", "wide")] == list(want[:7])
    assert first["f4"] == want[7] and first["f8"] == want[8]
    assert (first["born"], first["at_time"], first["seen"]) == (want[9], want[10], want[11])
    assert first["seen_tz"] == want[12].astimezone(dt.UTC)
    assert (first["name"], first["payload"], first["ok"]) == (want[13], want[14], want[15])
    assert first["doc"] is not None and json.loads(first["doc"]) == {"a": [1, 2]}
    assert first["uid"] == want[17]
    assert all(v is None for k, v in got[1].items() if k != "id")
    assert success_manifests(tmp_path / "out" / "every_type")[0]["source"]["engine"] == "sqlalchemy:duckdb"


def test_incremental_and_coalesce_cursors_publish_each_duckdb_row_once(tmp_path: Path, duck_file: Path) -> None:
    config = write_config(tmp_path, {"type": "sqlalchemy", "url": "duckdb:///shop.duckdb"}, [
        {**export("events", out="inc", mode="incremental", cursor_column="updated_at"), "name": "inc"},
        {**export("events", out="coal", mode="incremental", cursor_column="updated_at",
                  incremental_cursor_mode="coalesce", cursor_fallback_column="created_at"),
         "name": "coal"},
    ])
    assert run(config).returncode == 0
    con = duckdb.connect(str(duck_file))
    con.execute("INSERT INTO events VALUES (41, TIMESTAMP '2025-01-01', TIMESTAMP '2023-01-01', 'late'),"
                " (42, NULL, TIMESTAMP '2026-01-01', 'fallback only')")
    con.close()
    proc = run(config)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(published(tmp_path, "inc").column("id").to_pylist()) == list(range(1, 42))
    coalesced = published(tmp_path, "coal")
    assert sorted(coalesced.column("id").to_pylist()) == list(range(1, 43))
    assert "_rivet_coalesced_cursor" not in coalesced.column_names
    assert len(success_manifests(tmp_path / "out" / "inc")) == 2


def test_time_window_reads_only_the_rows_after_the_cutoff(tmp_path: Path, duck_file: Path) -> None:
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    con = duckdb.connect(str(duck_file))
    con.execute("DELETE FROM events")
    con.execute("INSERT INTO events VALUES (1, ?, NULL, 'old'), (2, ?, NULL, 'new')",
                [now - dt.timedelta(days=10), now - dt.timedelta(hours=1)])
    con.close()
    config = write_config(tmp_path, {"type": "sqlalchemy", "url": "duckdb:///shop.duckdb"}, [
        export("events", mode="time_window", time_column="updated_at", days_window=2)])
    proc = run(config)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert published(tmp_path, "events").column("note").to_pylist() == ["new"]


def test_a_type_without_a_mapping_fails_before_publishing_naming_the_column_and_the_override(
        tmp_path: Path, duck_file: Path) -> None:
    config = write_config(tmp_path, {"type": "sqlalchemy", "url": "duckdb:///shop.duckdb"},
                          [export("odd")])
    proc = run(config)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "huge" in text and "span" in text and "columns:" in text, text
    assert not (tmp_path / "out" / "odd" / "manifest.json").exists()
    fixed = write_config(tmp_path, {"type": "sqlalchemy", "url": "duckdb:///shop.duckdb"},
                         [export("odd", columns={"huge": "decimal(39,0)", "span": "string"})])
    proc = run(fixed)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = published(tmp_path, "odd").to_pylist()
    assert got[0]["huge"] == decimal.Decimal("170141183460469231731687303715884105727")


def test_a_dialect_without_server_side_cursors_says_what_bounds_its_memory(
        tmp_path: Path, duck_file: Path) -> None:
    config = write_config(tmp_path, {"type": "sqlalchemy", "url": "duckdb:///shop.duckdb"},
                          [export("events")])
    proc = run(config)
    assert proc.returncode == 0
    assert ("the SQLAlchemy dialect 'duckdb' has no server-side cursors" in proc.stderr
            and "bounded by the result size" in proc.stderr and "mode: chunked" in proc.stderr)


def test_a_url_whose_dialect_is_not_installed_names_the_package_and_hides_the_password(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, {"type": "sqlalchemy", "url_env": "SQLA_URL"}, [export("t")])
    proc = run(config, env={"SQLA_URL": "snowflake://me:Sup3rSecretPw@acct/db"})
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "snowflake-sqlalchemy" in text, text
    assert "Sup3rSecretPw" not in text


def test_a_sqlalchemy_source_needs_a_url(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"type": "sqlalchemy", "host": "db", "user": "u",
                                     "database": "shop"}, [export("t")])
    proc = run(config)
    assert proc.returncode != 0
    assert "type sqlalchemy takes one SQLAlchemy URL" in proc.stdout + proc.stderr


def test_a_tls_block_on_a_sqlalchemy_source_is_refused_naming_where_tls_goes(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"type": "sqlalchemy", "url": "duckdb:///shop.duckdb",
                                     "tls": {"mode": "require"}}, [export("t")])
    proc = run(config)
    assert proc.returncode != 0
    assert "takes its TLS settings in the URL's query" in proc.stdout + proc.stderr


# ---------------------------------------------------- the native readers as the oracle

def same_as_native(tmp: Path, native: dict[str, Any], generic: dict[str, Any],
                   name: str, **fields: Any) -> pa.Table:
    """Export `name` through both paths; assert equal Arrow types and rows; return one."""
    (tmp / "native").mkdir()
    (tmp / "generic").mkdir()
    tables = []
    for where, source in (("native", native), ("generic", generic)):
        config = write_config(tmp / where, source, [export(name, **fields)])
        proc = run(config)
        assert proc.returncode == 0, (where, proc.stdout + proc.stderr)
        tables.append(published(tmp / where, name))
    by_native, by_generic = tables
    assert arrow_types(by_generic) == arrow_types(by_native)
    assert rows_by_id(by_generic) == rows_by_id(by_native)
    return by_generic


@pytest.mark.postgres
def test_postgres_through_sqlalchemy_matches_the_native_reader_row_by_row_and_type_by_type(
        tmp_path: Path, pg_url: str) -> None:
    pg_exec(pg_url, """
        CREATE TABLE every_type (id int PRIMARY KEY, a smallint, b int, c bigint,
          n numeric(12,2), wide numeric(40,5), f real, d double precision, born date,
          at_time time, seen timestamp, seen_tz timestamptz, s text, v varchar(10), ch char(3),
          bl bytea, ok boolean, j json, jb jsonb, u uuid)""", """
        INSERT INTO every_type VALUES (1, -3, 7, 9007199254740993, 12.34,
          123456789012345678901234567890.12345, 0.1, 0.1, '2024-02-29', '23:59:59.999999',
          '2024-03-10 01:30:00.123456', '2024-03-10 01:30:00+05', 'O''Brien 😀 :x', 'x', 'ab',
          '\\x00ff', true, '{"b": 1.10, "a": [1,2]}', '{"b": 1.10, "a": 12345678901234567890}',
          'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
          (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL)""")
    generic_url = "postgresql+psycopg://" + pg_url.split("://", 1)[1]
    table = same_as_native(tmp_path, {"type": "postgres", "url": pg_url},
                           {"type": "sqlalchemy", "url": generic_url}, "every_type")
    source = pg_exec(pg_url, "SELECT id, n, wide, seen_tz, u FROM every_type ORDER BY id")
    first = rows_by_id(table)[0]
    assert (first["n"], first["wide"], first["seen_tz"]) == source[0][1:4]
    assert first["u"] == source[0][4]
    assert arrow_types(table)["wide"] == pa.decimal256(40, 5)


@pytest.mark.postgres
def test_chunked_mode_through_sqlalchemy_publishes_every_postgres_row_once(
        tmp_path: Path, pg_url: str) -> None:
    pg_exec(pg_url, "CREATE TABLE items (id int PRIMARY KEY, note text)",
            "INSERT INTO items SELECT i, 'n' || i FROM generate_series(1, 300) i")
    generic_url = "postgresql+psycopg://" + pg_url.split("://", 1)[1]
    config = write_config(tmp_path, {"type": "sqlalchemy", "url": generic_url}, [
        {**export("items", out="range", mode="chunked", chunk_column="id", chunk_size=50),
         "name": "by_range"},
        {**export("items", out="keyset", mode="chunked", chunk_by_key="id", chunk_size=50),
         "name": "by_key"}])
    proc = run(config)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    source = [r[0] for r in pg_exec(pg_url, "SELECT id FROM items ORDER BY id")]
    for out in ("range", "keyset"):
        ids = published(tmp_path, out).column("id").to_pylist()
        assert sorted(ids) == source, out
        assert len(success_manifests(tmp_path / "out" / out)[0]["parts"]) > 1, out


@pytest.mark.mysql
def test_mariadb_through_sqlalchemy_matches_the_native_reader_row_by_row_and_type_by_type(
        tmp_path: Path, mysql_url: str) -> None:
    mysql_exec(mysql_url, """
        CREATE TABLE every_type (id int PRIMARY KEY, flag tinyint(1), ti tinyint,
          tu tinyint unsigned, sm smallint, smu smallint unsigned, me mediumint, i int,
          iu int unsigned, bi bigint, biu bigint unsigned, n decimal(12,2), f float, d double,
          born date, at_time time(6), seen datetime(6), seen_ts timestamp(6) NULL, y year,
          s varchar(20), tx text, bl blob, vb varbinary(5), b1 bit(1), b8 bit(8), j json,
          e enum('a','b'), st set('x','y'))""", """
        INSERT INTO every_type VALUES (1, 1, -5, 250, -3, 65000, 8000000, -7, 4000000000,
          9007199254740993, 18446744073709551615, 12.34, 0.1, 0.1, '2024-02-29',
          '23:59:59.999999', '2024-03-10 01:30:00.123456', '2024-03-10 01:30:00.5', 2024,
          'O''Brien 😀', 'long', x'00ff', x'01', b'1', b'10101010', '{"b": 1.10, "a": [1,2]}',
          'b', 'x,y'),
          (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)""")
    parts = urllib.parse.urlsplit(mysql_url)
    generic_url = urllib.parse.urlunsplit(parts._replace(scheme="mysql+pymysql"))
    table = same_as_native(tmp_path, {"type": "mysql", "url": mysql_url},
                           {"type": "sqlalchemy", "url": generic_url}, "every_type")
    source = mysql_exec(mysql_url, "SELECT id, biu, n, seen FROM every_type ORDER BY id")
    first = rows_by_id(table)[0]
    assert (first["id"], first["biu"], first["n"], first["seen"]) == source[0]
    assert arrow_types(table)["j"] == pa.json_(pa.string())


def test_sqlite_through_sqlalchemy_matches_the_native_reader(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE every_type (id INTEGER PRIMARY KEY, qty INT, price DECIMAL(12,2),
          ratio REAL, name TEXT, code VARCHAR(10), payload BLOB, active BOOLEAN, born DATE,
          seen_at DATETIME, doc JSON);
        INSERT INTO every_type VALUES (1, 7, 12.34, 0.5, 'emoji 😀', 'A', x'00ff', 1,
          '2024-02-29', '2024-03-10 01:30:00.123456', '{"a": [1, 2]}'),
          (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);""")
    con.commit()
    con.close()
    table = same_as_native(tmp_path, {"type": "sqlite", "url": f"sqlite:///{db}"},
                           {"type": "sqlalchemy", "url": f"sqlite:///{db}"}, "every_type")
    assert rows_by_id(table)[0]["seen_at"] == dt.datetime(2024, 3, 10, 1, 30, 0, 123456)


# ---------------------------------------------- other dialects, where a URL is given

def test_every_dialect_named_in_test_sqlalchemy_urls_exports_its_probe_table(
        tmp_path: Path, duck_file: Path) -> None:
    """The DuckDB file always, plus each URL of TEST_SQLALCHEMY_URLS (a database holding a
    table `rivet_probe` with an integer column `id`): every row once, or a failure naming
    the URL's dialect when it is unreachable."""
    duck = duckdb.connect(str(duck_file))
    duck.execute("CREATE TABLE rivet_probe AS SELECT i AS id FROM range(1, 6) r(i)")
    duck.close()
    urls = [f"duckdb:///{duck_file}", *os.environ.get("TEST_SQLALCHEMY_URLS", "").split()]
    for index, url in enumerate(urls):
        where = tmp_path / f"d{index}"
        where.mkdir()
        config = write_config(where, {"type": "sqlalchemy", "url_env": "RIVET_PROBE_URL"},
                              [export("rivet_probe")])
        proc = run(config, env={"RIVET_PROBE_URL": url})
        dialect = url.split("://", 1)[0]
        assert proc.returncode == 0, (
            f"TEST_SQLALCHEMY_URLS: the {dialect} database is unreachable or has no table "
            f"rivet_probe(id): {proc.stdout + proc.stderr}")
        ids = published(where, "rivet_probe").column("id").to_pylist()
        assert len(ids) == len(set(ids)) > 0, dialect



# ---------------------------------------------- the catalog: init, check, doctor

CATALOG_DDL = ("CREATE TABLE cat_t (id INTEGER NOT NULL PRIMARY KEY, code VARCHAR(20) NOT NULL UNIQUE, "
               "note VARCHAR(20), pair_a INTEGER, pair_b INTEGER, UNIQUE (pair_a, pair_b))")


@pytest.fixture(params=[pytest.param("pg", marks=pytest.mark.postgres),
                        pytest.param("mysql", marks=pytest.mark.mysql)])
def server(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(native URL, SQLAlchemy URL) of a server database holding `cat_t`."""
    url = request.getfixturevalue("pg_url" if request.param == "pg" else "mysql_url")
    rows = ", ".join(f"({i}, 'c{i}', NULL, {i}, {i})" for i in range(1, 201))
    if request.param == "pg":
        pg_exec(url, CATALOG_DDL, f"INSERT INTO cat_t VALUES {rows}", "ANALYZE cat_t")
        return url, "sqlalchemy:postgresql+psycopg://" + url.split("://", 1)[1]
    mysql_exec(url, CATALOG_DDL, f"INSERT INTO cat_t VALUES {rows}", "ANALYZE TABLE cat_t")
    return url, "sqlalchemy:mysql+pymysql://" + url.split("://", 1)[1]


def catalog_answers(url: str) -> dict[str, Any]:
    from rivet_core.catalog import list_indexes, list_tables, row_estimate, table_exists, table_info
    from rivet_core.config.tuning import ResolvedTuning
    from rivet_core.source import open_source

    with open_source(url, ResolvedTuning()) as session:
        info = table_info(session, (None, "cat_t"))
        missing = table_info(session, (None, "cat_nope"))
        return {
            "columns": info.columns, "not_null": info.not_null, "primary_key": info.primary_key,
            "unique": info.unique, "row_estimate": info.row_estimate,
            "estimate": row_estimate(session, None, "cat_t"),
            "exists": (table_exists(session, None, "cat_t"), table_exists(session, None, "cat_nope")),
            "tables": "cat_t" in list_tables(session, None),
            "indexes": sorted((ix.columns, ix.unique) for ix in list_indexes(session, None, "cat_t")),
            "missing": missing.columns, "case_insensitive": info.case_insensitive,
        }


def test_the_catalog_through_sqlalchemy_answers_as_the_native_catalog(server: tuple[str, str]) -> None:
    native, generic = server
    by_native, by_generic = catalog_answers(native), catalog_answers(generic)
    assert by_generic == by_native
    assert by_generic["primary_key"] == ("id",) and by_generic["unique"] == ["id", "code"]
    assert by_generic["row_estimate"] == 200


def test_init_check_and_doctor_work_on_a_duckdb_file(tmp_path: Path, duck_file: Path) -> None:
    env = {"SHOP_URL": f"duckdb:///{duck_file}"}
    out = tmp_path / "rivet.yaml"
    proc = rivet_quick("init", "--source-env", "SHOP_URL", "-o", str(out), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = out.read_text()
    assert "type: sqlalchemy" in text and "name: events" in text
    check = rivet_quick("check", "-c", str(out), "--type-report", env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "DECIMAL(12,2)" in check.stdout and "decimal128(12, 2)" in check.stdout
    doctor = rivet_quick("doctor", "-c", str(out), env=env)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"opened {duck_file}" in doctor.stdout


def test_the_duckdb_catalog_names_the_primary_key(tmp_path: Path, duck_file: Path) -> None:
    from rivet_core.catalog import table_info
    from rivet_core.config.tuning import ResolvedTuning
    from rivet_core.source import open_source

    with open_source(f"sqlalchemy:duckdb:///{duck_file}", ResolvedTuning()) as session:
        info = table_info(session, (None, "events"))
    assert info.primary_key == ("id",) and info.columns[:2] == ["id", "updated_at"]


def test_the_native_catalogs_ask_sqlalchemys_inspector_on_the_sessions_own_snapshot(
        server: tuple[str, str]) -> None:
    """PostgreSQL's and MariaDB's native sessions answer columns, NOT NULL and the primary
    key through SQLAlchemy's inspector on their own connection, and the inspector leaves
    the snapshot transaction alone: a row committed meanwhile stays invisible."""
    from rivet_core.catalog import table_info
    from rivet_core.config.tuning import ResolvedTuning
    from rivet_core.source import open_source
    from rivet_core.source.sqlalchemy.catalog import inspector_of

    native, _ = server
    run_sql = pg_exec if native.startswith("postgres") else mysql_exec
    with open_source(native, ResolvedTuning()) as session:
        assert session.scalar("SELECT COUNT(*) FROM cat_t") == 200  # the snapshot starts
        run_sql(native, "INSERT INTO cat_t VALUES (201, 'c201', NULL, 201, 201)")
        info = table_info(session, (None, "cat_t"))
        inspector = inspector_of(session)
        assert inspector.bind.connection.driver_connection is session.connection
        assert info.primary_key == tuple(inspector.get_pk_constraint("cat_t")["constrained_columns"])
        assert (info.columns, info.not_null) == (["id", "code", "note", "pair_a", "pair_b"], {"id", "code"})
        assert session.scalar("SELECT COUNT(*) FROM cat_t") == 200
