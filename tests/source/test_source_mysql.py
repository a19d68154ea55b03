"""MariaDB/MySQL source: exact type mapping, unsupported types, overrides, UTC, incremental.

Values are compared with an independent oracle: the same query read through a plain
PyMySQL buffered cursor (default converters), value by value.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import urllib.parse
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pymysql
import pytest

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import SourceError, UnsupportedTypeError
from rivet_core.source import (
    LOGICAL_TYPE_KEY,
    NATIVE_TYPE_KEY,
    build_incremental_query,
    last_cursor_in_batch,
    open_source,
    render_cursor_value,
)

pytestmark = pytest.mark.mysql

TUNING = ResolvedTuning(statement_timeout_s=30, lock_timeout_s=5)
UTC = dt.UTC
D38 = decimal.Decimal("1234567890123456789012345678.9012345678")
BIG_TEXT = "漢" * (350 * 1024)  # ~1 MiB of UTF-8
UUID1 = uuid.UUID("6f1c2a4e-8b3d-4c5e-9f00-112233445566")


def connect(url: str, **extra: Any) -> pymysql.connections.Connection[Any]:
    u = urllib.parse.urlsplit(url)
    return pymysql.connect(
        host=u.hostname, port=u.port or 3306, user=urllib.parse.unquote(u.username or ""),
        password=urllib.parse.unquote(u.password or ""), database=u.path.lstrip("/"),
        charset="utf8mb4", autocommit=True, **extra,
    )


def my_exec(url: str, *statements: str, params: list[Any] | None = None) -> None:
    """Run statements on a fresh autocommit connection; `params` bind the last statement."""
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            for index, statement in enumerate(statements):  # params bind the last one
                cur.execute(statement, params if index == len(statements) - 1 else None)
    finally:
        conn.close()


def oracle_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    conn = connect(url, init_command="SET time_zone = '+00:00'")
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def read_all(url: str, sql: str, params: list[Any] | None = None, *,
             overrides: dict[str, pa.DataType] | None = None, batch_rows: int = 1000) -> pa.Table:
    with open_source(url, TUNING) as session:
        schema = session.describe(sql, params or [], overrides)
        batches = list(session.stream(sql, params or [], schema, batch_rows))
    return pa.Table.from_batches(batches, schema=schema)


@pytest.fixture
def every_type_db(mysql_url: str) -> Iterator[str]:
    my_exec(
        mysql_url,
        """CREATE TABLE every_type (
            id int PRIMARY KEY, d38 decimal(38,10), d12 decimal(12,2),
            du decimal(10,3) unsigned, flag tinyint(1), ti tinyint, tiu tinyint unsigned,
            si smallint, siu smallint unsigned, mi mediumint unsigned, i int, iu int unsigned,
            bi bigint, biu bigint unsigned, f float, db double, ts timestamp(6) NULL,
            dtm datetime(6), d date, t time(6), y year, b1 bit(1), b5 bit(5),
            e enum('sad', 'happy', 'O''Brien'), st set('a', 'b', 'c'), j json,
            vb varbinary(16), bl blob, txt longtext, vc varchar(50), ch char(36)
        ) CHARACTER SET utf8mb4""",
    )
    my_exec(
        mysql_url,
        "SET time_zone = '-05:00'",
        """INSERT INTO every_type VALUES
        (1, %s, -1234567890.12, 1234567.125, 1, -128, 255, -32768, 65535, 16777215,
         -2147483648, 4294967295, -9223372036854775808, 18446744073709551615, 1.5,
         -2.2250738585072014e-308, '2024-03-10 01:30:00.123456', '2024-03-10 01:30:00.654321',
         '2024-02-29', '23:59:59.999999', 2024, b'1', b'10101', 'O''Brien', 'a,c',
         '{"b": 1, "a": [1, 2]}', %s, x'00ff10', 'emoji 😀 CJK 漢字 ünïcödé', 'x',
         '6f1c2a4e-8b3d-4c5e-9f00-112233445566')""",
        params=[D38, UUID1.bytes],
    )
    my_exec(mysql_url, "INSERT INTO every_type (id, txt, flag, b1, db, t) VALUES (2, %s, 0, b'0', 0, '00:00:00')",
            params=[BIG_TEXT])
    my_exec(mysql_url, "INSERT INTO every_type (id) VALUES (3)")
    yield mysql_url


def _as_oracle(column: str, arrow_value: Any, oracle_value: Any) -> bool:
    if oracle_value is None or arrow_value is None:
        return arrow_value is None and oracle_value is None
    if column == "flag" or column == "b1":
        expected = oracle_value if column == "flag" else int.from_bytes(oracle_value, "big")
        return arrow_value is (expected != 0)
    if column == "b5":
        return arrow_value == int.from_bytes(oracle_value, "big")
    if column == "t":  # PyMySQL returns TIME as a timedelta since midnight
        return arrow_value == (dt.datetime.min + oracle_value).time()
    if column == "ts":  # naive UTC from a '+00:00' session; Arrow carries the zone
        return arrow_value == oracle_value.replace(tzinfo=UTC)
    if column == "j":
        return json.loads(arrow_value) == json.loads(oracle_value)
    if column == "f":  # FLOAT is float32: compare at float32 precision
        return arrow_value == pa.scalar(oracle_value, pa.float32()).as_py()
    if isinstance(oracle_value, float) and math.isnan(oracle_value):
        return math.isnan(arrow_value)
    return arrow_value == oracle_value and type(arrow_value) is type(oracle_value)


def test_every_mapped_mysql_type_round_trips_exactly_against_the_driver(every_type_db: str) -> None:
    sql = "SELECT * FROM every_type ORDER BY id"
    table = read_all(every_type_db, sql)
    expected_types = {
        "id": pa.int32(), "d38": pa.decimal128(38, 10), "d12": pa.decimal128(12, 2),
        "du": pa.decimal128(10, 3), "flag": pa.bool_(), "ti": pa.int16(), "tiu": pa.int16(),
        "si": pa.int16(), "siu": pa.int32(), "mi": pa.int64(), "i": pa.int32(),
        "iu": pa.int64(), "bi": pa.int64(), "biu": pa.uint64(), "f": pa.float32(),
        "db": pa.float64(), "ts": pa.timestamp("us", "UTC"), "dtm": pa.timestamp("us"),
        "d": pa.date32(), "t": pa.time64("us"), "y": pa.int16(), "b1": pa.bool_(),
        "b5": pa.int64(), "e": pa.string(), "st": pa.string(), "j": pa.json_(pa.string()),
        "vb": pa.binary(), "bl": pa.binary(), "txt": pa.string(), "vc": pa.string(),
        "ch": pa.string(),
    }
    assert {f.name: f.type for f in table.schema} == expected_types

    oracle = oracle_rows(every_type_db, sql)
    rows = table.to_pylist()
    assert len(rows) == len(oracle) == 3
    for arrow_row, oracle_row in zip(rows, oracle, strict=True):
        for index, column in enumerate(table.schema.names):
            assert _as_oracle(column, arrow_row[column], oracle_row[index]), (
                column, arrow_row[column], oracle_row[index])

    first, second, nulls = rows
    assert first["d38"] == D38
    # Inserted at 01:30 in a -05:00 session: the stored instant is 06:30 UTC.
    assert first["ts"] == dt.datetime(2024, 3, 10, 6, 30, 0, 123456, tzinfo=UTC)
    assert first["dtm"] == dt.datetime(2024, 3, 10, 1, 30, 0, 654321)  # naive, untouched
    assert first["biu"] == 18446744073709551615 and first["b5"] == 0b10101
    assert first["st"] == "a,c" and first["e"] == "O'Brien"
    assert first["txt"] == "emoji 😀 CJK 漢字 ünïcödé" and second["txt"] == BIG_TEXT
    assert first["vb"] == UUID1.bytes and first["y"] == 2024
    assert second["flag"] is False and second["t"] == dt.time(0, 0)
    assert all(value is None for key, value in nulls.items() if key != "id")


def test_mariadb_json_enum_and_decimal_metadata(every_type_db: str) -> None:
    with open_source(every_type_db, TUNING) as session:
        schema = session.describe("SELECT d12, du, j, e, st, flag, biu FROM every_type")
    meta = {f.name: f.metadata for f in schema}
    assert meta["d12"][NATIVE_TYPE_KEY] == b"decimal(12,2)"
    assert meta["du"][NATIVE_TYPE_KEY] == b"decimal(10,3) unsigned"
    assert meta["j"][LOGICAL_TYPE_KEY] == b"json"
    assert meta["e"][LOGICAL_TYPE_KEY] == b"enum" and meta["st"][LOGICAL_TYPE_KEY] == b"enum"
    assert meta["flag"][NATIVE_TYPE_KEY] == b"tinyint(1)"
    assert meta["biu"][NATIVE_TYPE_KEY] == b"bigint unsigned"


def test_decimal_expressions_keep_their_derived_precision(every_type_db: str) -> None:
    table = read_all(every_type_db, "SELECT SUM(d12) AS total, d12 * 2 AS twice, 1.5 AS lit "
                                    "FROM every_type GROUP BY d12 ORDER BY d12")
    assert pa.types.is_decimal(table.schema.field("total").type)
    assert table.schema.field("lit").type == pa.decimal128(2, 1)
    assert table.column("twice").to_pylist()[-1] == decimal.Decimal("-2469135780.24")


def test_geometry_is_unsupported_and_listed_with_its_type_until_overridden(mysql_url: str) -> None:
    my_exec(mysql_url, "CREATE TABLE shapes (id int, g geometry, p point)",
            "INSERT INTO shapes VALUES (1, ST_GeomFromText('POINT(1 2)'), POINT(3, 4))")
    with open_source(mysql_url, TUNING) as session:
        with pytest.raises(UnsupportedTypeError) as caught:
            session.describe("SELECT id, g, p FROM shapes")
        message = str(caught.value)
        assert message.startswith("2 column(s) have no safe Rivet mapping")
        assert "• g (MySQL type 'geometry')" in message and "• p (MySQL type 'geometry')" in message
        schema = session.describe("SELECT id, g, p FROM shapes",
                                  overrides={"g": pa.binary(), "p": pa.binary()})
        batch = next(session.stream("SELECT id, g, p FROM shapes", [], schema, 10))
    assert isinstance(batch.column("g")[0].as_py(), bytes)


def test_uuid_override_parses_raw_bytes_and_text_and_nulls_garbage(mysql_url: str) -> None:
    my_exec(mysql_url, "CREATE TABLE ids (n int, raw binary(16), txt char(36))",
            "INSERT INTO ids VALUES (1, %s, '6f1c2a4e-8b3d-4c5e-9f00-112233445566')",
            params=[UUID1.bytes])
    my_exec(mysql_url, "INSERT INTO ids VALUES (2, NULL, 'not-a-uuid')")
    table = read_all(mysql_url, "SELECT raw, txt FROM ids ORDER BY n",
                     overrides={"raw": pa.uuid(), "txt": pa.uuid()})
    assert table.schema.field("raw").metadata[LOGICAL_TYPE_KEY] == b"uuid"
    assert table.to_pylist() == [{"raw": UUID1, "txt": UUID1}, {"raw": None, "txt": None}]


def test_time_outside_one_day_fails_naming_the_column(mysql_url: str) -> None:
    with pytest.raises(SourceError, match="column 'span'"):
        read_all(mysql_url, "SELECT CAST('-12:00:00' AS TIME) AS span")


@pytest.fixture
def people_db(mysql_url: str) -> str:
    my_exec(mysql_url, "CREATE TABLE people (id int, `last name` varchar(20), updated_at datetime, "
                       "created_at datetime, note text)",
            "INSERT INTO people VALUES "
            "(1, 'Adams', '2024-01-01 00:00:00', '2023-01-01', '50% off'), "
            "(2, 'O''Brien', NULL, '2024-01-02 00:00:00', 'back\\\\slash'), "
            "(3, 'Zed', '2024-01-03 00:00:00', '2023-01-01', NULL), "
            "(4, 'Quinn', NULL, NULL, 'no cursor')")
    return mysql_url


def test_a_cursor_value_with_a_quote_stays_a_bound_parameter(people_db: str) -> None:
    base = "SELECT * FROM people WHERE note IS NULL OR note NOT LIKE '%zzz%'"
    sql, params = build_incremental_query("mysql", base, "last name", "O'Brien")
    assert "`last name`" in sql and "O'Brien" not in sql
    table = read_all(people_db, sql, params)
    assert table.column("last name").to_pylist() == ["Quinn", "Zed"]
    sql, params = build_incremental_query("mysql", base, "last name", "O\\'Brien' OR 1=1 -- ")
    assert read_all(people_db, sql, params).column("last name").to_pylist() == ["Quinn", "Zed"]


def test_coalesce_mode_uses_the_fallback_when_the_primary_is_null(people_db: str) -> None:
    sql, params = build_incremental_query("mysql", "SELECT * FROM people", "updated_at", None,
                                          mode="coalesce", fallback_column="created_at")
    table = read_all(people_db, sql, params)
    assert table.column("id").to_pylist() == [4, 1, 2, 3]  # MySQL sorts NULL first
    first_two = table.to_batches()[0].slice(0, 3)
    cursor = render_cursor_value(last_cursor_in_batch(first_two, "_rivet_coalesced_cursor"),
                                 table.schema.field("_rivet_coalesced_cursor").type)
    assert cursor == "2024-01-02T00:00:00.000000"
    sql, params = build_incremental_query("mysql", "SELECT * FROM people", "updated_at", cursor,
                                          mode="coalesce", fallback_column="created_at")
    assert read_all(people_db, sql, params).column("id").to_pylist() == [3]


def test_session_runs_in_utc_read_only_with_the_statement_limit(mysql_url: str) -> None:
    with open_source(mysql_url, ResolvedTuning(statement_timeout_s=7)) as session:
        assert session.scalar("SELECT @@session.time_zone") == "+00:00"
        assert "NO_BACKSLASH_ESCAPES" not in session.scalar("SELECT @@session.sql_mode")
        assert float(session.scalar("SELECT @@session.max_statement_time")) == 7.0
        my_exec(mysql_url, "CREATE TABLE t (id int)")
        with pytest.raises(SourceError, match="read-only|READ ONLY"):
            session.scalar("INSERT INTO t VALUES (1)")
