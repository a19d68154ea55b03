"""Query builders and cursor rendering: hostile identifiers and values never break out.

Property tests run the built SQL for real on SQLite against a table whose column name is
the hostile string, and compare the rows it returns with a Python filter.
"""

from __future__ import annotations

import datetime as dt
import decimal
import sqlite3
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rivet_core.errors import ConfigError
from rivet_core.source import (
    build_incremental_query,
    build_time_range_query,
    build_time_window_query,
    dialect_for,
    last_cursor_in_batch,
    render_cursor_value,
)
from rivet_core.source.query import quote_ident_mysql, quote_ident_pg
from rivet_core.source.sqlite.session import translate_placeholders

hostile_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1, max_size=20,
) | st.sampled_from(['"', "'", "`", '"; DROP TABLE t; --', "O'Brien", "a%sb", "%%", "ünï 漢字 😀"])


def _sqlite_rows(column: str, values: list[str], sql: str, params: list[object]) -> list[str]:
    conn = sqlite3.connect(":memory:")
    try:
        # the helper column's name never collides (SQLite names are case-insensitive)
        conn.execute(f"CREATE TABLE t ({quote_ident_pg(column)} TEXT, \"{'n' * (len(column) + 1)}\" INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(v, i) for i, v in enumerate(values)])
        query = translate_placeholders(sql) if params else sql
        return [row[0] for row in conn.execute(query, params).fetchall()]
    finally:
        conn.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(column=hostile_text, cursor=hostile_text,
       values=st.lists(hostile_text, min_size=0, max_size=6))
def test_hostile_column_names_and_cursor_values_select_exactly_the_rows_after_the_cursor(
    column: str, cursor: str, values: list[str]
) -> None:
    base = f"SELECT {quote_ident_pg(column)} FROM t WHERE {quote_ident_pg(column)} NOT LIKE '%zz%'"
    if column.upper() in ("TRUE", "FALSE"):
        with pytest.raises(ConfigError, match="SQLite cannot use a column named"):
            build_incremental_query("sqlite", base, column, cursor)
        return
    sql, params = build_incremental_query("sqlite", base, column, cursor)
    assert params == [cursor]
    got = _sqlite_rows(column, values, sql, params)
    assert got == sorted(v for v in values if v > cursor and "zz" not in v)


@settings(max_examples=100, deadline=None)
@given(primary=hostile_text, fallback=hostile_text, cursor=st.none() | hostile_text)
def test_coalesce_queries_with_hostile_names_always_parse_and_bind_the_cursor(
    primary: str, fallback: str, cursor: str | None
) -> None:
    if primary == fallback:
        fallback = fallback + "_f"
    if {primary.upper(), fallback.upper()} & {"TRUE", "FALSE"}:
        # SQLite reads such a subquery column as a literal: refused (test below)
        with pytest.raises(ConfigError, match="SQLite cannot use a column named"):
            build_incremental_query("sqlite", "SELECT * FROM t", primary, cursor,
                                    mode="coalesce", fallback_column=fallback)
        return
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE TABLE t ({quote_ident_pg(primary)} TEXT, {quote_ident_pg(fallback)} TEXT)")
    conn.execute("INSERT INTO t VALUES (NULL, 'b'), ('a', 'z'), (NULL, NULL)")
    sql, params = build_incremental_query("sqlite", "SELECT * FROM t", primary, cursor,
                                          mode="coalesce", fallback_column=fallback)
    rows = conn.execute(translate_placeholders(sql) if params else sql, params).fetchall()
    coalesced = [r[2] for r in rows]
    expected = sorted(v for v in ["b", "a", None] if v is not None and (cursor is None or v > cursor))
    if cursor is None:
        expected = [None, *expected]  # SQLite sorts NULL first; no filter without a cursor
    assert coalesced == expected
    conn.close()


@given(name=hostile_text)
def test_quoting_doubles_the_quote_character_and_round_trips(name: str) -> None:
    pg = quote_ident_pg(name)
    my = quote_ident_mysql(name)
    assert pg[0] == pg[-1] == '"' and pg[1:-1].replace('""', '"') == name
    assert my[0] == my[-1] == "`" and my[1:-1].replace("``", "`") == name
    assert '"' not in pg[1:-1].replace('""', "")
    assert "`" not in my[1:-1].replace("``", "")


def test_identifiers_with_nul_are_rejected() -> None:
    with pytest.raises(ValueError, match="NUL"):
        quote_ident_pg("a\x00b")


def test_incremental_sql_shapes_follow_the_reference() -> None:
    pg = dialect_for("postgres")
    assert build_incremental_query(pg, "SELECT * FROM t;", "id", None) == (
        'SELECT * FROM (SELECT * FROM t) AS _rivet ORDER BY "id"', [])
    assert build_incremental_query("mysql", "SELECT * FROM t WHERE a LIKE 'x%'", "id", "5") == (
        "SELECT * FROM (SELECT * FROM t WHERE a LIKE 'x%%') AS _rivet WHERE `id` > %s ORDER BY `id`",
        ["5"])
    sql, params = build_incremental_query(pg, "SELECT * FROM t", "u", "v", mode="coalesce",
                                          fallback_column="c")
    assert sql == ('SELECT _rivet.*, COALESCE(_rivet."u", _rivet."c") AS "_rivet_coalesced_cursor" '
                   'FROM (SELECT * FROM t) AS _rivet WHERE COALESCE(_rivet."u", _rivet."c") > %s '
                   'ORDER BY COALESCE(_rivet."u", _rivet."c"), _rivet."u", _rivet."c"')
    assert params == ["v"]
    with pytest.raises(ValueError, match="requires cursor_fallback_column"):
        build_incremental_query(pg, "SELECT 1", "u", None, mode="coalesce")


def test_time_window_binds_a_utc_midnight_literal_or_epoch_seconds() -> None:
    cutoff = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    assert build_time_window_query("postgres", "SELECT * FROM t", "at", cutoff) == (
        'SELECT * FROM (SELECT * FROM t) AS _rivet WHERE "at" >= %s', ["2024-05-01 00:00:00"])
    assert build_time_window_query("mysql", "SELECT * FROM t", "at", cutoff, "unix")[1] == [1714521600]
    ny = dt.datetime(2024, 5, 1, 20, 0, tzinfo=dt.timezone(dt.timedelta(hours=-4)))
    assert build_time_window_query("sqlite", "SELECT 1", "at", ny)[1] == ["2024-05-02 00:00:00"]
    sql, params = build_time_range_query("mysql", "SELECT * FROM t", "d", dt.date(2024, 1, 1),
                                         dt.date(2024, 1, 2))
    assert sql.endswith("WHERE `d` >= %s AND `d` < %s")
    assert params == ["2024-01-01 00:00:00", "2024-01-02 00:00:00"]


# --- cursor rendering --------------------------------------------------------------------

def test_cursor_values_render_per_the_reference() -> None:
    ts = pa.timestamp("us")
    assert render_cursor_value(42, pa.int64()) == "42"
    assert render_cursor_value(1.0, pa.float64()) == "1"
    assert render_cursor_value(2.5, pa.float64()) == "2.5"
    assert render_cursor_value(decimal.Decimal("1E+3"), pa.decimal128(10, 0)) == "1000"
    assert render_cursor_value(decimal.Decimal("0.000000001"), pa.decimal128(10, 9)) == "0.000000001"
    assert render_cursor_value("O'Brien", pa.string()) == "O'Brien"
    assert render_cursor_value(dt.datetime(2024, 1, 2, 3, 4, 5), ts) == "2024-01-02T03:04:05.000000"
    aware = dt.datetime(2024, 1, 1, 20, 0, 0, 5, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    assert render_cursor_value(aware, pa.timestamp("us", "UTC")) == "2024-01-02T01:00:00.000005"
    assert render_cursor_value(dt.date(2024, 2, 29), pa.date32()) == "2024-02-29"
    u = uuid.UUID("6f1c2a4e-8b3d-4c5e-9f00-112233445566")
    assert render_cursor_value(u, pa.uuid()) == "6f1c2a4e-8b3d-4c5e-9f00-112233445566"
    with pytest.raises(ValueError):
        render_cursor_value(None, pa.int64())


def test_the_last_non_null_value_of_a_batch_is_the_new_cursor() -> None:
    batch = pa.RecordBatch.from_pydict({"c": pa.array([1, 5, None], pa.int64())})
    assert last_cursor_in_batch(batch, "c") == 5
    empty = pa.RecordBatch.from_pydict({"c": pa.array([None, None], pa.int64())})
    assert last_cursor_in_batch(empty, "c") is None
    ns = pa.RecordBatch.from_pydict({"c": pa.array([1_700_000_000_123_456_789], pa.timestamp("ns"))})
    value = last_cursor_in_batch(ns, "c")
    assert render_cursor_value(value, pa.timestamp("ns")) == "2023-11-14T22:13:20.123456789"
    uuids = pa.RecordBatch.from_pydict({"c": pa.array([uuid.UUID(int=7).bytes], pa.uuid())})
    assert render_cursor_value(last_cursor_in_batch(uuids, "c"), pa.uuid()) == str(uuid.UUID(int=7))


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_integer_cursors_round_trip_through_text(value: int) -> None:
    assert int(render_cursor_value(value, pa.int64())) == value


@given(st.decimals(allow_nan=False, allow_infinity=False, places=None))
def test_decimal_cursors_render_exactly_without_exponents(value: decimal.Decimal) -> None:
    text = render_cursor_value(value, pa.decimal128(38, 10))
    assert "E" not in text.upper() and decimal.Decimal(text) == value


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_cursors_round_trip_through_text(value: float) -> None:
    assert float(render_cursor_value(value, pa.float64())) == value


@given(st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30),
                    timezones=st.none() | st.just(dt.UTC)
                    | st.builds(lambda h: dt.timezone(dt.timedelta(hours=h)), st.integers(-12, 12))))
def test_timestamp_cursors_are_zone_less_utc_and_parse_back_to_the_same_instant(
    value: dt.datetime,
) -> None:
    arrow_type = pa.timestamp("us", "UTC" if value.tzinfo else None)
    text = render_cursor_value(value, arrow_type)
    parsed = dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f")
    if value.tzinfo is None:
        assert parsed == value
    else:
        assert parsed.replace(tzinfo=dt.UTC) == value
    # Fixed width means text order equals time order for stored cursors.
    assert len(text) == 26 or parsed.year < 1000


@pytest.mark.parametrize("name", ["TRUE", "false", "True"])
def test_sqlite_refuses_cursor_columns_it_would_read_as_literals(name: str) -> None:
    """SQLite silently turns `"TRUE"` on a subquery into the string 'TRUE' (no rows, no
    error); the same names work on PostgreSQL and MariaDB."""
    with pytest.raises(ConfigError, match=f"column named '{name}'.*rename it in `query:`"):
        build_incremental_query("sqlite", "SELECT * FROM t", name, "x")
    for engine in ("postgres", "mysql"):
        build_incremental_query(engine, "SELECT * FROM t", name, "x")
