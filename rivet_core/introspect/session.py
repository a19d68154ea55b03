"""Catalog access on an open `SourceSession`: raw statements the streaming path cannot run.

Introspection needs statements that are not plain SELECTs — `EXPLAIN …`, PRAGMAs, catalog
reads whose result must not go through `describe` (MySQL wraps a probe in a derived table,
PostgreSQL declares a cursor, and neither accepts EXPLAIN there). These helpers run them on
the session's own connection (`SourceSession.catalog_query`), so they see the same
snapshot and the same credentials as the export, and turn driver errors into the usual
redacted `SourceError`/`TransientError`.

`raw_rows(..., tolerate=True)` runs a statement that may legitimately fail (EXPLAIN of a
user query the planner rejects): on PostgreSQL it is wrapped in a SAVEPOINT so the failure
does not abort the snapshot transaction, and the failure returns None instead of raising.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rivet_core.source.base import SourceSession


def raw_rows(session: SourceSession, sql: str, params: Sequence[Any] = (), *,
             tolerate: bool = False) -> list[tuple[Any, ...]] | None:
    """All rows of `sql` (placeholders `%s`) run directly on the session's connection."""
    result = raw_query(session, sql, params, tolerate=tolerate)
    return None if result is None else result[1]


def raw_query(session: SourceSession, sql: str, params: Sequence[Any] = (), *,
              tolerate: bool = False) -> tuple[list[str], list[tuple[Any, ...]]] | None:
    """(column names, rows) of `sql`; None only when `tolerate` and the statement failed."""
    return session.catalog_query(sql, params, tolerate=tolerate)


def raw_scalar(session: SourceSession, sql: str, params: Sequence[Any] = ()) -> Any:
    """First column of the first row of `sql` (None when there is no row)."""
    rows = raw_rows(session, sql, params)
    return rows[0][0] if rows else None


def split_table(table: str) -> tuple[str | None, str]:
    """`schema.name` or `name` → (schema, name); a third part is refused."""
    parts = table.split(".")
    if len(parts) == 1 and parts[0]:
        return None, parts[0]
    if len(parts) == 2 and all(parts):
        return parts[0], parts[1]
    raise ValueError(f"table '{table}' must be `<name>` or `<schema>.<name>`")


def qualified(session: SourceSession, schema: str | None, name: str) -> str:
    """The dialect-quoted `schema.name` (or `name`)."""
    quoted = session.quote_ident(name)
    return f"{session.quote_ident(schema)}.{quoted}" if schema else quoted
