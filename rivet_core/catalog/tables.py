"""Catalog questions about tables, asked on an open `SourceSession` (its snapshot, its
credentials). Each function answers one question for every engine through
`session.dialect`; none reads a table's rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from rivet_core.source.base import SourceSession


@dataclass
class TableInfo:
    """What the catalog says about a `table:` export's table (the chunk planner's view)."""

    columns: list[str]
    not_null: set[str]
    #: Primary key columns in key order (empty when there is none).
    primary_key: tuple[str, ...]
    #: Single-column, non-partial PRIMARY/UNIQUE keys (primary key first).
    unique: list[str]
    row_estimate: int | None
    avg_row_bytes: float | None
    case_insensitive: bool = False

    def find(self, column: str) -> str | None:
        """The catalog spelling of `column` (MySQL column names are case-insensitive)."""
        if column in self.columns:
            return column
        if self.case_insensitive:
            for name in self.columns:
                if name.lower() == column.lower():
                    return name
        return None


@dataclass(frozen=True)
class IndexInfo:
    name: str
    columns: tuple[str, ...]
    unique: bool


def table_info(session: SourceSession, table_parts: tuple[str | None, str]) -> TableInfo:
    """Columns, NOT NULL, keys and statistics of a `table:` export's table, its name as
    written in the export's SQL (`export.table_parts`). A table that does not exist has no
    columns."""
    schema, name = table_parts
    keys = session.dialect.table_keys(session, schema, name)
    stats = session.dialect.table_stats(session, schema, name, exact_names=False)
    return TableInfo(
        columns=keys.columns, not_null=keys.not_null, primary_key=keys.primary_key,
        unique=keys.unique, row_estimate=stats.row_estimate, avg_row_bytes=stats.avg_row_bytes,
        case_insensitive=keys.case_insensitive,
    )


def row_estimate(session: SourceSession, schema: str | None, name: str) -> int | None:
    """The catalog's row statistic of the table named exactly `schema.name` (PostgreSQL
    `pg_class.reltuples`, MySQL `information_schema.tables.table_rows`, SQLite
    `sqlite_stat1` after ANALYZE); None when there is none — zero or negative means
    "never analyzed" on every engine, so a stale zero never makes a big table look empty."""
    return session.dialect.table_stats(session, schema, name, exact_names=True).row_estimate


def table_exists(session: SourceSession, schema: str | None, name: str) -> bool:
    """True when the table (or view) named exactly `schema.name` exists and is visible."""
    return session.dialect.table_exists(session, schema, name)


def list_tables(session: SourceSession, schema: str | None) -> list[str]:
    """Base tables of `schema` (PostgreSQL default: `public`; MySQL: the URL's database)."""
    return session.dialect.list_tables(session, schema)


def list_indexes(session: SourceSession, schema: str | None, name: str) -> list[IndexInfo]:
    """Every index of the table with its key columns in order."""
    return [IndexInfo(n, cols, unique) for n, cols, unique in session.dialect.list_indexes(session, schema, name)]
