"""PostgreSQL's catalog SQL and rules (the `SourceDialect` of rivet_core/source/dialect.py).

Tables are found with `to_regclass(text)`: the chunk planner passes the name as written
in SQL (`schema.name`, folded to lower case like the export's own query), `rivet init` /
`rivet check` pass the catalog's exact spelling quoted (`"schema"."Name"`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
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
from rivet_core.source.query import quote_ident_pg

#: Types without a default btree ordering: dense tie-breakers compare them as text.
_UNORDERED = {"json", "xml", "point", "line", "lseg", "box", "path", "polygon", "circle"}
_INDEX_NODES = {"Index Scan", "Index Only Scan", "Bitmap Index Scan"}


def _regclass(schema: str | None, name: str, exact_names: bool) -> str:
    if exact_names:
        quoted = quote_ident_pg(name)
        return f"{quote_ident_pg(schema)}.{quoted}" if schema else quoted
    return f"{schema}.{name}" if schema else name


class PostgresDialect:
    name = "postgres"
    file_based = False
    counts_queries = False
    change_log = "slot"
    default_schema = "public"

    def quote_ident(self, name: str) -> str:
        return quote_ident_pg(name)

    def text_cast(self, expr: str) -> str:
        return f"CAST({expr} AS TEXT)"

    def bucket_floor(self, expr: str, size: int) -> str:
        return f"({expr} - MOD(MOD({expr}, {size}) + {size}, {size}))"

    def orders_as_text(self, native_type: str) -> bool:
        return native_type.removesuffix("[]") in _UNORDERED

    def schema_is_default(self, schema: str | None) -> bool:
        return schema in (None, "public")

    def type_note(self, native_type: str) -> str | None:
        return None

    def raw_fetch(self, connection: Any, sql: str, params: Sequence[Any],
                  tolerate: bool) -> RawResult:
        if tolerate:
            with connection.transaction():  # a SAVEPOINT: a failure keeps the snapshot usable
                return fetch_all(connection.execute(sql, list(params) or None))
        return fetch_all(connection.execute(sql, list(params) or None))

    # --- catalog --------------------------------------------------------------------------

    def table_keys(self, session: CatalogSession, schema: str | None, name: str) -> TableKeys:
        """Columns, NOT NULL and primary key from SQLAlchemy's inspector (the name as
        written in SQL, folded to lower case as PostgreSQL folds it); the single-column
        unique keys in SQL, because they must exclude partial, expression and invalid
        indexes, which the inspector does not tell apart."""
        from rivet_core.source.sqlalchemy.catalog import columns_and_primary_key

        regclass = _regclass(schema, name, exact_names=False)
        names, not_null, primary = columns_and_primary_key(
            session, schema.lower() if schema else None, name.lower())
        keys = catalog_rows(session, (
            "SELECT a.attname::text, i.indisprimary, i.indnkeyatts FROM pg_catalog.pg_index i "
            "JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
            "WHERE i.indrelid = to_regclass(%s) AND i.indisunique AND i.indisvalid "
            "AND i.indpred IS NULL AND i.indexprs IS NULL "
            "ORDER BY i.indisprimary DESC, a.attnum"), [regclass]) or []
        unique: list[str] = []
        for column, _primary, nkey in keys:
            if nkey == 1 and column not in unique:
                unique.append(column)
        return TableKeys(columns=names, not_null=not_null, primary_key=primary, unique=unique)

    def table_stats(self, session: CatalogSession, schema: str | None, name: str, *,
                    exact_names: bool) -> TableStats:
        stats = catalog_rows(session, (
            "SELECT c.reltuples::float8, pg_relation_size(c.oid)::float8 FROM pg_catalog.pg_class c "
            "WHERE c.oid = to_regclass(%s)"), [_regclass(schema, name, exact_names)])
        tuples, size = stats[0] if stats else (None, None)
        estimate = positive(tuples)
        avg = (size / estimate) if estimate and positive(size) else None
        return TableStats(row_estimate=int(estimate) if estimate else None, avg_row_bytes=avg)

    def table_exists(self, session: CatalogSession, schema: str | None, name: str) -> bool:
        rows = catalog_rows(session, "SELECT to_regclass(%s) IS NOT NULL",
                            [_regclass(schema, name, exact_names=True)])
        return bool(rows and rows[0][0])

    def list_tables(self, session: CatalogSession, schema: str | None) -> list[str]:
        rows = catalog_rows(session, "SELECT c.relname::text FROM pg_catalog.pg_class c JOIN "
                            "pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE "
                            "c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname = %s "
                            "ORDER BY 1", [schema or "public"])
        return [str(r[0]) for r in rows or []]

    def list_indexes(self, session: CatalogSession, schema: str | None,
                     name: str) -> list[tuple[str, tuple[str, ...], bool]]:
        rows = catalog_rows(session, (
            "SELECT ic.relname::text, a.attname::text, i.indisunique, k.n FROM pg_catalog.pg_index i "
            "JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid "
            "JOIN LATERAL unnest(i.indkey[0:i.indnkeyatts - 1]) WITH ORDINALITY AS k(attnum, n) ON true "
            "LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
            "WHERE i.indrelid = to_regclass(%s) AND i.indisvalid ORDER BY 1, 4"),
            [_regclass(schema, name, exact_names=True)])
        found: dict[str, tuple[list[str], bool]] = {}
        for index, column, unique, _ in rows or []:
            found.setdefault(index, ([], bool(unique)))[0].append(column or "<expression>")
        return [(n, tuple(cols), unique) for n, (cols, unique) in found.items()]

    # --- EXPLAIN --------------------------------------------------------------------------

    def explain_rows(self, session: CatalogSession, sql: str) -> int | None:
        rows = catalog_rows(session, f"EXPLAIN (FORMAT JSON) {sql}", tolerate=True)
        if not rows:
            return None
        doc: Any = rows[0][0]
        doc = json.loads(doc) if isinstance(doc, str) else doc
        return positive_int(doc[0]["Plan"].get("Plan Rows"))

    def index_access(self, session: CatalogSession, sql: str, value: Any) -> IndexAccess:
        """With `enable_seqscan = off` for the EXPLAIN (restored afterwards), a Seq Scan in
        the plan means no usable index exists, whatever the table's size."""
        catalog_rows(session, "SET LOCAL enable_seqscan = off")
        try:
            rows = catalog_rows(session, f"EXPLAIN (FORMAT JSON) {sql}", [value], tolerate=True)
        finally:
            catalog_rows(session, "SET LOCAL enable_seqscan = on")
        if not rows:
            return IndexAccess(None, "EXPLAIN failed for the export's query")
        doc = rows[0][0]
        doc = json.loads(doc) if isinstance(doc, str) else doc
        nodes = list(_plan_nodes(doc[0]["Plan"]))
        used = [n for n in nodes if n.get("Node Type") in _INDEX_NODES]
        if used:
            names = sorted({str(n.get("Index Name")) for n in used})
            return IndexAccess(True, f"index scan ({', '.join(names)})")
        scans = sorted({str(n.get("Relation Name")) for n in nodes if n.get("Node Type") == "Seq Scan"})
        return IndexAccess(False, f"sequential scan of {', '.join(scans) or 'the query'} (no usable index)")


def _plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []) or []:
        yield from _plan_nodes(child)


DIALECT = PostgresDialect()
