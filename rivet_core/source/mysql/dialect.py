"""MySQL / MariaDB catalog SQL and rules (the `SourceDialect` of rivet_core/source/dialect.py).

Tables are found in `information_schema` by (TABLE_SCHEMA, TABLE_NAME), the schema
defaulting to the URL's database (`COALESCE(%s, DATABASE())`).
"""

from __future__ import annotations

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
    positive,
    positive_int,
)
from rivet_core.source.query import quote_ident_mysql

_WHERE = "TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_NAME = %s"


class MySQLDialect:
    name = "mysql"
    file_based = False
    counts_queries = False
    change_log = "binlog"
    default_schema = ""

    def quote_ident(self, name: str) -> str:
        return quote_ident_mysql(name)

    def text_cast(self, expr: str) -> str:
        return f"CAST({expr} AS CHAR)"

    def bucket_floor(self, expr: str, size: int) -> str:
        return f"({expr} - MOD(MOD({expr}, {size}) + {size}, {size}))"

    def orders_as_text(self, native_type: str) -> bool:
        return False

    def schema_is_default(self, schema: str | None) -> bool:
        return schema in (None, "public")

    def type_note(self, native_type: str) -> str | None:
        return None

    def raw_fetch(self, connection: Any, sql: str, params: Sequence[Any],
                  tolerate: bool) -> RawResult:
        with connection.cursor() as cur:
            cur.execute(sql, list(params) or None)
            return fetch_all(cur)

    # --- catalog --------------------------------------------------------------------------

    def table_keys(self, session: CatalogSession, schema: str | None, name: str) -> TableKeys:
        """Columns, NOT NULL and primary key from SQLAlchemy's inspector; the single-column
        unique keys in SQL, because they must exclude prefix indexes (`SUB_PART`), which
        the inspector does not report."""
        from rivet_core.source.sqlalchemy.catalog import columns_and_primary_key

        names, not_null, primary = columns_and_primary_key(session, schema, name)
        index_rows = catalog_rows(session, (
            "SELECT INDEX_NAME, COLUMN_NAME, SUB_PART FROM information_schema.STATISTICS "
            f"WHERE {_WHERE} AND NON_UNIQUE = 0 ORDER BY INDEX_NAME, SEQ_IN_INDEX"), [schema, name]) or []
        indexes: dict[str, list[tuple[str, Any]]] = {}
        for index, column, sub_part in index_rows:
            indexes.setdefault(str(index), []).append((str(column), sub_part))
        unique: list[str] = []
        for index in sorted(indexes, key=lambda n: (n != "PRIMARY", n)):
            parts = indexes[index]
            if len(parts) == 1 and parts[0][1] is None and parts[0][0] not in unique:
                unique.append(parts[0][0])
        return TableKeys(columns=names, not_null=not_null, primary_key=primary, unique=unique,
                         case_insensitive=True)

    def table_stats(self, session: CatalogSession, schema: str | None, name: str, *,
                    exact_names: bool) -> TableStats:
        stats = catalog_rows(session, (
            f"SELECT TABLE_ROWS, AVG_ROW_LENGTH FROM information_schema.TABLES WHERE {_WHERE}"),
            [schema, name])
        rows, avg = stats[0] if stats else (None, None)
        estimate = positive(rows)
        return TableStats(row_estimate=int(estimate) if estimate else None, avg_row_bytes=positive(avg))

    def table_exists(self, session: CatalogSession, schema: str | None, name: str) -> bool:
        return bool(catalog_rows(session, f"SELECT 1 FROM information_schema.TABLES WHERE {_WHERE}",
                                 [schema, name]))

    def list_tables(self, session: CatalogSession, schema: str | None) -> list[str]:
        rows = catalog_rows(session, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE "
                            "TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_TYPE = 'BASE TABLE' "
                            "ORDER BY 1", [schema])
        return [str(r[0]) for r in rows or []]

    def list_indexes(self, session: CatalogSession, schema: str | None,
                     name: str) -> list[tuple[str, tuple[str, ...], bool]]:
        rows = catalog_rows(session, (
            "SELECT INDEX_NAME, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS "
            f"WHERE {_WHERE} ORDER BY INDEX_NAME, SEQ_IN_INDEX"), [schema, name])
        found: dict[str, tuple[list[str], bool]] = {}
        for index, column, non_unique in rows or []:
            found.setdefault(str(index), ([], not int(non_unique)))[0].append(str(column or "<expression>"))
        return [(n, tuple(cols), unique) for n, (cols, unique) in found.items()]

    # --- EXPLAIN --------------------------------------------------------------------------

    def explain_rows(self, session: CatalogSession, sql: str) -> int | None:
        result = session.catalog_query(f"EXPLAIN {sql}", tolerate=True)
        if not result or len(result[1]) != 1 or "rows" not in result[0]:
            return None  # joins / subqueries: the per-table rows do not add up to a result size
        return positive_int(result[1][0][result[0].index("rows")])

    def index_access(self, session: CatalogSession, sql: str, value: Any) -> IndexAccess:
        """`possible_keys` (indexes usable for the predicate) does not depend on the
        optimizer's cost choice, so a small table answers like a big one."""
        result = session.catalog_query(f"EXPLAIN {sql}", [value], tolerate=True)
        if not result or "possible_keys" not in result[0]:
            return IndexAccess(None, "EXPLAIN failed for the export's query")
        names, rows = result
        keys = {str(r[names.index("possible_keys")]) for r in rows if r[names.index("possible_keys")]}
        if keys:
            return IndexAccess(True, f"usable index ({', '.join(sorted(keys))})")
        return IndexAccess(False, "full table scan (no usable index)")


DIALECT = MySQLDialect()
