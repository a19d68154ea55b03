"""SQLite source: read-only file, declared-type mapping, inference, incremental queries.

The oracle is the stdlib sqlite3 module reading the same query on its own connection.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import SourceError
from rivet_core.source import (
    NATIVE_TYPE_KEY,
    build_incremental_query,
    build_time_range_query,
    build_time_window_query,
    last_cursor_in_batch,
    open_source,
    render_cursor_value,
)

TUNING = ResolvedTuning()


def read_all(url: str, sql: str, params: list[object] | None = None,
             overrides: dict[str, pa.DataType] | None = None) -> pa.Table:
    with open_source(url, TUNING) as session:
        schema = session.describe(sql, params or [], overrides)
        batches = list(session.stream(sql, params or [], schema, 2))
    return pa.Table.from_batches(batches, schema=schema)


@pytest.fixture
def demo_db(tmp_path: Path) -> Iterator[str]:
    """A read-only (chmod 0444) database file in a read-only directory."""
    path = tmp_path / "data" / "demo.db"
    path.parent.mkdir()
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE every_type (
            id INTEGER PRIMARY KEY, qty INT, price DECIMAL(12,2), ratio REAL, name TEXT,
            code VARCHAR(10), payload BLOB, active BOOLEAN, born DATE, seen_at DATETIME,
            doc JSON, misc
        );
        INSERT INTO every_type VALUES
          (1, 7, 12.34, 0.5, 'emoji 😀 漢字', 'A', x'00ff', 1, '2024-02-29',
           '2024-03-10 01:30:00.123456', '{"a": [1, 2]}', 42),
          (2, -3, 99999999.99, -1e300, 'O''Brien', NULL, x'', 0, '1970-01-01',
           '2024-03-10T23:59:59', '[]', 7),
          (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
        CREATE TABLE people (id INTEGER, "last name" TEXT, updated_at DATETIME,
                             created_at DATETIME);
        INSERT INTO people VALUES
          (1, 'Adams', '2024-01-01 00:00:00', '2023-01-01 00:00:00'),
          (2, 'O''Brien', NULL, '2024-01-02 00:00:00'),
          (3, 'Zed', '2024-01-03 00:00:00', '2023-01-01 00:00:00'),
          (4, 'Quinn', '2024-01-03 00:00:00.5', NULL);
        """
    )
    conn.commit()
    conn.close()
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    path.parent.chmod(stat.S_IRUSR | stat.S_IXUSR)
    yield f"sqlite:///{path}"  # absolute path → sqlite:////tmp/…
    path.parent.chmod(stat.S_IRWXU)


def test_declared_types_map_exactly_and_values_match_sqlite(demo_db: str) -> None:
    sql = "SELECT *, qty + 1 AS next_qty, name || '!' AS shout, ratio * 2 AS twice FROM every_type ORDER BY id"
    table = read_all(demo_db, sql)
    assert {f.name: f.type for f in table.schema} == {
        "id": pa.int64(), "qty": pa.int64(), "price": pa.decimal128(12, 2),
        "ratio": pa.float64(), "name": pa.string(), "code": pa.string(),
        "payload": pa.binary(), "active": pa.bool_(), "born": pa.date32(),
        "seen_at": pa.timestamp("us"), "doc": pa.json_(pa.string()), "misc": pa.int64(),
        "next_qty": pa.int64(), "shout": pa.string(), "twice": pa.float64(),
    }
    assert table.schema.field("price").metadata[NATIVE_TYPE_KEY] == b"DECIMAL(12,2)"

    oracle = sqlite3.connect(demo_db.removeprefix("sqlite:///"))
    expected = oracle.execute(sql).fetchall()
    oracle.close()
    rows = table.to_pylist()
    convert = {
        "price": lambda v: decimal.Decimal(str(v)).quantize(decimal.Decimal("0.01")),
        "active": bool, "born": dt.date.fromisoformat, "seen_at": dt.datetime.fromisoformat,
    }
    for arrow_row, oracle_row in zip(rows, expected, strict=True):
        for index, name in enumerate(table.schema.names):
            raw = oracle_row[index]
            want = None if raw is None else convert.get(name, lambda v: v)(raw)
            assert arrow_row[name] == want, (name, arrow_row[name], want)
    assert rows[0]["price"] == decimal.Decimal("12.34")
    assert rows[1]["seen_at"] == dt.datetime(2024, 3, 10, 23, 59, 59)


