"""SQLite's catalog SQL and rules (the `SourceDialect` of rivet_core/source/dialect.py).

SQLite is for demos and tests: keys come from the PRAGMA table functions, row statistics
only from `sqlite_stat1` (it exists after ANALYZE), and there is no planner row estimate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rivet_core.source.dialect import (
    CatalogSession,
    IndexAccess,
    RawResult,
    TableKeys,
    TableStats,
    catalog_rows,
    fetch_all,
    positive_int,
)
from rivet_core.source.query import quote_ident_pg

_PLACEHOLDER = re.compile(r"%%|%s")


def translate_placeholders(sql: str, replacement: str = "?") -> str:
    """`%s` → `?` (or another token) and `%%` → `%`, the psycopg/PyMySQL escaping rule."""
    return _PLACEHOLDER.sub(lambda m: "%" if m.group(0) == "%%" else replacement, sql)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class SQLiteDialect:
    name = "sqlite"
    file_based = True
    counts_queries = True
    change_log = ""
    default_schema = ""

    def quote_ident(self, name: str) -> str:
        return quote_ident_pg(name)

    def text_cast(self, expr: str) -> str:
        return f"CAST({expr} AS TEXT)"

    def bucket_floor(self, expr: str, size: int) -> str:
        return f"({expr} - ((({expr} % {size}) + {size}) % {size}))"  # no MOD() in SQLite

    def orders_as_text(self, native_type: str) -> bool:
        return False

    def schema_is_default(self, schema: str | None) -> bool:
        return True  # one database per file: `table:` never needs a schema

    def type_note(self, native_type: str) -> str | None:
        from rivet_core.source.sqlite.types import sqlite_mapping

        if native_type == "untyped":
            return "no declared type: inferred from sampled values"
        mapping = sqlite_mapping(native_type)
        return None if mapping.exact else mapping.note

    def raw_fetch(self, connection: Any, sql: str, params: Sequence[Any],
                  tolerate: bool) -> RawResult:
        cursor = connection.execute(translate_placeholders(sql), list(params)) if params else connection.execute(sql)
        try:
            return fetch_all(cursor)
        finally:
            cursor.close()

    # --- catalog --------------------------------------------------------------------------

    def table_keys(self, session: CatalogSession, schema: str | None, name: str) -> TableKeys:
        quoted = _literal(name)
        columns = catalog_rows(session, (
            f"SELECT name, \"notnull\", pk FROM pragma_table_info({quoted}) ORDER BY cid")) or []
        pk = tuple(str(c) for c, _, n in sorted(columns, key=lambda r: r[2]) if n)
        unique: list[str] = []
        if len(pk) == 1:
            unique.append(pk[0])
        for (index,) in catalog_rows(session, (
                f"SELECT name FROM pragma_index_list({quoted}) WHERE \"unique\" = 1 AND partial = 0")) or []:
            cols = catalog_rows(session, f"SELECT name FROM pragma_index_info({_literal(str(index))})") or []
            if len(cols) == 1 and cols[0][0] is not None and cols[0][0] not in unique:
                unique.append(str(cols[0][0]))
        not_null = {str(c) for c, nn, n in columns if nn or (n and len(pk) == 1)}
        return TableKeys(columns=[str(c) for c, _, _ in columns], not_null=not_null,
                         primary_key=pk, unique=unique)

    def table_stats(self, session: CatalogSession, schema: str | None, name: str, *,
                    exact_names: bool) -> TableStats:
        rows = catalog_rows(session, "SELECT stat FROM sqlite_master m JOIN sqlite_stat1 s "
                            "ON s.tbl = m.name WHERE m.type = 'table' AND m.name = %s AND s.idx IS NULL",
                            [name], tolerate=True)  # sqlite_stat1 exists only after ANALYZE
        stats = [str(r[0]).split()[0] for r in rows or [] if r[0]]
        return TableStats(row_estimate=positive_int(stats[0]) if stats else None, avg_row_bytes=None)

    def table_exists(self, session: CatalogSession, schema: str | None, name: str) -> bool:
        return bool(catalog_rows(session, "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') "
                                 "AND name = %s", [name]))

    def list_tables(self, session: CatalogSession, schema: str | None) -> list[str]:
        rows = catalog_rows(session, "SELECT name FROM sqlite_master WHERE type = 'table' AND "
                            r"name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY 1")
        return [str(r[0]) for r in rows or []]

    def list_indexes(self, session: CatalogSession, schema: str | None,
                     name: str) -> list[tuple[str, tuple[str, ...], bool]]:
        found: dict[str, tuple[list[str], bool]] = {}
        for index, unique in catalog_rows(session, "SELECT name, \"unique\" FROM pragma_index_list(%s)",
                                          [name]) or []:
            cols = catalog_rows(session, "SELECT name FROM pragma_index_info(%s) ORDER BY seqno",
                                [index]) or []
            found[str(index)] = ([str(c[0] or "<expression>") for c in cols], bool(unique))
        pk = [str(r[0]) for r in catalog_rows(session, "SELECT name FROM pragma_table_info(%s) "
                                              "WHERE pk > 0 ORDER BY pk", [name]) or []]
        if pk and not any(cols == pk for cols, _ in found.values()):
            found["<rowid primary key>"] = (pk, True)  # INTEGER PRIMARY KEY is the rowid itself
        return [(n, tuple(cols), unique) for n, (cols, unique) in found.items()]

    # --- EXPLAIN --------------------------------------------------------------------------

    def explain_rows(self, session: CatalogSession, sql: str) -> int | None:
        return None  # SQLite's planner gives no row estimate

    def index_access(self, session: CatalogSession, sql: str, value: Any) -> IndexAccess:
        """`EXPLAIN QUERY PLAN` says `SEARCH … USING … INDEX`/`PRIMARY KEY` or `SCAN`."""
        rows = catalog_rows(session, f"EXPLAIN QUERY PLAN {sql}", [value], tolerate=True)
        if not rows:
            return IndexAccess(None, "EXPLAIN QUERY PLAN failed for the export's query")
        details = [str(r[-1]) for r in rows]
        if any("USING" in d and ("INDEX" in d or "PRIMARY KEY" in d) for d in details):
            return IndexAccess(True, "; ".join(details))
        return IndexAccess(False, "; ".join(details) + " (no usable index)")


DIALECT = SQLiteDialect()
