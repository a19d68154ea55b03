"""Per-window SQL shapes (rivet_core.chunks.sql): pure, no database.

What runs against real servers is in test_chunk_planning.py; here: the exact text, the
placeholder convention (`%%` only when there are params), hostile identifiers, and that a
bound is never spliced into SQL unless it is an integer.
"""

from __future__ import annotations

import pytest

from rivet_core.chunks.model import ChunkLayout, ChunkWindow
from rivet_core.chunks.sql import DENSE_RN_COLUMN, window_count_query, window_query
from rivet_core.source.query import MYSQL, POSTGRES

BASE = "SELECT * FROM t WHERE name LIKE 'a%';"


def _plan(strategy: str, column: str = "id", **extra) -> ChunkLayout:
    return ChunkLayout("e", strategy, column, 10, (), "0" * 16, **extra)


def _w(lo: str | None, hi: str | None) -> ChunkWindow:
    return ChunkWindow(index=0, lo=lo, hi=hi, key="k")


def test_range_window_inlines_integer_bounds_and_keeps_the_base_verbatim():
    sql, params = window_query(POSTGRES, BASE, _plan("range"), _w("-20", "-11"))
    assert sql == ("SELECT * FROM (SELECT * FROM t WHERE name LIKE 'a%') AS _rivet "
                   'WHERE _rivet."id" BETWEEN -20 AND -11')
    assert params == []


def test_count_window_uses_the_same_between_shape_with_mysql_quoting():
    sql, params = window_query("mysql", "SELECT * FROM t", _plan("count"), _w("1", "9"))
    assert sql == "SELECT * FROM (SELECT * FROM t) AS _rivet WHERE _rivet.`id` BETWEEN 1 AND 9"
    assert params == []


@pytest.mark.parametrize("bad", ["1 OR 1=1", "1; DROP TABLE t", "1.5", "", None])
def test_a_non_integer_range_bound_is_refused_not_spliced(bad):
    with pytest.raises(ValueError):
        window_query(POSTGRES, BASE, _plan("range"), _w(bad, "9"))


def test_dense_window_numbers_rows_with_the_planned_order_and_exposes_the_rn_column():
    plan = _plan("dense", column="v", order_by=("v", "id", "doc"), order_by_text=("doc",))
    sql, params = window_query(POSTGRES, "SELECT * FROM t", plan, _w("11", "20"))
    assert sql == (
        'SELECT * FROM (SELECT _rivet_i.*, ROW_NUMBER() OVER (ORDER BY _rivet_i."v", '
        '_rivet_i."id", CAST(_rivet_i."doc" AS TEXT)) AS "_rivet_chunk_rn" FROM '
        '(SELECT * FROM t) AS _rivet_i) AS _rivet_w WHERE _rivet_w."_rivet_chunk_rn" '
        "BETWEEN 11 AND 20"
    )
    assert params == [] and DENSE_RN_COLUMN == "_rivet_chunk_rn"


def test_dense_window_without_tie_breakers_orders_by_the_column():
    sql, _ = window_query(MYSQL, "SELECT * FROM t", _plan("dense", column="v"), _w("1", "5"))
    assert "ORDER BY _rivet_i.`v`)" in sql


def test_day_window_binds_iso_dates_and_escapes_percent_signs():
    plan = _plan("days", column="at%x")
    sql, params = window_query(POSTGRES, BASE, plan, _w("2024-01-29", "2024-02-05"))
    assert sql == ("SELECT * FROM (SELECT * FROM t WHERE name LIKE 'a%%') AS _rivet "
                   'WHERE _rivet."at%%x" >= %s AND _rivet."at%%x" < %s')
    assert params == ["2024-01-29", "2024-02-05"]


@pytest.mark.parametrize(
    ("lo", "hi", "where", "params"),
    [
        (None, "b", ' WHERE _rivet."k" <= %s', ["b"]),
        ("b", "d", ' WHERE _rivet."k" > %s AND _rivet."k" <= %s', ["b", "d"]),
        ("d", None, ' WHERE _rivet."k" > %s', ["d"]),
    ],
)
def test_keyset_window_is_lower_exclusive_upper_inclusive(lo, hi, where, params):
    sql, got = window_query(POSTGRES, BASE, _plan("keyset", column="k"), _w(lo, hi))
    assert sql == "SELECT * FROM (SELECT * FROM t WHERE name LIKE 'a%%') AS _rivet" + where
    assert got == params


def test_an_unbounded_keyset_window_reads_everything_without_params():
    sql, params = window_query(POSTGRES, BASE, _plan("keyset", column="k"), _w(None, None))
    assert sql == "SELECT * FROM (SELECT * FROM t WHERE name LIKE 'a%') AS _rivet"
    assert params == []


def test_hostile_column_names_stay_one_quoted_identifier():
    sql, _ = window_query(POSTGRES, "SELECT 1", _plan("range", column='x" OR 1=1 --'), _w("0", "1"))
    assert '_rivet."x"" OR 1=1 --" BETWEEN 0 AND 1' in sql
    sql, _ = window_query(MYSQL, "SELECT 1", _plan("range", column="x` OR 1=1"), _w("0", "1"))
    assert "_rivet.`x`` OR 1=1` BETWEEN 0 AND 1" in sql


def test_window_count_query_wraps_the_window_sql():
    sql, params = window_count_query(POSTGRES, "SELECT * FROM t", _plan("keyset", column="k"),
                                     _w("a", None))
    assert sql == ('SELECT COUNT(*) FROM (SELECT * FROM (SELECT * FROM t) AS _rivet '
                   'WHERE _rivet."k" > %s) AS _rc')
    assert params == ["a"]


def test_an_unknown_strategy_is_an_error():
    with pytest.raises(ValueError, match="unknown chunk strategy"):
        window_query(POSTGRES, "SELECT 1", _plan("range").__class__(
            "e", "hash", "id", 1, (), "0" * 16), _w("1", "2"))
