"""SQLite source: read-only file, declared-type mapping, inference, incremental queries.

The oracle is the stdlib sqlite3 module reading the same query on its own connection.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
from rivet_core.source.sqlite.types import sqlite_mapping
from tests.helpers import rivet_quick as rivet  # nothing here crashes or pauses
from tests.helpers import source_block, state_rows, write_config

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
    with pytest.raises(SourceError, match="column 'n' declared INTEGER .* holds a TEXT value 'one'"):
        read_all(f"sqlite:///{path}", "SELECT n FROM t")


# --- declared type decides, never the values ------------------------------------------------

# (declared type, values to store, expected Arrow type). Covers every row of the mapping
# table in `types_sqlite`, including the NUMERIC-affinity fallbacks that used to be guessed.
DECLARED_CASES: list[tuple[str, list[object], pa.DataType]] = [
    ("NUMERIC", [1, 2.5, -7, 1e300], pa.float64()),
    ("DECIMAL", [3, 0.25], pa.float64()),
    ("NUMBER", [42], pa.float64()),
    ("MONEY", [9.99], pa.float64()),
    ("NUMERIC(10,2)", ["12.34", 5], pa.decimal128(10, 2)),
    ("DECIMAL(100,2)", [1.5], pa.float64()),  # beyond decimal256: bare-numeric rule
    ("BOOLEAN", [1, 0], pa.bool_()),
    ("DATE", ["2024-02-29"], pa.date32()),
    ("DATETIME", ["2024-03-10 01:30:00.123456"], pa.timestamp("us")),
    ("TIMESTAMP", ["2024-03-10 01:30:00"], pa.timestamp("us")),
    ("TIME", ["12:34:56"], pa.time64("us")),
    ("JSON", ['{"a": 1}'], pa.json_(pa.string())),
    ("INTEGER", [1, -(2**63)], pa.int64()),
    ("BIGINT", [2**63 - 1], pa.int64()),
    ("TEXT", ["a", "漢字"], pa.string()),
    ("VARCHAR(5)", ["x"], pa.string()),
    ("BLOB", [b"\x00\xff"], pa.binary()),
    ("REAL", [0.5, -1e-300], pa.float64()),
    ("DOUBLE PRECISION", [1.25], pa.float64()),
    ("UUID", ["0b3c7e2a-0000-4000-8000-000000000000", 7], pa.string()),
    ("STRING", ["abc"], pa.string()),
]


def _typed_db(tmp_path: Path, declared: str, values: list[object]) -> str:
    path = tmp_path / "typed.db"
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE t (id INTEGER PRIMARY KEY, v {declared})")
    conn.executemany("INSERT INTO t (id, v) VALUES (?, ?)", list(enumerate(values, 1)))
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


@pytest.mark.parametrize(("declared", "values", "arrow_type"), DECLARED_CASES,
                         ids=[c[0] for c in DECLARED_CASES])
def test_empty_and_non_empty_results_have_the_same_schema(
        tmp_path: Path, declared: str, values: list[object], arrow_type: pa.DataType) -> None:
    url = _typed_db(tmp_path, declared, values)
    full = read_all(url, "SELECT * FROM t ORDER BY id")
    empty = read_all(url, "SELECT * FROM t WHERE id > %s", [10**6])
    assert empty.num_rows == 0 and full.num_rows == len(values)
    assert full.schema == empty.schema  # types AND field metadata
    assert full.schema.field("v").type == arrow_type


@pytest.mark.parametrize(("declared", "values"), [
    ("NUMERIC", [1, 2.5, -7, 1e300, 2**53, 0.1]),
    ("DECIMAL", [3, 0.25, -0.0]),
    ("REAL", [0.5, -1e-300, 3]),
])
def test_bare_numeric_values_survive_a_parquet_round_trip(
        tmp_path: Path, declared: str, values: list[object]) -> None:
    url = _typed_db(tmp_path, declared, values)
    table = read_all(url, "SELECT * FROM t ORDER BY id")
    parquet = tmp_path / "t.parquet"
    pq.write_table(table, parquet)
    reread = pq.read_table(parquet)
    assert reread.schema.field("v").type == pa.float64()
    oracle = sqlite3.connect(url.removeprefix("sqlite:///"))
    expected = [row[0] for row in oracle.execute("SELECT v FROM t ORDER BY id")]
    oracle.close()
    got = reread.column("v").to_pylist()
    assert got == expected and all(g == float(e) for g, e in zip(got, expected, strict=True))


@pytest.mark.parametrize(("declared", "bad", "kind"), [
    ("NUMERIC", "n/a", "TEXT"),
    ("NUMERIC", b"\x01", "BLOB"),
    ("NUMERIC", 2**63 - 1, "INTEGER"),  # no exact double: refused, never rounded
    ("REAL", "abc", "TEXT"),
    ("INTEGER", 1.5, "REAL"),
    ("DATETIME", 1700000000, "INTEGER"),
    ("TEXT", b"\xff", "BLOB"),
    ("BLOB", 3, "INTEGER"),
])
def test_a_stored_value_that_contradicts_the_declared_type_is_a_clear_error(
        tmp_path: Path, declared: str, bad: object, kind: str) -> None:
    url = _typed_db(tmp_path, declared, [None, bad])
    with open_source(url, TUNING) as session:
        schema = session.describe("SELECT * FROM t", [], None, (None, "t"))
        with pytest.raises(SourceError) as info:
            list(session.stream("SELECT * FROM t", [], schema, 10))
    message = str(info.value)
    assert "table 't'" in message and "column 'v'" in message
    assert f"declared {declared}" in message and f"holds a {kind} value" in message
    assert "columns:" in message and "CAST(v AS" in message


def test_an_override_is_the_fix_for_a_mismatched_value(tmp_path: Path) -> None:
    url = _typed_db(tmp_path, "NUMERIC", [1.5, "n/a"])
    table = read_all(url, "SELECT v FROM t ORDER BY id", overrides={"v": pa.string()})
    assert table.column("v").to_pylist() == ["1.5", "n/a"]


def test_an_undeclared_expression_on_an_empty_result_is_string(demo_db: str) -> None:
    empty = read_all(demo_db, "SELECT qty + 1 AS next_qty FROM every_type WHERE id > 99")
    assert empty.schema.field("next_qty").type == pa.string()
    assert empty.schema.field("next_qty").metadata[NATIVE_TYPE_KEY] == b"untyped"


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.text(max_size=40),
    st.builds(lambda a, b: a + b, st.sampled_from(
        ["NUMERIC", "DECIMAL", "INT", "CHAR", "TEXT", "BLOB", "REAL", "BOOL", "DATE", "TIME",
         "JSON", "DOUBLE", "NUMBER", " numeric(", "decimal(", "FLOAT", "UUID", ""]),
        st.text(alphabet="0123456789(), ABCDEFGHIJKLMNOPQRSTUVWXYZ", max_size=12)),
))
def test_any_declared_type_maps_deterministically_and_never_raises(declared: str) -> None:
    first = sqlite_mapping(declared)
    assert sqlite_mapping(declared) == first
    if declared.isascii():  # SQLite's own type-name matching is ASCII case-insensitive
        other = sqlite_mapping(declared.lower())
        assert (other.arrow_type, other.accepts, other.exact) == (
            first.arrow_type, first.accepts, first.exact)
    if declared.strip():
        assert first.arrow_type is not None  # only "nothing declared" is ever inferred
        assert first.exact or first.note
    else:
        assert first.arrow_type is None


# --- end to end: the CLI ---------------------------------------------------------------------


def _ledger(tmp_path: Path) -> Path:
    db = tmp_path / "src.db"
    conn = sqlite3.connect(db)
    conn.executescript(
        """
        CREATE TABLE ledger (id INTEGER PRIMARY KEY, amount NUMERIC, note TEXT,
                             modified_at DATETIME);
        INSERT INTO ledger VALUES (1, 9.99, 'a', '2030-01-01 00:00:00'),
                                  (2, 12, 'b', '2030-01-02 00:00:00');
        """
    )
    conn.commit()
    conn.close()
    return db


def test_idle_incremental_runs_on_bare_numeric_report_no_drift(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    config = write_config(tmp_path, source_block(f"sqlite:///{db}"), [{
        "name": "ledger", "table": "ledger", "format": "parquet", "mode": "incremental",
        "cursor_column": "modified_at", "on_schema_drift": "fail",
        "destination": {"type": "local", "path": "out"}}])
    for attempt in range(3):  # first run exports 2 rows, then two idle runs
        proc = rivet("run", "-c", str(config))
        assert proc.returncode == 0, (attempt, proc.stdout, proc.stderr)
        assert "schema drift" not in proc.stderr, (attempt, proc.stderr)
    rows = state_rows(config, "SELECT columns_json FROM export_schema WHERE export_name='ledger'")
    assert {"name": "amount", "type": "double"} in json.loads(rows[0][0])
    parts = sorted((tmp_path / "out").rglob("*.parquet"))
    amounts = sorted(v for part in parts for v in pq.read_table(part).column("amount").to_pylist())
    assert amounts == [9.99, 12.0]


def test_check_type_report_grades_bare_numeric_lossy(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    config = write_config(tmp_path, source_block(f"sqlite:///{db}"), [{
        "name": "ledger", "table": "ledger", "format": "parquet",
        "destination": {"type": "local", "path": "out"}}])
    proc = rivet("check", "-c", str(config), "--json", "--type-report")
    assert proc.returncode == 0, proc.stderr
    columns = {c["column"]: c for c in json.loads(proc.stdout)["exports"][0]["columns"]}
    assert (columns["amount"]["fidelity"], columns["amount"]["rivet_type"]) == ("lossy", "double")
    assert "decimal(p,s)" in columns["amount"]["note"]
    assert columns["id"]["fidelity"] == columns["note"]["fidelity"] == "exact"
    assert columns["modified_at"]["fidelity"] == "exact"
