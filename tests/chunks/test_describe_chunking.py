"""`describe_chunking`: the planner's strategy resolution without touching the table's rows.

`rivet check` reports a chunked export's shape through this function, so it must (a) agree
with what `lay_out_windows` will actually do and (b) never run a probe that reads the table —
no NULL probe, MIN/MAX, COUNT(*) or keyset boundary scan — or `check` would cost as much
as planning on a billion-row table. The spy below fails on any such query: every probe the
planner runs goes through `session.scalar` (NULL/MIN/MAX/COUNT) or streams a query that
wraps the export's base SQL (the keyset boundary scan); catalog reads do neither.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from rivet_core.chunks.layout import lay_out_windows
from rivet_core.chunks.strategy import ChunkShape, describe_chunking
from rivet_core.config.models import ExportConfig
from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import ConfigError
from rivet_core.source import open_source
from rivet_core.source.base import SourceSession
from tests.helpers import db_exec

TUNING = ResolvedTuning(statement_timeout_s=30, lock_timeout_s=5)
ROWS = 25

#: table name → (PostgreSQL DDL, SQLite DDL, row value for id i, expected shape)
TABLES: dict[str, tuple[str, str, Callable[[int], Any], tuple[str, str]]] = {
    "int_pk": ("CREATE TABLE int_pk (id BIGINT PRIMARY KEY, v INT)",
               "CREATE TABLE int_pk (id INTEGER PRIMARY KEY, v INT)",
               lambda i: i, ("range", "id")),
    "uuid_pk": ("CREATE TABLE uuid_pk (id UUID PRIMARY KEY, v INT)",
                "CREATE TABLE uuid_pk (id CHAR(36) NOT NULL PRIMARY KEY, v INT)",
                lambda i: str(uuid.UUID(int=i)), ("keyset", "id")),
}


def export(**fields: Any) -> ExportConfig:
    return ExportConfig(name="orders", mode="chunked", format="parquet",
                        destination={"type": "local", "path": "/tmp/unused"}, **fields)


def _sqlite_url(tmp_path: Path, table: str) -> str:
    path = tmp_path / "src.db"
    pg_ddl, ddl, value, _ = TABLES[table]
    with sqlite3.connect(path) as conn:
        conn.execute(ddl)
        conn.executemany(f"INSERT INTO {table} VALUES (?, ?)",
                         [(value(i), i % 3) for i in range(1, ROWS + 1)])
    return f"sqlite:///{path}"


def _pg_url(pg_url: str, table: str) -> str:
    ddl, _, value, _ = TABLES[table]
    rows = ", ".join(f"('{value(i)}', {i % 3})" for i in range(1, ROWS + 1))
    db_exec(pg_url, ddl, f"INSERT INTO {table} VALUES {rows}", f"ANALYZE {table}")
    return pg_url


@pytest.fixture(params=["sqlite", pytest.param("pg", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def source_url(engine: str, table: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if engine == "sqlite":
        return _sqlite_url(tmp_path, table)
    return _pg_url(request.getfixturevalue("pg_url"), table)


def forbid_row_probes(session: SourceSession, base_sql: str,
                      monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make any data probe fail the test; return the list of catalog queries (run raw
    through `catalog_query`, or streamed)."""
    streamed: list[str] = []
    real_stream = session.stream
    real_catalog_query = session.catalog_query

    def no_scalar(sql: str, params: Any = ()) -> Any:
        pytest.fail(f"describe_chunking ran a probe query: {sql}")

    def catalog_only(sql: str, params: Any, schema: pa.Schema,
                     batch_rows: int) -> Iterator[pa.RecordBatch]:
        if base_sql in sql:
            pytest.fail(f"describe_chunking read the table's rows: {sql}")
        streamed.append(sql)
        return real_stream(sql, params, schema, batch_rows)

    def catalog_reads(sql: str, params: Any = (), *, tolerate: bool = False) -> Any:
        if base_sql in sql:
            pytest.fail(f"describe_chunking read the table's rows: {sql}")
        streamed.append(sql)
        return real_catalog_query(sql, params, tolerate=tolerate)

    monkeypatch.setattr(session, "scalar", no_scalar)
    monkeypatch.setattr(session, "stream", catalog_only)
    monkeypatch.setattr(session, "catalog_query", catalog_reads)
    return streamed


@pytest.mark.parametrize("table", sorted(TABLES))
def test_describe_chunking_resolves_the_shape_from_the_catalog_alone_and_matches_the_plan(
        engine: str, table: str, request: pytest.FixtureRequest, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    url = source_url(engine, table, request, tmp_path)
    exp = export(table=table, chunk_size=10)
    expected_strategy, expected_column = TABLES[table][3]

    with open_source(url, TUNING) as session:
        streamed = forbid_row_probes(session, exp.resolved_query, monkeypatch)
        shape = describe_chunking(session, exp)

    assert isinstance(shape, ChunkShape)
    assert (shape.strategy, shape.column, shape.chunk_size) == (
        expected_strategy, expected_column, 10)
    assert streamed, "the shape must come from catalog reads"
    assert len(shape.warnings) == 1 and "chunk_column not set" in shape.warnings[0]
    assert f"'{expected_column}'" in shape.warnings[0]

    # What `check` reports is what a run plans (the plan does run the probes).
    with open_source(url, TUNING) as session:
        plan = lay_out_windows(session, exp, base_sql=exp.resolved_query,
                           table_parts=exp.table_parts, allow_downgrade=False)
    assert plan is not None
    assert (plan.strategy, plan.column, plan.size) == (
        shape.strategy, shape.column, shape.chunk_size)
    assert plan.warnings[:1] == shape.warnings


def test_describe_chunking_keeps_an_explicit_column_and_reports_no_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _sqlite_url(tmp_path, "int_pk")
    exp = export(table="int_pk", chunk_column="id", chunk_dense=True, chunk_size=7)
    with open_source(url, TUNING) as session:
        forbid_row_probes(session, exp.resolved_query, monkeypatch)
        assert describe_chunking(session, exp) == ChunkShape("dense", "id", 7, ())


@pytest.mark.parametrize(("fields", "expected"), [
    ({"query": "SELECT * FROM t", "chunk_by_key": "id"}, "chunk_by_key needs the `table:` shortcut"),
    ({"table": "t", "chunk_by_key": "id", "chunk_count": 2}, "mutually exclusive"),
    ({"query": "SELECT * FROM t"}, "chunked mode needs a chunking strategy"),
])
def test_describe_chunking_raises_the_planners_static_errors_before_touching_the_source(
        fields: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        describe_chunking(None, export(**fields))  # type: ignore[arg-type]
    assert expected in str(info.value) and "export 'orders'" in str(info.value)


def test_describe_chunking_refuses_a_missing_table_like_the_planner(tmp_path: Path) -> None:
    url = _sqlite_url(tmp_path, "int_pk")
    with open_source(url, TUNING) as session, pytest.raises(ConfigError, match="was not found"):
        describe_chunking(session, export(table="nope", chunk_size=10))
