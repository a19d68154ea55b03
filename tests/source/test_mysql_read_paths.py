"""MariaDB read paths (issue 5): the raw packet decoder (`RIVET_MYSQL_READ_PATH=raw`, the
default) must give exactly the row path's batches (`=rows`), for every type, NULL and edge
value, with any batch size; an abandoned or failing raw stream must leave the session's
connection usable; the chosen path is logged.

The oracle is the row path itself (its values are checked against PyMySQL elsewhere, in
test_source_mysql.py and the CLI type round trip): same schema, same values, row for row.
"""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa
import pymysql
import pytest

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import SourceError
from rivet_core.source import open_source
from tests.helpers import mysql_connect

pytestmark = pytest.mark.mysql

TUNING = ResolvedTuning(statement_timeout_s=30, lock_timeout_s=5, throttle_ms=0)

CREATE = """
CREATE TABLE t (
  id BIGINT NOT NULL PRIMARY KEY,
  i8 TINYINT, u8 TINYINT UNSIGNED, i16 SMALLINT, i24 MEDIUMINT UNSIGNED, i32 INT,
  i64 BIGINT, u64 BIGINT UNSIGNED, flag TINYINT(1), b1 BIT(1), b10 BIT(10),
  d1 DECIMAL(12,2), d2 DECIMAL(38,10), d3 DECIMAL(65,30), d4 DECIMAL(10,0) UNSIGNED,
  f4 FLOAT, f8 DOUBLE, dt DATE, ts DATETIME(6), ts0 DATETIME, tz TIMESTAMP(6) NULL,
  tm TIME(6), yr YEAR,
  c CHAR(5), vc VARCHAR(300), tx TEXT, mtx MEDIUMTEXT, bn BINARY(4), vb VARBINARY(300), bl BLOB,
  js JSON, en ENUM('a','b','ccc'), st SET('x','y','z')
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""

ROWS = [
    "(1, -128, 255, -32768, 16777215, -2147483648, -9223372036854775808, 18446744073709551615, 1, b'1', b'1111111111',"
    " -9999999999.99, 1234567890123456789012345678.9012345678, 12345678901234567890123456789012345.123456789012345678901234567890,"
    " 9999999999, 3.14159, 2.718281828459045, '1000-01-01', '9999-12-31 23:59:59.999999', '2021-06-01 12:00:00',"
    " '2038-01-19 03:14:07.999999', '23:59:59.999999', 1901,"
    " 'ab', 'tab\\tnew\\nline \\\\ back \"q\" ''s''', 'ünïcödé 漢字 🎉', REPEAT('x', 70000), x'00ff10fe', x'fbfcfdfe00', x'',"
    " '{\"k\": [1, 2, {\"n\": null}], \"s\": \"v\"}', 'ccc', 'x,z')",
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(3, 0, 0, 0, 0, 0, 0, 0, 0, b'0', b'0', 0.00, 0, 0, 0, 0, -0.0, '2021-01-31', '2021-01-31 00:00:00',"
    " '2021-01-31 00:00:01', '1970-01-01 00:00:01', '00:00:00', 2000, '', '', '', '', x'00000000', x'', x'',"
    " '[]', 'a', '')",
    "(4, 2, 1, 1, 1, 1, 1, 1, 2, b'1', b'101', 0.01, -0.0000000001, -1, 1, -1e-30, 1e300, '2024-02-29',"
    " '2024-02-29 23:59:59.5', '2024-02-29 23:59:59', '2024-02-29 23:59:59.000001', '12:34:56.5', 2155,"
    " 'NULL', 'NULL', REPEAT('é', 200), REPEAT('y', 251), x'01', x'ff', REPEAT(x'ab', 300),"
    " '\"just a string\"', 'b', 'x,y,z')",
]


def _connect(url: str) -> pymysql.connections.Connection[Any]:
    return mysql_connect(url, charset="utf8mb4")


@pytest.fixture
def typed_table(mysql_url: str) -> str:
    conn = _connect(mysql_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(CREATE)
            cur.execute("INSERT INTO t VALUES " + ", ".join(ROWS))
            # Many ordinary rows so batches span several socket reads.
            cur.execute(
                "INSERT INTO t (id, i32, u64, flag, d1, f8, dt, ts, tz, vc, tx, js, en) "
                "SELECT seq, seq, seq * 1000003, seq % 3, seq / 100, seq / 7, '2021-01-01' + INTERVAL seq DAY, "
                "'2021-01-01' + INTERVAL seq SECOND, '2021-01-01' + INTERVAL seq MINUTE, "
                "CONCAT('row ', seq), IF(seq % 5 = 0, NULL, REPEAT('n', seq % 300)), "
                "JSON_OBJECT('n', seq), ELT(1 + seq % 3, 'a', 'b', 'ccc') FROM seq_10_to_3000")
    finally:
        conn.close()
    return mysql_url


def read(url: str, sql: str, path: str, monkeypatch: pytest.MonkeyPatch, batch_rows: int = 1000,
         overrides: dict[str, pa.DataType] | None = None) -> pa.Table:
    monkeypatch.setenv("RIVET_MYSQL_READ_PATH", path)
    with open_source(url, TUNING) as src:
        schema = src.describe(sql, (), overrides)
        batches = list(src.stream(sql, (), schema, batch_rows))
        assert all(b.num_rows <= batch_rows for b in batches)
        assert src.scalar("SELECT 1") == 1  # the connection is in sync afterwards
    return pa.Table.from_batches(batches, schema=schema)


#: Tiny batches (1 and 7 rows) compare the edge-value rows 1-4 and the first ordinary rows
#: (ids 10-299: the long TEXT/MEDIUMTEXT values, several socket reads) rather than the whole
#: table: each batch costs a read-ahead hand-off and an Arrow batch of 33 columns, so 2,995
#: one-row batches took 70 s in CI and proved nothing the first 294 rows do not. The batch
#: sizes 1,000 and 100,000 read the whole table.
SMALL_BATCH_LAST_ID = 299


def _ordered(columns: str, batch_rows: int) -> tuple[str, int]:
    """The comparison query for `batch_rows` and the number of rows it returns."""
    if batch_rows < 100:
        return (f"SELECT {columns} FROM t WHERE id <= {SMALL_BATCH_LAST_ID} ORDER BY id",
                4 + SMALL_BATCH_LAST_ID - 9)
    return f"SELECT {columns} FROM t ORDER BY id", 4 + 2991


def _statements(src: Any) -> tuple[int, int]:
    """(statements prepared, statements closed) by this source's own session. Session
    counters, not the server-wide PREPARED_STMT_COUNT: other test modules running at the
    same time on the same server hold prepared statements of their own."""
    def count(name: str) -> int:
        return int(src.scalar("SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS "
                              "WHERE VARIABLE_NAME = %s", (name,)))
    return count("COM_STMT_PREPARE"), count("COM_STMT_CLOSE")


@pytest.mark.parametrize("batch_rows", [1, 7, 1000, 100_000])
def test_raw_path_equals_the_row_path_for_every_type(typed_table: str, monkeypatch: pytest.MonkeyPatch,
                                                     batch_rows: int) -> None:
    sql, expected_rows = _ordered("*", batch_rows)
    rows = read(typed_table, sql, "rows", monkeypatch, batch_rows=1000)
    raw = read(typed_table, sql, "raw", monkeypatch, batch_rows=batch_rows)
    assert raw.schema.equals(rows.schema, check_metadata=True)
    assert raw.num_rows == rows.num_rows == expected_rows
    for name in rows.column_names:
        assert raw.column(name).to_pylist() == rows.column(name).to_pylist(), name


def test_zero_dates_and_overrides_take_the_row_rules(mysql_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = _connect(mysql_url)
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute("CREATE TABLE z (id INT PRIMARY KEY, d DATE, t DATETIME, n VARCHAR(20))")
        cur.execute("INSERT INTO z VALUES (1, '0000-00-00', '0000-00-00 00:00:00', '12.50'),"
                    " (2, '2021-02-03', '2021-02-03 04:05:06', '7')")
    conn.close()
    sql = "SELECT * FROM z ORDER BY id"
    overrides = {"n": pa.decimal128(10, 2)}
    rows = read(mysql_url, sql, "rows", monkeypatch, overrides=overrides)
    raw = read(mysql_url, sql, "raw", monkeypatch, overrides=overrides)
    assert raw.equals(rows)
    assert raw.column("d").to_pylist()[0] is None  # the zero date is NULL on both paths


def test_an_abandoned_raw_stream_leaves_the_connection_usable(typed_table: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIVET_MYSQL_READ_PATH", "raw")
    with open_source(typed_table, TUNING) as src:
        sql = "SELECT * FROM t ORDER BY id"
        schema = src.describe(sql)
        stream = src.stream(sql, (), schema, 10)
        first = next(stream)
        assert first.num_rows == 10
        stream.close()  # drains the rest of the result off the socket
        assert src.scalar("SELECT COUNT(*) FROM t") == 2995
        again = pa.Table.from_batches(list(src.stream(sql, (), schema, 500)), schema=schema)
        assert again.num_rows == 2995


@pytest.mark.parametrize("path", ["raw", "binary"])
def test_a_server_error_mid_result_is_a_source_error_and_the_session_survives(
        typed_table: str, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    monkeypatch.setenv("RIVET_MYSQL_READ_PATH", path)
    # The scalar subquery returns two rows only when id = 2000: the server fails mid-result,
    # after many rows were sent.
    sql = "SELECT id, (SELECT i32 FROM t AS u WHERE u.id IN (t.id, 1) AND t.id = 2000) AS bad FROM t ORDER BY id"
    with open_source(typed_table, TUNING) as src:
        schema = src.describe(sql)
        got: list[int] = []
        with pytest.raises(SourceError, match="more than 1 row"):
            for batch in src.stream(sql, (), schema, 100):
                got += batch.column("id").to_pylist()
        assert src.scalar("SELECT 1") == 1


def test_the_read_path_is_logged_and_rows_can_be_forced(typed_table: str, monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rivet.source")
    read(typed_table, "SELECT id, vc, flag, tm FROM t", "auto", monkeypatch)
    assert "MySQL read path: raw (3 of 4 column(s) vectorized)" in caplog.text  # TIME: text path
    caplog.clear()
    read(typed_table, "SELECT id FROM t", "rows", monkeypatch)
    assert "MySQL read path: rows (RIVET_MYSQL_READ_PATH=rows)" in caplog.text


# --- binary protocol (mysql_binary) ----------------------------------------------------

# every column of `t` except FLOAT, TIME and BIT, which keep the query on the text path
BINARY_COLUMNS = ("id, i8, u8, i16, i24, i32, i64, u64, flag, d1, d2, d3, d4, f8, dt, ts, ts0, tz, "
                  "yr, c, vc, tx, mtx, bn, vb, bl, js, en, st")


@pytest.mark.parametrize("batch_rows", [1, 7, 1000, 100_000])
def test_binary_path_equals_the_row_path_for_every_eligible_type(
        typed_table: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        batch_rows: int) -> None:
    sql, expected_rows = _ordered(BINARY_COLUMNS, batch_rows)
    caplog.set_level(logging.INFO, logger="rivet.source")
    rows = read(typed_table, sql, "rows", monkeypatch, batch_rows=1000)
    binary = read(typed_table, sql, "auto", monkeypatch, batch_rows=batch_rows)
    assert "MySQL read path: binary (29 column(s)" in caplog.text
    assert binary.schema.equals(rows.schema, check_metadata=True)
    assert binary.num_rows == rows.num_rows == expected_rows
    for name in rows.column_names:
        assert binary.column(name).to_pylist() == rows.column(name).to_pylist(), name


def test_float_time_and_bit_columns_keep_the_query_on_the_text_path(
        typed_table: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rivet.source")
    monkeypatch.setenv("RIVET_MYSQL_READ_PATH", "binary")
    for column, why in (("f4", "FLOAT"), ("tm", "TIME"), ("b10", "BIT")):
        caplog.clear()
        sql = f"SELECT id, {column} FROM t"
        with open_source(typed_table, TUNING) as src:
            schema = src.describe(sql)
            assert sum(b.num_rows for b in src.stream(sql, (), schema, 1000)) == 2995
            # the statement the probe prepared was closed again, in this very session
            prepared, closed = _statements(src)
            assert prepared >= 1 and closed == prepared, (column, prepared, closed)
        assert f"MySQL binary protocol not used (column '{column}' is {why}" in caplog.text
        assert "MySQL read path: raw" in caplog.text


def test_binary_zero_and_invalid_dates_take_the_row_rules(
        mysql_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = _connect(mysql_url)
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'")
        cur.execute("CREATE TABLE z (id INT PRIMARY KEY, d DATE, t DATETIME(3), u DATETIME)")
        cur.execute("INSERT INTO z VALUES (1, '0000-00-00', '0000-00-00 00:00:00', '2021-02-03 01:02:03'),"
                    " (2, '2021-02-03', '2021-02-03 04:05:06.789', '0000-00-00 00:00:00'),"
                    " (3, NULL, NULL, NULL)")
        cur.execute("CREATE TABLE bad (id INT PRIMARY KEY, d DATE)")
        cur.execute("INSERT INTO bad VALUES (1, '2021-01-01'), (2, '2021-02-30')")
    conn.close()
    sql = "SELECT * FROM z ORDER BY id"
    rows = read(mysql_url, sql, "rows", monkeypatch)
    binary = read(mysql_url, sql, "binary", monkeypatch)
    assert binary.equals(rows)
    assert binary.column("d").to_pylist()[0] is None  # the zero date is NULL on both paths
    assert binary.column("t").to_pylist()[1].microsecond == 789000
    errors = []
    for path in ("rows", "binary"):
        with pytest.raises(SourceError) as caught:
            read(mysql_url, "SELECT * FROM bad ORDER BY id", path, monkeypatch)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "'2021-02-30'" in errors[0]


def test_binary_path_binds_parameters_like_the_row_path(
        typed_table: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rivet.source")
    sql = "SELECT id, vc FROM t WHERE (vc IS NULL OR vc <> %s) AND id >= %s AND vc <> '?' ORDER BY id"
    params = ("it's; DROP TABLE t; -- ?", 5)
    results = {}
    for path in ("rows", "binary"):
        monkeypatch.setenv("RIVET_MYSQL_READ_PATH", path)
        with open_source(typed_table, TUNING) as src:
            schema = src.describe(sql, params)
            results[path] = pa.Table.from_batches(list(src.stream(sql, params, schema, 500)), schema=schema)
    assert results["binary"].equals(results["rows"]) and results["rows"].num_rows == 2991
    assert "MySQL read path: binary" in caplog.text


def test_an_abandoned_binary_stream_leaves_the_connection_usable(
        typed_table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIVET_MYSQL_READ_PATH", "binary")
    sql = f"SELECT {BINARY_COLUMNS} FROM t ORDER BY id"
    with open_source(typed_table, TUNING) as src:
        schema = src.describe(sql)
        for _ in range(3):
            stream = src.stream(sql, (), schema, 10)
            assert next(stream).num_rows == 10
            stream.close()  # drains the rest and closes the statement
            assert src.scalar("SELECT COUNT(*) FROM t") == 2995
        again = pa.Table.from_batches(list(src.stream(sql, (), schema, 500)), schema=schema)
        assert again.num_rows == 2995
        prepared, closed = _statements(src)
        assert prepared >= 4 and closed == prepared, (prepared, closed)
