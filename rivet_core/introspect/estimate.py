"""Cheap row estimates for a table or a query — the progress reporter's ETA and `init`'s
mode heuristics both need "about how many rows", neither may pay for a full COUNT(*).

Order of evidence, first that answers wins:

1. Catalog statistics: PostgreSQL `pg_class.reltuples`, MySQL/MariaDB
   `information_schema.tables.table_rows`, SQLite `sqlite_stat1` (after ANALYZE). A zero
   or negative value means "never analyzed" on every engine and counts as unknown — a stale
   zero must not make a big table look empty.
2. A *bounded* count, `SELECT count(*) FROM (SELECT 1 FROM t LIMIT cap)`: exact for small
   tables (which is exactly when statistics are most often missing: freshly loaded), and
   it stops reading at `cap` rows, so it never scans a huge table.
3. The planner's estimate (`EXPLAIN`): PostgreSQL `Plan Rows`, MySQL `rows` of a
   single-table plan. Used for queries, and for a table whose bounded count hit the cap
   (which then reports the larger of the two: the cap is a proven lower bound).

Unknown is `None`, never a guess dressed up as a number.
"""

from __future__ import annotations

from pathlib import Path

from rivet_core.catalog import row_estimate
from rivet_core.config.models import SourceConfig
from rivet_core.config.tuning import resolve_tuning
from rivet_core.introspect.session import qualified, raw_rows, split_table
from rivet_core.source import open_source
from rivet_core.source.base import SourceSession, strip_sql

#: Rows a bounded count may read before it gives up and defers to the planner estimate.
BOUNDED_COUNT_CAP = 1_000_000


def estimate_rows(source: SourceConfig, *, table: str | None = None, query: str | None = None,
                  config_dir: Path | None = None) -> int | None:
    """About how many rows `table` (`name` / `schema.name`) or `query` returns; None if unknown.

    Opens its own short read session on `source` (url_env / url_file resolved against
    `config_dir`, default the working directory). Pass exactly one of `table`/`query`.
    """
    if (table is None) == (query is None):
        raise ValueError("estimate_rows needs exactly one of table= or query=")
    url = source.resolve_url(config_dir)
    tuning = resolve_tuning(source.tuning.as_dict() if source.tuning else None, None,
                            source.environment)
    with open_source(url, tuning, engine=source.type) as session:
        return estimate_rows_in(session, table=table, query=query)


def estimate_rows_in(session: SourceSession, *, table: str | None = None,
                     query: str | None = None, cap: int = BOUNDED_COUNT_CAP) -> int | None:
    """`estimate_rows` on an already open session (introspection reuses one snapshot)."""
    if table is not None:
        schema, name = split_table(table)
        stats = row_estimate(session, schema, name)  # rivet_core/catalog/tables.py
        if stats is not None:
            return stats
        counted = bounded_count(session, f"SELECT 1 FROM {qualified(session, schema, name)}", cap)
        if counted is not None and counted < cap:
            return counted
        planned = explain_estimate(session, f"SELECT * FROM {qualified(session, schema, name)}")
        return max(planned or 0, counted or 0) or None
    assert query is not None
    planned = explain_estimate(session, query)
    if planned is not None:
        return planned
    if session.dialect.counts_queries:  # no planner estimate at all (SQLite: demos and tests)
        counted = bounded_count(session, query, cap)
        return counted if counted is not None and counted < cap else None
    return None


def bounded_count(session: SourceSession, select_sql: str, cap: int) -> int | None:
    """`count(*)` of `select_sql` reading at most `cap` rows (None if the query fails)."""
    sql = f"SELECT count(*) FROM ({strip_sql(select_sql)} LIMIT {int(cap)}) AS _rivet_n"
    rows = raw_rows(session, sql, tolerate=True)
    return int(rows[0][0]) if rows else None


def explain_estimate(session: SourceSession, query: str) -> int | None:
    """The planner's row estimate of `query` (PG `Plan Rows`; MySQL single-table `rows`)."""
    return session.dialect.explain_rows(session, strip_sql(query))
