"""The `SourceDialect` of a SQLAlchemy source: the catalog through SQLAlchemy's inspector.

Columns, NOT NULL, primary keys, unique constraints, indexes and the table list are the
inspector's answers (`sqlalchemy.inspect(connection)`), run on the session's own
connection, so they read the export's snapshot with its credentials. Identifiers are
quoted by the dialect's identifier preparer, text casts rendered by its compiler.

What the inspector cannot answer — row estimates and average row size (statistics), the
planner's EXPLAIN — is asked of the native dialect where the backend has one (PostgreSQL,
MySQL/MariaDB, SQLite: their hand-written catalog SQL runs through this session's
`catalog_query`, which binds `%s` parameters through SQLAlchemy); other backends have no
estimate (None), which the planner and estimator already handle as "unknown".

SQLAlchemy is imported when a method runs, never at import: `rivet run` of a native
source must not pay for it (benchmarks/startup.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from rivet_core.config.source_url import FILE_BACKENDS, SQLALCHEMY_PREFIX
from rivet_core.source.dialect import (
    CatalogSession,
    IndexAccess,
    RawResult,
    SourceDialect,
    TableKeys,
    TableStats,
    dialect_of,
)

#: Backends whose hand-written catalog SQL (statistics, EXPLAIN) the native dialect has.
_NATIVE = {"postgresql": "postgres", "mysql": "mysql", "mariadb": "mysql", "sqlite": "sqlite"}


_JSON_VALID = re.compile(r"^\s*json_valid\(`((?:[^`]|``)+)`\)\s*$", re.IGNORECASE)

#: Backends whose column names compare case-insensitively (as the native MySQL dialect says).
_CASE_INSENSITIVE = frozenset({"mysql", "mariadb"})

#: Backends where a failed statement aborts the transaction (a tolerated one runs inside a
#: SAVEPOINT, as the native PostgreSQL dialect does).
_ABORTS_ON_ERROR = frozenset({"postgresql"})


class SQLAlchemyDialect:
    """One backend's rules (see module doc); `name` is the session's engine name."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.name = SQLALCHEMY_PREFIX + backend
        self.file_based = backend in FILE_BACKENDS
        self.counts_queries = self.file_based
        self.change_log = ""  # CDC reads PostgreSQL and MySQL through their native readers only
        self.default_schema = ""

    @functools.cached_property
    def sa_dialect(self) -> Any:
        """The SQLAlchemy dialect object (no driver imported: it only renders SQL)."""
        from sqlalchemy.engine.url import make_url

        return make_url(f"{self.backend}://").get_dialect()()

    @property
    def native(self) -> SourceDialect | None:
        engine = _NATIVE.get(self.backend)
        return dialect_of(engine) if engine else None

    def quote_ident(self, name: str) -> str:
        if "\x00" in name or not name:
            raise ValueError(f"identifier {name!r} is empty or contains a NUL character")
        return str(self.sa_dialect.identifier_preparer.quote_identifier(name))

    def text_cast(self, expr: str) -> str:
        from sqlalchemy import String, cast, literal_column

        return str(cast(literal_column(expr), String()).compile(dialect=self.sa_dialect))

    def bucket_floor(self, expr: str, size: int) -> str:
        return f"({expr} - ((({expr} % {size}) + {size}) % {size}))"

    def orders_as_text(self, native_type: str) -> bool:
        return False

    def schema_is_default(self, schema: str | None) -> bool:
        return schema is None

    def type_note(self, native_type: str) -> str | None:
        return None

    def reflected_types(self, session: Any, schema: str | None, name: str) -> dict[str, Any]:
        """Column name → SQLAlchemy type of a table, as the inspector reflects it."""
        columns = self.inspector(session).get_columns(name, schema=schema)
        return {str(c["name"]): c["type"] for c in columns}

    def inspector(self, session: Any) -> Any:
        """SQLAlchemy's inspector on the session's connection (same snapshot)."""
        from sqlalchemy import inspect

        return inspect(session.connection)

    def raw_fetch(self, connection: Any, sql: str, params: Sequence[Any],
                  tolerate: bool) -> RawResult:
        from rivet_core.source.sqlalchemy.binds import to_text

        if not (tolerate and self.backend in _ABORTS_ON_ERROR):
            return _fetch(connection, to_text(sql, params))
        with connection.begin_nested():  # a failure must not abort the snapshot transaction
            return _fetch(connection, to_text(sql, params))

    # --- catalog: the inspector -------------------------------------------------------------

    def table_keys(self, session: CatalogSession, schema: str | None, name: str) -> TableKeys:
        from sqlalchemy.exc import NoSuchTableError

        inspector = self.inspector(session)
        try:
            columns = inspector.get_columns(name, schema=schema)
        except NoSuchTableError:  # a table that does not exist has no columns (catalog/tables.py)
            return TableKeys(columns=[], not_null=set(), primary_key=(), unique=[])
        primary = tuple(inspector.get_pk_constraint(name, schema=schema).get(
            "constrained_columns") or ())
        unique = [primary[0]] if len(primary) == 1 else []
        for index in [*_unique_constraints(inspector, name, schema),
                      *[i for i in inspector.get_indexes(name, schema=schema) if i.get("unique")
                        and not _partial(i)]]:
            cols = [c for c in index.get("column_names") or [] if c is not None]
            if len(cols) == 1 and cols[0] not in unique:
                unique.append(str(cols[0]))
        not_null = {str(c["name"]) for c in columns if not c.get("nullable", True)}
        not_null.update(primary if len(primary) == 1 else ())
        return TableKeys(columns=[str(c["name"]) for c in columns], not_null=not_null,
                         primary_key=primary, unique=unique,
                         case_insensitive=self.backend in _CASE_INSENSITIVE)

    def table_exists(self, session: CatalogSession, schema: str | None, name: str) -> bool:
        inspector = self.inspector(session)
        return bool(inspector.has_table(name, schema=schema)) or name in inspector.get_view_names(
            schema=schema)

    def list_tables(self, session: CatalogSession, schema: str | None) -> list[str]:
        return sorted(str(t) for t in self.inspector(session).get_table_names(schema=schema))

    def list_indexes(self, session: CatalogSession, schema: str | None,
                     name: str) -> list[tuple[str, tuple[str, ...], bool]]:
        from sqlalchemy.exc import NoSuchTableError

        inspector = self.inspector(session)
        try:
            raw = inspector.get_indexes(name, schema=schema)
        except NoSuchTableError:
            return []
        found = [(str(i.get("name")), tuple(str(c or "<expression>") for c in i.get("column_names") or ()),
                  bool(i.get("unique"))) for i in raw]
        pk = inspector.get_pk_constraint(name, schema=schema)
        pk_cols = tuple(pk.get("constrained_columns") or ())
        if pk_cols and not any(cols == pk_cols for _, cols, _ in found):
            found.insert(0, (str(pk.get("name") or "<primary key>"), pk_cols, True))
        return found

    def json_checked_columns(self, session: CatalogSession, name: str,
                             schema: str | None) -> set[str]:
        """Columns a `CHECK (json_valid(col))` declares JSON: MariaDB's JSON type is LONGTEXT
        with that check. Hand-written SQL because SQLAlchemy's MySQL reflection does not
        report MariaDB's column-level CHECK constraints (`get_check_constraints` is empty)."""
        result = session.catalog_query(
            "SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_NAME = %s",
            [schema, name], tolerate=True)  # MySQL before 8.0.16 has no such view
        clauses = [str(row[0]) for row in (result[1] if result else [])]
        return {m.group(1).replace("``", "`") for m in map(_JSON_VALID.match, clauses) if m}

    # --- what the inspector cannot answer: the native dialect's SQL, or nothing -------------

    def table_stats(self, session: CatalogSession, schema: str | None, name: str, *,
                    exact_names: bool) -> TableStats:
        native = self.native
        if native is None:
            return TableStats(row_estimate=None, avg_row_bytes=None)
        return native.table_stats(session, schema, name, exact_names=exact_names)

    def explain_rows(self, session: CatalogSession, sql: str) -> int | None:
        native = self.native
        return native.explain_rows(session, sql) if native is not None else None

    def index_access(self, session: CatalogSession, sql: str, value: Any) -> IndexAccess:
        native = self.native
        if native is None:
            return IndexAccess(None, f"no EXPLAIN reading for the SQLAlchemy dialect '{self.backend}'")
        return native.index_access(session, sql, value)


