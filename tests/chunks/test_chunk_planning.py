"""Chunk planning against real PostgreSQL and MariaDB (rivet_core.chunks.layout + sql).

Every "covers the source" test plans an export through a real `SourceSession`, runs every
`window_query` back through the source, and compares the union of the windows with the
table read by an independent connection (`db_exec`): each source row exactly once.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from rivet_core.chunks.layout import lay_out_windows
from rivet_core.chunks.model import ChunkLayout
from rivet_core.chunks.sql import (
    DENSE_RN_COLUMN,
    probe_window,
    window_count_query,
    window_query,
)
from rivet_core.config.models import ExportConfig
from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import ConfigError
from rivet_core.source import open_source
from tests.helpers import db_exec

TUNING = ResolvedTuning(statement_timeout_s=30, lock_timeout_s=5)


@pytest.fixture(params=[pytest.param("pg", marks=pytest.mark.postgres),
                        pytest.param("mysql", marks=pytest.mark.mysql)])
def url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("pg_url" if request.param == "pg" else "mysql_url")


@pytest.fixture
def pg(pg_url: str) -> str:
    return pg_url


def is_pg(url: str) -> bool:
    return url.startswith("postgres")


def export(**fields: Any) -> ExportConfig:
    return ExportConfig(name="orders", mode="chunked", format="parquet",
                        destination={"type": "local", "path": "/tmp/unused"}, **fields)


def plan_of(url: str, exp: ExportConfig, **kw: Any) -> ChunkLayout | None:
    kw.setdefault("allow_downgrade", False)
    with open_source(url, TUNING) as session:
        return lay_out_windows(session, exp, base_sql=exp.resolved_query,
                           table_parts=exp.table_parts, **kw)


def must_plan(url: str, exp: ExportConfig, **kw: Any) -> ChunkLayout:
    plan = plan_of(url, exp, **kw)
    assert plan is not None
    return plan


def _read_window(session: Any, exp: ExportConfig, plan: ChunkLayout, window: Any,
                 columns: tuple[str, ...]) -> list[Any]:
    sql, params = window_query(session, exp.resolved_query, plan, window)
    schema = session.describe(sql, params)
    rows: list[Any] = []
    for batch in session.stream(sql, params, schema, 1000):
        values = [batch.column(c).to_pylist() for c in columns]
        rows.extend(zip(*values, strict=True) if len(columns) > 1 else values[0])
    if plan.strategy == "dense":
        assert schema.names[-1] == DENSE_RN_COLUMN
    count_sql, count_params = window_count_query(session, exp.resolved_query, plan, window)
    assert session.scalar(count_sql, count_params) == len(rows)
    return rows


def read_windows(url: str, exp: ExportConfig, plan: ChunkLayout,
                 columns: tuple[str, ...] = ("id",),
                 between: Callable[[], None] | None = None) -> list[list[Any]]:
    """Each window's rows (as the `columns` values) read back through the source.

    With `between`, every window is read in its own session (like separate workers or a
    resumed run) and `between()` runs before each one."""
    if between is not None:
        out = []
        for window in plan.windows:
            between()
            with open_source(url, TUNING) as session:
                out.append(_read_window(session, exp, plan, window, columns))
        return out
    with open_source(url, TUNING) as session:
        return [_read_window(session, exp, plan, w, columns) for w in plan.windows]


def assert_exactly_once(windows: list[list[Any]], source: list[Any]) -> None:
    union = [v for rows in windows for v in rows]
    assert Counter(union) == Counter(source), "windows must return every source row exactly once"


def source_ids(url: str, table: str = "t", column: str = "id") -> list[Any]:
    return [r[0] for r in db_exec(url, f"SELECT {column} FROM {table}")]


def insert_ids(url: str, table: str, ids: list[int], extra: Callable[[int], str] = lambda i: "") -> None:
    values = ", ".join(f"({i}{extra(i)})" for i in ids)
    db_exec(url, f"INSERT INTO {table} VALUES {values}")


def analyze(url: str, table: str) -> None:
    db_exec(url, f"ANALYZE {table}" if is_pg(url) else f"ANALYZE TABLE {table}")


# --------------------------------------------------------------------------- range


def test_gappy_ids_give_grid_aligned_windows_with_empty_middles_and_every_id_once(url):
    db_exec(url, "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)")
    ids = [3, 4, 5, 250, 251, 999, 1000, 1099]
    insert_ids(url, "t", ids, lambda i: f", {i % 7}")
    exp = export(table="t", chunk_column="id", chunk_size=100)
    plan = must_plan(url, exp)

    assert plan.strategy == "range" and plan.size == 100
    assert [(w.lo, w.hi) for w in plan.windows] == [(str(k * 100), str(k * 100 + 99)) for k in range(11)]
    assert plan.windows[2].key == "id_000000000000200-000000000000299"
    windows = read_windows(url, exp, plan)
    assert [len(rows) for rows in windows] == [3, 0, 2, 0, 0, 0, 0, 0, 0, 1, 2]
    assert_exactly_once(windows, source_ids(url))

    # grow the table: every existing window keeps its bounds and key
    insert_ids(url, "t", [1100, 1450], lambda i: ", 0")
    grown = must_plan(url, exp)
    assert grown.windows[: len(plan.windows)] == plan.windows and len(grown.windows) == 15
    assert plan.plan_hash == grown.plan_hash  # hash covers (base, column, kind), not the windows
    assert_exactly_once(read_windows(url, exp, grown), source_ids(url))


@pytest.mark.parametrize(("rows", "windows"), [(1, 1), (30, 3), (31, 4)])
def test_one_row_and_rows_equal_to_k_times_size_and_one_more(url, rows, windows):
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY)")
    insert_ids(url, "t", [42] if rows == 1 else list(range(rows)))
    exp = export(table="t", chunk_size=10, chunk_checkpoint=True)
    plan = must_plan(url, exp, allow_downgrade=True)  # checkpoint is an explicit shape
    assert len(plan.windows) == windows
    got = read_windows(url, exp, plan)
    if rows == 1:
        assert (plan.windows[0].lo, plan.windows[0].hi) == ("40", "49")
    else:
        assert [len(w) for w in got] == [10] * (rows // 10) + ([1] if rows % 10 else [])
    assert_exactly_once(got, source_ids(url))


@pytest.mark.parametrize("fields", [{"chunk_column": "id"}, {"chunk_column": "at", "chunk_by_days": 3},
                                    {"chunk_column": "id", "chunk_dense": True},
                                    {"chunk_column": "id", "chunk_count": 3}])
def test_an_empty_table_plans_zero_windows_and_its_schema_can_still_be_probed(url, fields):
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY, at DATE)")
    exp = export(table="t", chunk_size=10, **fields)
    plan = must_plan(url, exp)
    assert plan.windows == ()
    with open_source(url, TUNING) as session:
        sql, params = window_query(session, exp.resolved_query, plan, probe_window(plan))
        assert session.describe(sql, params).names[:2] == ["id", "at"]


def test_count_windows_split_the_id_span_and_cover_every_id(url):
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY)")
    insert_ids(url, "t", [-7, -3, 0, 5, 17, 18, 40])
    exp = export(table="t", chunk_column="id", chunk_count=4)
    plan = must_plan(url, exp)
    assert plan.strategy == "count" and plan.size == 12 and plan.kind == "count_4"
    assert [(w.lo, w.hi) for w in plan.windows] == [("-7", "4"), ("5", "16"), ("17", "28"),
                                                    ("29", "40")]
    assert_exactly_once(read_windows(url, exp, plan), source_ids(url))


def test_a_table_export_without_chunk_column_auto_resolves_the_integer_primary_key(url, caplog):
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(10))")
    insert_ids(url, "t", [1, 2, 3], lambda i: f", 'n{i}'")
    with caplog.at_level(logging.WARNING, logger="rivet.chunks"):
        plan = must_plan(url, export(table="t", chunk_size=2))
    assert (plan.strategy, plan.column) == ("range", "id")
    assert any("chunk_column not set — auto-resolved to 'id'" in w for w in plan.warnings)
    assert "chunk_column not set — auto-resolved to 'id'" in caplog.text


def test_a_query_export_plans_range_windows_over_its_own_rows(url):
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(10))")
    insert_ids(url, "t", list(range(1, 26)), lambda i: f", '{'a' if i % 2 else 'b'}{i}'")
    exp = export(query="SELECT id, name FROM t WHERE name LIKE 'a%'", chunk_column="id",
                 chunk_size=10)
    plan = must_plan(url, exp)
    assert_exactly_once(read_windows(url, exp, plan), list(range(1, 26, 2)))


# --------------------------------------------------------------------------- guards


def test_null_in_the_chunk_column_is_refused(url):
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    insert_ids(url, "t", [1, 2], lambda i: ", NULL" if i == 2 else ", 5")
    with pytest.raises(ConfigError) as info:
        plan_of(url, export(table="t", chunk_column="v", chunk_size=10))
    assert "found NULL in chunk_column 'v' — rows with NULL would never be exported; use " \
        "chunk_by_key or filter them in the query" in str(info.value)
    assert info.value.exit_code == 1 and "export 'orders'" in str(info.value)


def test_a_text_range_column_on_a_table_export_is_refused(url):
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL)")
    insert_ids(url, "t", [1], lambda i: ", '1'")
    with pytest.raises(ConfigError, match="chunk_column 'code' .* is not an integer-family column"):
        plan_of(url, export(table="t", chunk_column="code"))


def test_a_sparse_range_plan_is_refused_when_the_row_estimate_is_known(url):
    db_exec(url, "CREATE TABLE t (id BIGINT PRIMARY KEY)")
    insert_ids(url, "t", [*range(100), 1_000_000])
    analyze(url, "t")
    with pytest.raises(ConfigError) as info:
        plan_of(url, export(table="t", chunk_column="id", chunk_size=100))
    message = str(info.value)
    assert "refusing to run a sparse range plan (10,001 windows for ~" in message
    assert "use chunk_dense, chunk_count or a larger chunk_size" in message
    # chunk_count is the documented way out
    plan = must_plan(url, export(table="t", chunk_column="id", chunk_count=4))
    assert len(plan.windows) == 4


def test_without_a_row_estimate_a_large_plan_only_warns(pg):
    db_exec(pg, "CREATE TABLE t (id BIGINT PRIMARY KEY)")
    insert_ids(pg, "t", [0, 250_000])  # never analyzed: reltuples = -1 → unknown
    plan = must_plan(pg, export(table="t", chunk_column="id", chunk_size=100))
    assert len(plan.windows) == 2501 and plan.row_estimate is None
    assert any("no row estimate" in w for w in plan.warnings)


def test_more_than_fifty_million_windows_are_refused(pg):
    db_exec(pg, "CREATE TABLE t (id BIGINT PRIMARY KEY)")
    insert_ids(pg, "t", [-(2**62), 2**62])
    with pytest.raises(ConfigError, match=r"more than the 50,000,000 limit"):
        plan_of(pg, export(table="t", chunk_column="id", chunk_size=1000))


def test_fractional_bounds_are_refused_but_whole_decimals_are_accepted(url):
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY, amount NUMERIC(10,3) NOT NULL)")
    insert_ids(url, "t", [1, 2], lambda i: f", {i * 21}.000")
    exp = export(query="SELECT id, amount FROM t", chunk_column="amount", chunk_size=10)
    plan = must_plan(url, exp)  # 21.000 .. 42.000 are whole numbers
    assert [(w.lo, w.hi) for w in plan.windows] == [("20", "29"), ("30", "39"), ("40", "49")]
    assert_exactly_once(read_windows(url, exp, plan), [1, 2])

    db_exec(url, "INSERT INTO t VALUES (3, 42.5)")
    with pytest.raises(ConfigError, match="fractional.*use chunk_by_key"):
        plan_of(url, exp)


def test_a_small_table_without_an_explicit_shape_falls_back_to_a_full_export(url, caplog):
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY)")
    insert_ids(url, "t", list(range(1, 51)))
    analyze(url, "t")
    with caplog.at_level(logging.INFO, logger="rivet.chunks"):
        assert plan_of(url, export(table="t", chunk_size=1000), allow_downgrade=True) is None
    assert "running it as one full export" in caplog.text
    # an explicit shape keeps it chunked, and so does the Dagster planner's allow_downgrade=False
    assert plan_of(url, export(table="t", chunk_size=1000, chunk_checkpoint=True),
                   allow_downgrade=True) is not None
    assert plan_of(url, export(table="t", chunk_size=1000)) is not None


def test_chunk_size_memory_mb_sizes_windows_from_the_table_statistics(url):
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY, pad VARCHAR(200))")
    insert_ids(url, "t", list(range(1, 201)), lambda i: ", '" + "x" * 150 + "'")
    analyze(url, "t")
    plan = must_plan(url, export(table="t", chunk_size_memory_mb=1))
    assert plan.size == 10_000  # 1 MiB / (≥ 150 B/row) < 10,000 → clamped up


def test_a_table_without_any_key_has_no_safe_shape(url):
    db_exec(url, "CREATE TABLE t (a INT, b VARCHAR(5))")
    with pytest.raises(ConfigError) as info:
        plan_of(url, export(table="t"))
    assert "found no safe shape" in str(info.value)
    assert "chunked mode needs a chunking strategy. Pick one:" in str(info.value)


# --------------------------------------------------------------------------- dense


def test_dense_windows_over_heavy_ties_return_every_row_once_with_a_key_tie_breaker(url):
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)")
    insert_ids(url, "t", list(range(1, 301)), lambda i: f", {i % 2}")
    exp = export(table="t", chunk_column="v", chunk_dense=True, chunk_size=7)
    plan = must_plan(url, exp)
    assert plan.strategy == "dense" and plan.order_by == ("v", "id") and len(plan.windows) == 43
    assert plan.kind == "dense_rn"
    assert_exactly_once(read_windows(url, exp, plan), source_ids(url))


def test_dense_windows_stay_exact_when_the_physical_row_order_changes_between_windows(url):
    # Ties on v are broken by the primary key; without it ROW_NUMBER() follows the physical
    # order, which the no-op UPDATE below reshuffles (PG writes new tuple versions) between
    # the separate window queries — rows would be duplicated and lost.
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)")
    insert_ids(url, "t", list(range(1, 201)), lambda i: f", {i % 2}")
    exp = export(table="t", chunk_column="v", chunk_dense=True, chunk_size=15)
    plan = must_plan(url, exp)
    turn = iter(range(1000))

    def reshuffle() -> None:
        db_exec(url, f"UPDATE t SET v = v WHERE MOD(id, 3) = {next(turn) % 3}")

    assert_exactly_once(read_windows(url, exp, plan, between=reshuffle), source_ids(url))


def test_dense_windows_on_a_query_without_keys_order_ties_by_every_column(url):
    db_exec(url, "CREATE TABLE t2 (v INT, w INT, s VARCHAR(5))")
    # heavy ties and fully duplicated rows: only (v, w, s) together orders them
    values = ", ".join(f"({i % 2}, {i % 5}, 's{i % 3}')" for i in range(240))
    db_exec(url, f"INSERT INTO t2 VALUES {values}, (NULL, 1, 'x'), (NULL, 1, 'x')")
    exp = export(query="SELECT v, w, s FROM t2", chunk_column="v", chunk_dense=True,
                 chunk_size=9)
    plan = must_plan(url, exp)
    assert plan.order_by == ("v", "w", "s")
    turn = iter(range(1000))

    def reshuffle() -> None:  # move a slice of rows to the physical end; same multiset
        w = next(turn) % 5
        rows = db_exec(url, f"SELECT v, w, s FROM t2 WHERE w = {w}")
        db_exec(url, f"DELETE FROM t2 WHERE w = {w}", "INSERT INTO t2 VALUES " + ", ".join(
            f"({'NULL' if v is None else v}, {ww}, '{ss}')" for v, ww, ss in rows))

    got = read_windows(url, exp, plan, columns=("v", "w", "s"), between=reshuffle)
    assert_exactly_once(got, [tuple(r) for r in db_exec(url, "SELECT v, w, s FROM t2")])


def test_dense_tie_breakers_compare_unordered_postgres_types_as_text(pg):
    db_exec(pg, "CREATE TABLE t3 (v INT, doc JSON)")
    values = ", ".join(f"({i % 2}, '{{\"k\": {i % 4}}}')" for i in range(40))
    db_exec(pg, f"INSERT INTO t3 VALUES {values}")
    exp = export(query="SELECT v, doc FROM t3", chunk_column="v", chunk_dense=True, chunk_size=6)
    plan = must_plan(pg, exp)
    assert plan.order_by_text == ("doc",)
    got = read_windows(pg, exp, plan, columns=("v", "doc"))
    assert_exactly_once(got, [(v, str(d).replace("'", '"')) for v, d in
                              db_exec(pg, "SELECT v, doc::text FROM t3")])


# --------------------------------------------------------------------------- days


def test_day_windows_across_a_month_boundary_cover_every_row_once(url):
    ts = "TIMESTAMPTZ" if is_pg(url) else "DATETIME(6)"
    db_exec(url, f"CREATE TABLE t (id INT PRIMARY KEY, at {ts} NOT NULL)")
    stamps = ["2024-01-27 23:59:59.999999", "2024-01-28 00:00:00", "2024-01-30 12:00:00",
              "2024-01-31 23:59:59", "2024-02-01 00:00:00", "2024-02-02 08:00:00",
              "2024-02-29 10:00:00", "2024-03-01 00:00:00"]
    zone = "+00" if is_pg(url) else ""  # PG: explicit UTC, whatever the server's TimeZone
    db_exec(url, "INSERT INTO t VALUES " + ", ".join(
        f"({i}, '{s}{zone}')" for i, s in enumerate(stamps)))
    exp = export(table="t", chunk_column="at", chunk_by_days=2)
    plan = must_plan(url, exp)
    assert plan.strategy == "days" and plan.kind == "date_2d" and len(plan.windows) == 18
    bounds = [(w.lo, w.hi) for w in plan.windows]
    # day 19749 (2024-01-27) is odd, so epoch-aligned pairs start on the 26th
    assert bounds[0] == ("2024-01-26", "2024-01-28") and bounds[-1] == ("2024-02-29", "2024-03-02")
    assert plan.windows[2].key == "2024-01-30_2024-02-01"
    got = read_windows(url, exp, plan)
    by_window = {b: sorted(rows) for b, rows in zip(bounds, got, strict=True)}
    assert by_window[("2024-01-26", "2024-01-28")] == [0]
    assert by_window[("2024-01-28", "2024-01-30")] == [1]
    assert by_window[("2024-01-30", "2024-02-01")] == [2, 3]  # half-open at the month boundary
    assert by_window[("2024-02-01", "2024-02-03")] == [4, 5]
    assert by_window[("2024-02-29", "2024-03-02")] == [6, 7]  # leap day into March
    assert_exactly_once(got, source_ids(url))


def test_day_windows_need_a_date_column_and_refuse_nulls(url):
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY, d DATE, code VARCHAR(5))")
    db_exec(url, "INSERT INTO t VALUES (1, '2024-01-01', 'a'), (2, NULL, 'b')")
    with pytest.raises(ConfigError, match="chunk_by_days needs a date or timestamp"):
        plan_of(url, export(table="t", chunk_column="code", chunk_by_days=1))
    with pytest.raises(ConfigError, match="found NULL in chunk_column 'd'"):
        plan_of(url, export(table="t", chunk_column="d", chunk_by_days=1))


# --------------------------------------------------------------------------- keyset


def test_keyset_on_an_integer_key_pages_every_row_once_and_keeps_appended_rows(url):
    db_exec(url, "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)")
    insert_ids(url, "t", [i * 3 for i in range(50)], lambda i: ", 1")
    exp = export(table="t", chunk_by_key="id", chunk_size=7)
    plan = must_plan(url, exp)
    assert plan.strategy == "keyset" and len(plan.windows) == 8 and plan.kind == "keyset_7"
    assert plan.windows[0].lo is None and plan.windows[-1].hi is None
    assert [w.key for w in plan.windows] == [f"p{i:09d}" for i in range(8)]
    got = read_windows(url, exp, plan)
    assert [len(rows) for rows in got[:-1]] == [7] * 7
    assert_exactly_once(got, source_ids(url))
    insert_ids(url, "t", [1000, 1001], lambda i: ", 2")  # appended later → the open last window
    assert sorted(read_windows(url, exp, plan)[-1]) == [147, 1000, 1001]


def test_keyset_on_a_text_key_pages_every_row_once(url):
    db_exec(url, "CREATE TABLE t (id INT NOT NULL, code VARCHAR(20) NOT NULL UNIQUE)")
    codes = [f"{chr(65 + i % 26) if i % 3 else chr(97 + i % 26)}{i:03d} x'{i % 4}" for i in range(60)]
    db_exec(url, "INSERT INTO t VALUES " + ", ".join(
        f"({i}, '{c.replace(chr(39), chr(39) * 2)}')" for i, c in enumerate(codes)))
    exp = export(table="t", chunk_by_key="code", chunk_size=8)
    plan = must_plan(url, exp)
    assert len(plan.windows) == 8
    assert_exactly_once(read_windows(url, exp, plan), source_ids(url))


def test_keyset_on_a_uuid_key_pages_every_row_once(pg):
    db_exec(pg, "CREATE TABLE t (id INT NOT NULL, u UUID PRIMARY KEY)")
    db_exec(pg, "INSERT INTO t SELECT g, gen_random_uuid() FROM generate_series(1, 45) g")
    exp = export(table="t", chunk_by_key="u", chunk_size=10)
    plan = must_plan(pg, exp)
    assert len(plan.windows) == 5
    uuid.UUID(plan.windows[0].hi)  # bounds are the database's text of the key
    assert_exactly_once(read_windows(pg, exp, plan), source_ids(pg))


def test_keyset_on_a_timestamp_key_round_trips_fractional_seconds(url):
    ts = "TIMESTAMP" if is_pg(url) else "DATETIME(6)"
    db_exec(url, f"CREATE TABLE t (id INT NOT NULL, at {ts} NOT NULL PRIMARY KEY)")
    db_exec(url, "INSERT INTO t VALUES " + ", ".join(
        f"({i}, '2024-02-{1 + i // 10:02d} 10:00:00.{i * 1111:06d}')" for i in range(30)))
    exp = export(table="t", chunk_by_key="at", chunk_size=4)
    plan = must_plan(url, exp)
    assert len(plan.windows) == 8
    assert_exactly_once(read_windows(url, exp, plan), source_ids(url))


def test_keyset_after_a_stored_high_water_key_plans_only_newer_keys(url):
    db_exec(url, "CREATE TABLE t (id INT PRIMARY KEY)")
    insert_ids(url, "t", list(range(1, 31)))
    exp = export(table="t", chunk_by_key="id", chunk_size=5, keyset_incremental=True)
    plan = must_plan(url, exp, keyset_after="12")
    assert plan.windows[0].lo == "12"
    assert_exactly_once(read_windows(url, exp, plan), list(range(13, 31)))


def test_a_decimal_keyset_key_is_refused(url):
    db_exec(url, "CREATE TABLE t (d NUMERIC(10,2) PRIMARY KEY)")
    with pytest.raises(ConfigError) as info:
        plan_of(url, export(table="t", chunk_by_key="d"))
    assert "chunk_by_key 'd' is not a usable keyset key" in str(info.value)
    assert "decimal is refused" in str(info.value)


@pytest.mark.parametrize(("ddl", "why"), [
    ("CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL)", "not a single-column PRIMARY KEY or UNIQUE"),
    ("CREATE TABLE t (id INT PRIMARY KEY, k INT UNIQUE)", "nullable"),
    ("CREATE TABLE t (id INT PRIMARY KEY)", "not a column of table"),
])
def test_a_keyset_key_must_be_a_not_null_unique_column(url, ddl, why):
    db_exec(url, ddl)
    with pytest.raises(ConfigError, match=f"is not a usable keyset key — it .*{why}"):
        plan_of(url, export(table="t", chunk_by_key="k"))


def test_a_table_with_only_a_text_key_gets_automatic_keyset_pages(url):
    db_exec(url, "CREATE TABLE t (id INT NOT NULL, code VARCHAR(10) PRIMARY KEY)")
    db_exec(url, "INSERT INTO t VALUES " + ", ".join(f"({i}, 'c{i:02d}')" for i in range(12)))
    exp = export(table="t", chunk_size=5, chunk_checkpoint=True)
    plan = must_plan(url, exp)
    assert (plan.strategy, plan.column) == ("keyset", "code")
    assert any("set chunk_by_key: code" in w for w in plan.warnings)
    assert_exactly_once(read_windows(url, exp, plan), source_ids(url))


# --------------------------------------------------------------------------- SQLite and static rules


def test_sqlite_sources_plan_range_dense_and_keyset_windows_too(tmp_path):
    import sqlite3

    path = tmp_path / "src.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, code TEXT NOT NULL UNIQUE, v INT)")
        conn.executemany("INSERT INTO t VALUES (?, ?, ?)",
                         [(i, f"c{i:03d}", i % 3) for i in range(1, 40)])
    url = f"sqlite:///{path}"
    for fields in ({"chunk_size": 10}, {"chunk_by_key": "code", "chunk_size": 7},
                   {"chunk_column": "v", "chunk_dense": True, "chunk_size": 9}):
        exp = export(table="t", **fields)
        plan = must_plan(url, exp)
        assert_exactly_once(read_windows(url, exp, plan), list(range(1, 40)))


# --------------------------------------------------------------------------- static rules (no database)


@pytest.mark.parametrize(("fields", "expected"), [
    ({"query": "SELECT * FROM t", "chunk_by_key": "id"}, "chunk_by_key needs the `table:` shortcut"),
    ({"query": "SELECT * FROM t", "chunk_size_memory_mb": 64},
     "chunk_size_memory_mb needs the `table:` shortcut"),
    ({"table": "t", "chunk_by_key": "id", "chunk_column": "id"}, "mutually exclusive"),
    ({"table": "t", "chunk_by_key": "id", "chunk_dense": True}, "mutually exclusive"),
    ({"table": "t", "chunk_by_key": "id", "chunk_by_days": 1}, "mutually exclusive"),
    ({"table": "t", "chunk_by_key": "id", "chunk_count": 2}, "mutually exclusive"),
    ({"query": "SELECT * FROM t"},
     "chunked mode needs a chunking strategy. Pick one: chunk_column, chunk_by_key, chunk_dense, "
     "chunk_by_days or chunk_count"),
])
def test_static_chunk_rules_fail_before_touching_the_source(fields, expected):
    exp = export(**fields)
    with pytest.raises(ConfigError) as info:
        lay_out_windows(None, exp, base_sql="SELECT * FROM t", table_parts=exp.table_parts)  # type: ignore[arg-type]
    assert expected in str(info.value) and "export 'orders'" in str(info.value)
