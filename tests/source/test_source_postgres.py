"""PostgreSQL source: exact type mapping, unsupported types, bounded streaming, UTC, incremental.

Every value check compares against an independent oracle: the same query read by a plain
psycopg connection with its default loaders (not Rivet's session), value by value.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pyarrow as pa
import pytest

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import SourceError, UnsupportedTypeError
from rivet_core.source import (
    LOGICAL_TYPE_KEY,
    NATIVE_TYPE_KEY,
    build_incremental_query,
    build_time_range_query,
    build_time_window_query,
    last_cursor_in_batch,
    open_source,
    render_cursor_value,
)

pytestmark = pytest.mark.postgres

TUNING = ResolvedTuning(statement_timeout_s=30, lock_timeout_s=5)
UTC = dt.UTC

N38 = decimal.Decimal("1234567890123456789012345678.9012345678")  # 38 significant digits
BIG_TEXT = "é" * (512 * 1024)  # 1 MiB of UTF-8
UUID1 = uuid.UUID("6f1c2a4e-8b3d-4c5e-9f00-112233445566")


def pg_exec(url: str, *statements: str, params: list[Any] | None = None) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for index, statement in enumerate(statements):  # params bind the last one
            conn.execute(statement, params if index == len(statements) - 1 else None)


def oracle_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    """The same query through a plain psycopg connection with default loaders."""
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def read_all(url: str, sql: str, params: list[Any] | None = None, *,
             overrides: dict[str, pa.DataType] | None = None, batch_rows: int = 1000,
             tuning: ResolvedTuning = TUNING) -> pa.Table:
    with open_source(url, tuning) as session:
        schema = session.describe(sql, params or [], overrides)
        batches = list(session.stream(sql, params or [], schema, batch_rows))
    return pa.Table.from_batches(batches, schema=schema)


@pytest.fixture
def every_type_db(pg_url: str) -> Iterator[str]:
    pg_exec(
        pg_url,
        "CREATE TYPE mood AS ENUM ('sad', 'happy', 'very ''happy''')",
        """CREATE TABLE every_type (
            id int PRIMARY KEY, n38 numeric(38,10), n12 numeric(12,2), n50 numeric(50,5),
            tstz timestamptz, ts timestamp, d date, t time, j json, jb jsonb, u uuid,
            b bytea, ia int[], ta text[], m mood, iv interval, flag boolean, f4 real,
            f8 double precision, s2 smallint, i8 bigint, txt text, vc varchar(20), ch char(3)
        )""",
    )
    pg_exec(
        pg_url,
        """INSERT INTO every_type VALUES
        (1, %s, -1234567890.12, 12345678901234567890123456789012345678901234.12345,
         '2024-03-10 01:30:00.123456-05:00', '2024-03-10 01:30:00.654321', '2024-02-29',
         '23:59:59.999999', '{"b": 1,  "a": [1, 2]}', '{"b": 1, "a": [1, 2.50]}', %s,
         '\\x00ff10'::bytea, '{1,NULL,3}', ARRAY['a', NULL, 'O''Brien'], 'very ''happy''',
         '1 year 2 months 3 days 04:05:06.5', true, 'NaN', 'Infinity', -32768,
         9223372036854775807, 'emoji 😀 CJK 漢字 ünïcödé', 'x', 'ab')""",
        params=[N38, UUID1],
    )
    pg_exec(
        pg_url,
        """INSERT INTO every_type (id, n38, n12, f4, f8, txt, flag, ia, ta, iv, tstz)
           VALUES (2, -0.0000000001, 0.01, 1.5, '-Infinity', %s, false, '{}', '{}',
                   '-3 days', '1969-12-31 23:59:59.999999+00')""",
        params=[BIG_TEXT],
    )
    pg_exec(pg_url, "INSERT INTO every_type (id) VALUES (3)")  # every other column NULL
    yield pg_url


def _same(column: str, arrow_value: Any, oracle_value: Any) -> bool:
    if oracle_value is None or arrow_value is None:
        return arrow_value is None and oracle_value is None
    if column in ("j", "jb"):
        return json.loads(arrow_value) == oracle_value
    if isinstance(oracle_value, float) and math.isnan(oracle_value):
        return isinstance(arrow_value, float) and math.isnan(arrow_value)
    if column == "iv":
        return isinstance(arrow_value, str)  # text form is checked against PG's own rendering
    return arrow_value == oracle_value and type(arrow_value) is type(oracle_value)


def test_every_mapped_pg_type_round_trips_exactly_against_the_driver(every_type_db: str) -> None:
    sql = "SELECT * FROM every_type ORDER BY id"
    table = read_all(every_type_db, sql)
    expected_types = {
        "id": pa.int32(), "n38": pa.decimal128(38, 10), "n12": pa.decimal128(12, 2),
        "n50": pa.decimal256(50, 5), "tstz": pa.timestamp("us", "UTC"),
        "ts": pa.timestamp("us"), "d": pa.date32(), "t": pa.time64("us"),
        "j": pa.json_(pa.string()), "jb": pa.json_(pa.string()), "u": pa.uuid(),
        "b": pa.binary(), "ia": pa.list_(pa.int32()), "ta": pa.list_(pa.string()),
        "m": pa.string(), "iv": pa.string(), "flag": pa.bool_(), "f4": pa.float32(),
        "f8": pa.float64(), "s2": pa.int16(), "i8": pa.int64(), "txt": pa.string(),
        "vc": pa.string(), "ch": pa.string(),
    }
    assert {f.name: f.type for f in table.schema} == expected_types

    oracle = oracle_rows(every_type_db, sql)
    arrow_rows = table.to_pylist()
    assert len(arrow_rows) == len(oracle) == 3
    for arrow_row, oracle_row in zip(arrow_rows, oracle, strict=True):
        for index, column in enumerate(table.schema.names):
            assert _same(column, arrow_row[column], oracle_row[index]), (
                column, arrow_row[column], oracle_row[index])

    first, second, nulls = arrow_rows
    assert first["n38"] == N38 and len(first["n38"].as_tuple().digits) == 38
    # The row was written at 01:30 -05:00: the Arrow value is the UTC instant 06:30.
    assert first["tstz"] == dt.datetime(2024, 3, 10, 6, 30, 0, 123456, tzinfo=UTC)
    assert first["ts"] == dt.datetime(2024, 3, 10, 1, 30, 0, 654321)  # naive stays naive
    assert first["u"] == UUID1
    assert first["ta"] == ["a", None, "O'Brien"] and first["ia"] == [1, None, 3]
    assert first["m"] == "very 'happy'"
    assert first["txt"] == "emoji 😀 CJK 漢字 ünïcödé"
    assert math.isnan(first["f4"]) and first["f8"] == math.inf and second["f8"] == -math.inf
    assert second["txt"] == BIG_TEXT
    assert second["n38"] == decimal.Decimal("-0.0000000001")
    assert all(value is None for key, value in nulls.items() if key != "id")


def test_json_and_interval_text_is_exactly_what_postgres_renders(every_type_db: str) -> None:
    table = read_all(every_type_db, "SELECT id, j, jb, iv FROM every_type ORDER BY id")
    with psycopg.connect(every_type_db) as conn:
        conn.execute("SET IntervalStyle = 'iso_8601'")
        rendered = conn.execute(
            "SELECT j::text, jb::text, iv::text FROM every_type ORDER BY id"
        ).fetchall()
    assert [(r["j"], r["jb"], r["iv"]) for r in table.to_pylist()] == rendered
    assert rendered[0][2] == "P1Y2M3DT4H5M6.5S"


def test_field_metadata_names_native_and_logical_types(every_type_db: str) -> None:
    with open_source(every_type_db, TUNING) as session:
        schema = session.describe("SELECT n12, j, u, m, iv, ts FROM every_type")
    meta = {f.name: f.metadata for f in schema}
    assert meta["n12"][NATIVE_TYPE_KEY] == b"numeric(12,2)"
    assert meta["j"][LOGICAL_TYPE_KEY] == b"json"
    assert meta["u"][LOGICAL_TYPE_KEY] == b"uuid"
    assert meta["m"][LOGICAL_TYPE_KEY] == b"enum" and meta["m"][NATIVE_TYPE_KEY] == b"mood"
    assert meta["iv"][LOGICAL_TYPE_KEY] == b"interval"
    assert LOGICAL_TYPE_KEY not in meta["ts"]


def test_every_unsupported_column_is_listed_in_one_error_and_overrides_fix_them(pg_url: str) -> None:
    sql = ("SELECT 1::int AS ok, 1.5::numeric * 2 AS computed, point(1, 2) AS p, "
           "'10.0.0.1'::inet AS ip, ARRAY[1.5::numeric] AS na, '{{1,2}}'::int[] AS fine")
    with open_source(pg_url, TUNING) as session:
        with pytest.raises(UnsupportedTypeError) as caught:
            session.describe(sql)
        message = str(caught.value)
        assert message.startswith("4 column(s) have no safe Rivet mapping — add column overrides")
        assert "• computed (PG type 'numeric'): unbounded numeric has no precision" in message
        assert 'columns: {computed: "decimal(38,9)"}' in message
        assert "• p (PG type 'point')" in message and "• ip (PG type 'inet')" in message
        assert "• na (PG type 'numeric[]')" in message
        overrides = {"computed": pa.decimal128(38, 9), "p": pa.string(), "ip": pa.string(),
                     "na": pa.string()}
        schema = session.describe(sql, overrides=overrides)
        assert schema.field("computed").type == pa.decimal128(38, 9)
        assert schema.field("computed").metadata[NATIVE_TYPE_KEY] == b"numeric"
        # Multi-dimensional values in an int[] column are found on the data, not the type.
        with pytest.raises(UnsupportedTypeError, match="multi-dimensional array"):
            list(session.stream(sql, [], schema, 10))


def test_overridden_columns_convert_values_exactly(pg_url: str) -> None:
    sql = ("SELECT 1.5::numeric * 2 AS computed, point(1, 2) AS p, '10.0.0.1'::inet AS ip, "
           "'6f1c2a4e-8b3d-4c5e-9f00-112233445566'::text AS u, '{\"k\": [1]}'::text AS j, "
           "'2024-01-01 10:00:00'::timestamp AS as_utc, 7::int AS as_text")
    overrides = {"computed": pa.decimal128(38, 9), "p": pa.string(), "ip": pa.string(),
                 "u": pa.uuid(), "j": pa.json_(pa.string()), "as_utc": pa.timestamp("us", "UTC"),
                 "as_text": pa.string()}
    row = read_all(pg_url, sql, overrides=overrides).to_pylist()[0]
    assert row == {
        "computed": decimal.Decimal("3.000000000"), "p": "(1,2)", "ip": "10.0.0.1",
        "u": UUID1, "j": '{"k": [1]}', "as_utc": dt.datetime(2024, 1, 1, 10, tzinfo=UTC),
        "as_text": "7",
    }


def test_numeric_nan_fails_naming_the_column(pg_url: str) -> None:
    pg_exec(pg_url, "CREATE TABLE money (amount numeric(10,2))",
            "INSERT INTO money VALUES (1.25), ('NaN')")
    with pytest.raises(SourceError, match="column 'amount' holds NaN"):
        read_all(pg_url, "SELECT amount FROM money")


def test_a_cell_over_max_value_mb_aborts_with_value_too_large(pg_url: str) -> None:
    tuning = ResolvedTuning(max_value_mb=1)
    with pytest.raises(SourceError) as caught:
        read_all(pg_url, "SELECT repeat('x', 2 * 1024 * 1024) AS blob_text", tuning=tuning)
    assert caught.value.code == "RIVET_VALUE_TOO_LARGE"
    assert "column 'blob_text' has a value of 2.0 MB, over max_value_mb=1" in str(caught.value)


def test_streaming_200k_rows_yields_bounded_batches(pg_url: str) -> None:
    pg_exec(pg_url, "CREATE TABLE big AS SELECT g AS id, md5(g::text) AS h, g * 1.5 AS x "
                    "FROM generate_series(1, 200000) g")
    sql = "SELECT id, h FROM big ORDER BY id"
    with open_source(pg_url, TUNING) as session:
        schema = session.describe(sql)
        sizes: list[int] = []
        last_id = 0
        for batch in session.stream(sql, [], schema, 10_000):
            assert batch.schema == schema
            sizes.append(batch.num_rows)
            last_id = batch.column("id")[-1].as_py()
    assert len(sizes) >= 20 and max(sizes) <= 10_000
    assert sum(sizes) == 200_000 and last_id == 200_000


def test_describe_stream_and_scalar_share_one_snapshot(pg_url: str) -> None:
    pg_exec(pg_url, "CREATE TABLE t (id int)", "INSERT INTO t VALUES (1)")
    with open_source(pg_url, TUNING) as session:
        assert session.scalar("SELECT count(*) FROM t") == 1
        pg_exec(pg_url, "INSERT INTO t VALUES (2)")  # committed by another connection
        schema = session.describe("SELECT id FROM t")
        rows = [r for b in session.stream("SELECT id FROM t", [], schema, 10) for r in b.to_pylist()]
        assert rows == [{"id": 1}]
        assert session.scalar("SELECT current_setting('transaction_read_only')") == "on"
        assert session.scalar("SELECT current_setting('application_name')") == "rivet"


def test_a_new_york_default_timezone_still_yields_utc_and_unshifted_cursors(pg_url: str) -> None:
    dbname = pg_url.rsplit("/", 1)[1]
    pg_exec(pg_url, f"ALTER DATABASE \"{dbname}\" SET timezone = 'America/New_York'")
    pg_exec(pg_url, "CREATE TABLE ev (id int, at timestamptz)",
            "INSERT INTO ev VALUES (1, '2024-01-01 10:00:00+00'), (2, '2024-01-01 11:00:00+00'), "
            "(3, '2024-01-01 12:00:00+00')")
    with psycopg.connect(pg_url) as conn:  # the database default really is New York
        assert conn.execute("SHOW timezone").fetchone()[0] == "America/New_York"

    sql, params = build_incremental_query("postgres", "SELECT * FROM ev", "at", None)
    table = read_all(pg_url, sql, params)
    assert table.column("at").to_pylist()[0] == dt.datetime(2024, 1, 1, 10, tzinfo=UTC)
    middle = pa.RecordBatch.from_pylist(table.to_pylist()[:2], schema=table.schema)
    cursor = render_cursor_value(last_cursor_in_batch(middle, "at"), table.schema.field("at").type)
    assert cursor == "2024-01-01T11:00:00.000000"

    sql, params = build_incremental_query("postgres", "SELECT * FROM ev", "at", cursor)
    assert read_all(pg_url, sql, params).column("id").to_pylist() == [3]

    sql, params = build_time_window_query("postgres", "SELECT * FROM ev", "at",
                                          dt.datetime(2024, 1, 1, 11, 0))
    assert read_all(pg_url, sql, params).column("id").to_pylist() == [2, 3]
    sql, params = build_time_range_query("postgres", "SELECT * FROM ev", "at",
                                         dt.datetime(2024, 1, 1, 10, 0), dt.datetime(2024, 1, 1, 12, 0))
    assert sorted(read_all(pg_url, sql, params).column("id").to_pylist()) == [1, 2]


@pytest.fixture
def people_db(pg_url: str) -> str:
    pg_exec(pg_url, 'CREATE TABLE people (id int, "last name" text, updated_at timestamp, '
                    "created_at timestamp, note text)",
            "INSERT INTO people VALUES "
            "(1, 'Adams', '2024-01-01 00:00:00', '2023-01-01', '50% off'), "
            "(2, 'O''Brien', NULL, '2024-01-02 00:00:00', 'quote '' here'), "
            "(3, 'Zed', '2024-01-03 00:00:00', '2023-01-01', NULL), "
            "(4, 'Quinn', NULL, NULL, 'no cursor at all')")
    return pg_url


def test_a_cursor_value_with_a_quote_stays_a_bound_parameter(people_db: str) -> None:
    base = "SELECT * FROM people WHERE note IS NULL OR note NOT LIKE '%zzz%'"
    sql, params = build_incremental_query("postgres", base, "last name", "O'Brien")
    assert "O'Brien" not in sql and params == ["O'Brien"]
    table = read_all(people_db, sql, params)
    assert table.column("last name").to_pylist() == ["Quinn", "Zed"]


def test_coalesce_mode_orders_and_filters_on_the_fallback_when_primary_is_null(people_db: str) -> None:
    sql, params = build_incremental_query("postgres", "SELECT * FROM people", "updated_at",
                                          None, mode="coalesce", fallback_column="created_at")
    table = read_all(people_db, sql, params)
    assert table.column("id").to_pylist() == [1, 2, 3, 4]
    assert table.schema.names[-1] == "_rivet_coalesced_cursor"
    cursor = render_cursor_value(
        last_cursor_in_batch(table.to_batches()[0].slice(0, 2), "_rivet_coalesced_cursor"),
        table.schema.field("_rivet_coalesced_cursor").type,
    )
    assert cursor == "2024-01-02T00:00:00.000000"
    sql, params = build_incremental_query("postgres", "SELECT * FROM people", "updated_at",
                                          cursor, mode="coalesce", fallback_column="created_at")
    assert read_all(people_db, sql, params).column("id").to_pylist() == [3]


def test_connecting_with_a_wrong_password_is_a_redacted_permanent_source_error(pg_url: str) -> None:
    bad = pg_url.replace("postgres@", "postgres:hunter2secret@", 1).replace(
        "://postgres", "://no_such_role", 1)
    with pytest.raises(SourceError) as caught:
        with open_source(bad, TUNING):
            pass
    assert "hunter2secret" not in str(caught.value)
    assert "rivet doctor" in str(caught.value)
