"""Window fingerprints (rivet_core/chunks/fingerprint.py) against the window queries themselves.

The oracle is each window's own `window_count_query` / a MAX over `window_query`: the
grouped query must give every window exactly the rows its export would read — on
PostgreSQL, MariaDB and SQLite, for range windows (negative ids included), day windows
and keyset windows (text keys with `%` and quotes, uuid keys), for all windows at once and
for a non-contiguous subset.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from rivet_core.chunks.fingerprint import EMPTY, fingerprint_queries, read_fingerprints
from rivet_core.chunks.model import ChunkLayout, ChunkWindow
from rivet_core.chunks.probes import fetch_rows, sample_boundaries
from rivet_core.chunks.sql import window_count_query, window_query
from rivet_core.chunks.windows import day_windows, keyset_windows, range_windows
from rivet_core.config.tuning import ResolvedTuning
from rivet_core.source import open_source
from tests.helpers import db_exec

TUNING = ResolvedTuning(statement_timeout_s=30, lock_timeout_s=5)


@pytest.fixture(params=["pg", "mysql", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'src.db'}"
    return request.getfixturevalue("pg_url" if request.param == "pg" else "mysql_url")


def execute(url: str, *sql: str) -> None:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            for stmt in sql:
                conn.execute(stmt)
        return
    db_exec(url, *sql)


def engine(url: str) -> str:
    return "postgres" if url.startswith("postgres") else "mysql" if url.startswith("mysql") else "sqlite"


def fingerprints(url: str, strategy: str, column: str, size: int, windows: list[ChunkWindow],
                 change: str | None, base: str = "SELECT * FROM t") -> dict[str, Any]:
    with open_source(url, TUNING) as session:
        found = {}
        for query in fingerprint_queries(engine(url), base, strategy, column, size, windows, change):
            found.update(read_fingerprints(fetch_rows(session, query.sql, query.params), query, change))
    return {w.key: found.get(w.key, EMPTY) for w in windows}


def oracle(url: str, strategy: str, column: str, size: int, windows: list[ChunkWindow], change: str | None,
           base: str = "SELECT * FROM t") -> dict[str, tuple[int, Any]]:
    """(count, max change) of each window from its own window query."""
    plan = ChunkLayout("t", strategy, column, size, tuple(windows), "0")
    out = {}
    with open_source(url, TUNING) as session:
        for w in windows:
            sql, params = window_count_query(engine(url), base, plan, w)
            count = int(session.scalar(sql, params))
            top = None
            if change:
                inner, params = window_query(engine(url), base, plan, w)
                top = session.scalar(f"SELECT MAX(_o.{session.quote_ident(change)}) FROM ({inner}) AS _o", params)
            out[w.key] = (count, top)
    return out


def assert_agree(found: dict[str, Any], expected: dict[str, tuple[int, Any]], change: str | None) -> None:
    assert {k: f.rows for k, f in found.items()} == {k: c for k, (c, _) in expected.items()}
    for k, f in found.items():
        assert (f.latest is None) == (not change or expected[k][1] is None), k
    assert sum(c for c, _ in expected.values()) > 0


def test_range_windows_group_by_their_grid_lower_bound_negative_ids_included(url: str) -> None:
    execute(url, "CREATE TABLE t (id bigint PRIMARY KEY, v integer NOT NULL, updated_at integer NOT NULL)")
    ids = [i for i in range(-250, 420, 3) if i % 7]
    execute(url, "INSERT INTO t VALUES " + ", ".join(f"({i}, {i % 11}, {(i * 37) % 1000})" for i in ids))
    windows = list(range_windows(min(ids), max(ids), 100, column="id"))
    assert int(windows[0].lo) < 0
    found = fingerprints(url, "range", "id", 100, windows, "updated_at")
    expected = oracle(url, "range", "id", 100, windows, "updated_at")
    assert_agree(found, expected, "updated_at")
    assert all(found[k].latest == str(expected[k][1]) for k in found)
    subset = [windows[0], windows[3], windows[5]]  # not contiguous: rows between are left out
    assert fingerprints(url, "range", "id", 100, subset, None) == {
        w.key: type(EMPTY)(expected[w.key][0]) for w in subset}


def test_day_and_keyset_windows_group_by_their_bounds_all_or_a_subset(url: str) -> None:
    execute(url, "CREATE TABLE t (k varchar(40) PRIMARY KEY, d date NOT NULL, n integer NOT NULL)")
    rows = [(f"key{i:04d}" + ("%" if i % 5 == 0 else "'" if i % 7 == 0 else ""),
             dt.date(2024, 1, 1) + dt.timedelta(days=i % 40), i) for i in range(300)]
    execute(url, "INSERT INTO t VALUES " + ", ".join(
        "('{}', '{}', {})".format(k.replace("'", "''"), d.isoformat(), n) for k, d, n in rows))
    days = list(day_windows(dt.date(2024, 1, 1), dt.date(2024, 2, 9), 7))
    assert_agree(fingerprints(url, "days", "d", 7, days, "n"), oracle(url, "days", "d", 7, days, "n"), "n")
    gappy = [days[0], days[2], days[5]]  # a subset: each window tests its own lower bound
    assert_agree(fingerprints(url, "days", "d", 7, gappy, None), oracle(url, "days", "d", 7, gappy, None), None)

    with open_source(url, TUNING) as session:
        bounds = sample_boundaries(session, "SELECT * FROM t", "k", 37)
    keys = list(keyset_windows(bounds))
    assert len(keys) == 9 and keys[0].lo is None and keys[-1].hi is None
    assert_agree(fingerprints(url, "keyset", "k", 37, keys, "n"), oracle(url, "keyset", "k", 37, keys, "n"), "n")
    some = [keys[1], keys[4], keys[-1]]
    assert_agree(fingerprints(url, "keyset", "k", 37, some, None), oracle(url, "keyset", "k", 37, some, None), None)
    [one] = keyset_windows([])  # a single unbounded window: no parameter at all
    assert fingerprints(url, "keyset", "k", 37, [one], None)[one.key].rows == 300


def test_uuid_keyset_windows_on_postgresql(pg_url: str) -> None:
    db_exec(pg_url, "CREATE TABLE t (id uuid PRIMARY KEY, updated_at timestamptz NOT NULL)",
            "INSERT INTO t SELECT md5(g::text)::uuid, timestamptz '2026-01-01' + g * interval '1 second' "
            "FROM generate_series(1, 500) g")
    with open_source(pg_url, TUNING) as session:
        windows = list(keyset_windows(sample_boundaries(session, "SELECT * FROM t", "id", 60)))
    found = fingerprints(pg_url, "keyset", "id", 60, windows, "updated_at")
    assert_agree(found, oracle(pg_url, "keyset", "id", 60, windows, "updated_at"), "updated_at")
    assert sum(f.rows for f in found.values()) == 500


def test_a_query_with_a_literal_percent_keeps_it_whether_or_not_parameters_are_bound(pg_url: str) -> None:
    db_exec(pg_url, "CREATE TABLE t (id bigint PRIMARY KEY, s text NOT NULL)",
            "INSERT INTO t SELECT g, CASE WHEN g % 2 = 0 THEN 'a%b' ELSE 'plain' END FROM generate_series(1, 90) g")
    base = "SELECT * FROM t WHERE s LIKE 'a%'"
    windows = list(range_windows(1, 90, 25, column="id"))
    assert sum(f.rows for f in fingerprints(pg_url, "range", "id", 25, windows, None, base).values()) == 45
    keys = list(keyset_windows(["30", "60"]))
    assert sum(f.rows for f in fingerprints(pg_url, "keyset", "id", 30, keys, None, base).values()) == 45


def test_only_grid_strategies_are_fingerprinted() -> None:
    with pytest.raises(ValueError, match="cannot be fingerprinted"):
        fingerprint_queries("postgres", "SELECT 1", "dense", "id", 10, [ChunkWindow(0, "1", "10", "x")])
    assert fingerprint_queries("postgres", "SELECT 1", "range", "id", 10, []) == []