def _fetch(connection: Any, statement: Any) -> RawResult:
    result = connection.execute(statement)
    if not result.returns_rows:
        return [], []
    return [str(k) for k in result.keys()], [tuple(r) for r in result.fetchall()]


def _unique_constraints(inspector: Any, name: str, schema: str | None) -> list[dict[str, Any]]:
    try:
        return list(inspector.get_unique_constraints(name, schema=schema))
    except NotImplementedError:  # a dialect without the reflection (SQLAlchemy's default)
        return []


def _partial(index: dict[str, Any]) -> bool:
    """True for a partial index (a WHERE clause in any dialect's options)."""
    options = index.get("dialect_options") or {}
    return any(key.endswith("_where") and value is not None for key, value in options.items())


class DuckDBDialect(SQLAlchemyDialect):
    """DuckDB's catalog in hand-written SQL, because the inspector cannot answer it here:
    duckdb-engine 0.17 reflects columns and keys with PostgreSQL catalog queries
    (`pg_collation`, `::regclass`) that DuckDB 2.0's pg_catalog emulation lacks, and the
    failed query aborts the read transaction. DuckDB's own `information_schema` and
    `duckdb_constraints()` answer the same questions."""

    def reflected_types(self, session: Any, schema: str | None, name: str) -> dict[str, Any]:
        from rivet_core.source.sqlalchemy.types import type_from_name

        return {str(column): type_from_name(str(data_type), self.sa_dialect)
                for column, data_type, _ in self._columns(session, schema, name)}

    def _columns(self, session: CatalogSession, schema: str | None,
                 name: str) -> list[tuple[Any, ...]]:
        result = session.catalog_query(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_name = %s AND table_schema = COALESCE(%s, current_schema()) "
            "ORDER BY ordinal_position", [name, schema])
        return result[1] if result else []

    def _constraints(self, session: CatalogSession, schema: str | None, name: str,
                     kind: str) -> list[tuple[str, ...]]:
        result = session.catalog_query(
            "SELECT constraint_column_names FROM duckdb_constraints() WHERE table_name = %s "
            "AND schema_name = COALESCE(%s, current_schema()) AND constraint_type = %s "
            "ORDER BY constraint_index", [name, schema, kind])
        return [tuple(str(c) for c in row[0]) for row in (result[1] if result else [])]

    def table_keys(self, session: CatalogSession, schema: str | None, name: str) -> TableKeys:
        columns = self._columns(session, schema, name)
        primary = next(iter(self._constraints(session, schema, name, "PRIMARY KEY")), ())
        unique = [primary[0]] if len(primary) == 1 else []
        for cols in self._constraints(session, schema, name, "UNIQUE"):
            if len(cols) == 1 and cols[0] not in unique:
                unique.append(cols[0])
        not_null = {str(c) for c, _, nullable in columns if nullable == "NO"} | set(primary[:1] if len(primary) == 1 else ())
        return TableKeys(columns=[str(c) for c, _, _ in columns], not_null=not_null,
                         primary_key=primary, unique=unique)

    def list_indexes(self, session: CatalogSession, schema: str | None,
                     name: str) -> list[tuple[str, tuple[str, ...], bool]]:
        found = [(f"<{kind.lower()}>", cols, True) for kind in ("PRIMARY KEY", "UNIQUE")
                 for cols in self._constraints(session, schema, name, kind)]
        result = session.catalog_query(
            "SELECT index_name, expressions, is_unique FROM duckdb_indexes() WHERE table_name = %s "
            "AND schema_name = COALESCE(%s, current_schema())", [name, schema])
        for index, expressions, unique in (result[1] if result else []):
            found.append((str(index), tuple(str(e).strip('"') for e in expressions or ()), bool(unique)))
        return found

    def table_exists(self, session: CatalogSession, schema: str | None, name: str) -> bool:
        return bool(self._columns(session, schema, name))


@functools.cache
def dialect_for_backend(backend: str) -> SQLAlchemyDialect:
    """The dialect of a SQLAlchemy backend name (`duckdb`, `mssql`, …), one per backend."""
    return DuckDBDialect(backend) if backend == "duckdb" else SQLAlchemyDialect(backend)


#: The family's entry in rivet_core/source/dialect.py `FAMILY_MODULES`.
BACKEND_DIALECT = dialect_for_backend