def test_the_file_is_opened_read_only_and_cannot_be_changed(demo_db: str) -> None:
    before = os.stat(demo_db.removeprefix("sqlite:///")).st_mtime_ns
    with open_source(demo_db, TUNING) as session:
        with pytest.raises(SourceError, match="readonly"):
            session.scalar("DELETE FROM people")
    assert os.stat(demo_db.removeprefix("sqlite:///")).st_mtime_ns == before
    assert read_all(demo_db, "SELECT count(*) AS n FROM people").column("n").to_pylist() == [4]


def test_a_missing_database_file_is_a_clear_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        with open_source(f"sqlite:///{tmp_path}/nope.db", TUNING):
            pass


def test_a_cursor_value_with_a_quote_stays_a_bound_parameter(demo_db: str) -> None:
    sql, params = build_incremental_query("sqlite", "SELECT * FROM people WHERE id < 100",
                                          "last name", "O'Brien")
    assert '"last name"' in sql and params == ["O'Brien"]
    assert read_all(demo_db, sql, params).column("last name").to_pylist() == ["Quinn", "Zed"]


def test_timestamp_cursors_compare_correctly_against_space_separated_text(demo_db: str) -> None:
    sql, params = build_incremental_query("sqlite", "SELECT * FROM people", "updated_at", None)
    table = read_all(demo_db, sql, params)
    head = pa.Table.from_pylist(table.to_pylist()[:2], schema=table.schema).to_batches()[0]
    cursor = render_cursor_value(last_cursor_in_batch(head, "updated_at"),
                                 table.schema.field("updated_at").type)
    assert cursor == "2024-01-01T00:00:00.000000"
    sql, params = build_incremental_query("sqlite", "SELECT * FROM people", "updated_at", cursor)
    assert read_all(demo_db, sql, params).column("id").to_pylist() == [3, 4]


def test_coalesce_mode_falls_back_when_the_primary_cursor_is_null(demo_db: str) -> None:
    sql, params = build_incremental_query("sqlite", "SELECT * FROM people", "updated_at",
                                          "2024-01-01T00:00:00.000000", mode="coalesce",
                                          fallback_column="created_at")
    table = read_all(demo_db, sql, params)
    assert table.column("id").to_pylist() == [2, 3, 4]
    assert table.schema.field("_rivet_coalesced_cursor").type == pa.string()  # undeclared


def test_time_window_and_range_queries_select_the_right_rows(demo_db: str) -> None:
    sql, params = build_time_window_query("sqlite", "SELECT * FROM people", "created_at",
                                          dt.datetime(2024, 1, 1))
    assert read_all(demo_db, sql, params).column("id").to_pylist() == [2]
    sql, params = build_time_range_query("sqlite", "SELECT * FROM people", "updated_at",
                                         dt.date(2024, 1, 1), dt.date(2024, 1, 3))
    assert read_all(demo_db, sql, params).column("id").to_pylist() == [1]


def test_overrides_win_over_declared_types(demo_db: str) -> None:
    table = read_all(demo_db, "SELECT id, price, misc FROM every_type ORDER BY id",
                     overrides={"price": pa.decimal128(20, 4), "misc": pa.string()})
    assert table.column("price").to_pylist()[0] == decimal.Decimal("12.3400")
    assert table.column("misc").to_pylist() == ["42", "7", None]


def test_values_that_contradict_the_declared_type_fail_naming_the_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.db"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1), ('one');")
    conn.commit()
    conn.close()
    with pytest.raises(SourceError, match="column 'n': value 'one'"):
        read_all(f"sqlite:///{path}", "SELECT n FROM t")
