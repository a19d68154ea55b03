"""The generic source session: any database a SQLAlchemy dialect reaches (docs/sqlalchemy.md).

`source: {type: sqlalchemy, url: …}` resolves to a URL marked `sqlalchemy:` (rivet_core/
config/source_url.py), so every layer that opens a session from the URL lands here, also
for `postgresql://`, which unmarked means the native reader. The engine-neutral half
(overrides, the one UnsupportedTypeError, column-wise batches) is `SourceSession`'s; this
module supplies its three hooks:

- `_probe_columns`: `SELECT * FROM (<sql>) AS _rivet` with a limit of 0 rows, built with
  SQLAlchemy's expression language so the dialect renders the alias and the limit (`LIMIT
  0`, `TOP 0`, `FETCH FIRST 0 ROWS ONLY`). A column's type is the one the driver states by
  name in the result description, read through the dialect's type-name table (DuckDB says
  `DECIMAL(12,2)`; psycopg gives an OID whose catalog name it knows), else the type the
  dialect's inspector reflects for the export's table (`table_hint`); a column with
  neither has no safe mapping and fails `describe` naming the `columns:` override.
- `_open_cursor`: the statement with `stream_results` and `yield_per` = the batch size: a
  server-side cursor where the dialect has one (PostgreSQL, MySQL/MariaDB), so memory is
  one batch plus the driver's fetch buffer. A dialect without one (`supports_server_side_
  cursors` False) is named in a WARN once per session: its driver may hold the whole
  result in client memory, so memory is bounded by the result, not by `batch_rows` —
  split the read with `mode: chunked`. SQLite's driver steps the statement row by row and
  is exempt from the warning.
- `_scalar`: the first column of the first row.

Statements arrive in the engines' shared convention (`%s` placeholders, `%%` for a literal
`%` when parameters are bound: rivet_core/source/query.py) and leave as a SQLAlchemy
`text()` whose bound parameters the dialect renders in its own paramstyle (`?`, `$1`,
`%(name)s`, `:name`); a colon in the user's SQL (`'10:30'`, `x::int`) is escaped so it is
never taken for a parameter.

One consistent read: PostgreSQL and MySQL/MariaDB run REPEATABLE READ in UTC (as their
native sessions do, so timestamps without zone read the same); other dialects get their
default isolation in one transaction. A URL whose dialect or driver is not installed
fails naming the package to install; driver errors leave redacted (`wrap_driver_error`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from rivet_core.config.source_url import SQLALCHEMY_PREFIX, sqlalchemy_backend
from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import ConfigError, best_effort
from rivet_core.redact import redact_url
from rivet_core.source.base import SourceColumn, SourceSession, wrap_driver_error
from rivet_core.source.query import BASE_ALIAS
from rivet_core.source.sqlalchemy.binds import to_text
from rivet_core.source.sqlalchemy.dialect import SQLAlchemyDialect, dialect_for_backend
from rivet_core.source.sqlalchemy.types import sqlalchemy_column, type_from_name

log = logging.getLogger(__name__)

#: Where the dialect (or its driver) of a backend comes from, for the "not installed" error.
PACKAGES = {
    "duckdb": "duckdb-engine (pip install 'rivet-dagster[duckdb]')",
    "mssql": "pyodbc (mssql+pyodbc://) or pymssql (mssql+pymssql://)",
    "oracle": "oracledb (oracle+oracledb://)",
    "snowflake": "snowflake-sqlalchemy",
    "trino": "trino (pip install 'trino[sqlalchemy]')",
    "bigquery": "sqlalchemy-bigquery",
    "redshift": "sqlalchemy-redshift",
    "databricks": "databricks-sqlalchemy",
    "clickhouse": "clickhouse-sqlalchemy",
    "cockroachdb": "sqlalchemy-cockroachdb",
    "postgresql": "psycopg (write postgresql+psycopg://; bare postgresql:// asks for psycopg2)",
    "mysql": "pymysql (write mysql+pymysql://; bare mysql:// asks for mysqlclient)",
    "mariadb": "pymysql (write mariadb+pymysql://)",
}

#: Per backend: the isolation level and statements that make one consistent read, as the
#: native sessions set them up (UTC, so zone-less timestamps compare and read the same).
SESSION_SETUP: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "postgresql": ("REPEATABLE READ", ("SET LOCAL TimeZone = 'UTC'", "SET LOCAL DateStyle = 'ISO, YMD'",
                                       "SET LOCAL extra_float_digits = 1")),
    "mysql": ("REPEATABLE READ", ("SET time_zone = '+00:00'",)),
    "mariadb": ("REPEATABLE READ", ("SET time_zone = '+00:00'",)),
}

#: Rows per fetch, whatever the batch size: here every value is a Python object (and a
#: SQLAlchemy Row per row) until the chunk is converted, several times the Arrow size the
#: batch size is computed for; the Parquet writer re-assembles its row groups anyway
#: (rivet_core/format/parquet.py), so smaller chunks cost nothing there.
FETCH_ROWS = 10_000

#: psycopg's internal type names → the names PostgreSQL's dialect table knows.
_PG_ALIASES = {"int2": "smallint", "int4": "integer", "int8": "bigint", "float4": "real",
               "float8": "double precision", "bool": "boolean", "bpchar": "character",
               "varchar": "character varying", "timestamptz": "timestamp with time zone",
               "timetz": "time with time zone"}


def sqlalchemy_url(url: str) -> str:
    """The SQLAlchemy URL inside a marked source URL."""
    return url[len(SQLALCHEMY_PREFIX):] if url.startswith(SQLALCHEMY_PREFIX) else url


def missing_package_message(url: str, exc: BaseException) -> str:
    """Why the URL's dialect cannot load, and the package that provides it."""
    backend = sqlalchemy_backend(url)
    scheme = sqlalchemy_url(url).split("://", 1)[0]
    package = PACKAGES.get(backend, f"the SQLAlchemy dialect package for '{backend}'")
    return (f"source.url: SQLAlchemy cannot load the dialect of {scheme}:// ({exc}) — "
            f"install {package}")




class SQLAlchemySession(SourceSession):
    """One SQLAlchemy connection, one transaction (see module doc)."""

    engine_label = "SQLAlchemy"

    def __init__(self, url: str, tuning: ResolvedTuning) -> None:
        super().__init__(url, tuning)
        self.backend = sqlalchemy_backend(url)
        self.engine = SQLALCHEMY_PREFIX + self.backend
        self.engine_label = f"SQLAlchemy ({self.backend})"  # type: ignore[misc]
        self.dialect: SQLAlchemyDialect = dialect_for_backend(self.backend)  # type: ignore[misc]
        self._sa_engine: Any = None
        self._conn: Any = None
        self._tx: Any = None
        self._reflected: dict[tuple[str | None, str], dict[str, Any]] = {}
        #: The probe's columns per statement: the stream converts with them (direct
        #: `pa.array` where the driver's values are Arrow-ready).
        self._probed: dict[str, list[SourceColumn]] = {}
        self._warned_buffering = False

    # --- lifecycle ----------------------------------------------------------------------

    def _engine(self) -> Any:
        if self._sa_engine is None:
            from sqlalchemy import create_engine, exc
            from sqlalchemy.pool import NullPool

            url = sqlalchemy_url(self._url)
            try:
                self._sa_engine = create_engine(url, poolclass=NullPool)
            except (exc.NoSuchModuleError, ImportError) as error:
                raise ConfigError(redact_url(missing_package_message(url, error))) from None
            except exc.ArgumentError as error:
                raise ConfigError(f"source.url: {redact_url(str(error))} — write "
                                  "dialect[+driver]://user@host/db (docs/sqlalchemy.md)") from None
        return self._sa_engine

    def _connect(self) -> None:
        engine = self._engine()
        isolation, statements = SESSION_SETUP.get(self.backend, (None, ()))
        try:
            conn = engine.connect()
            if isolation:
                conn = conn.execution_options(isolation_level=isolation)
            self._conn = conn
            self._tx = conn.begin()
            _text_json(conn.connection.driver_connection)
            for statement in statements:
                conn.exec_driver_sql(statement)
        except Exception as error:  # noqa: BLE001 - every driver's error type funnels here
            self._close(success=False)
            raise wrap_driver_error(error, f"{self.engine_label} error while connecting to "
                                    f"{redact_url(sqlalchemy_url(self._url))}") from error

    def _close(self, *, success: bool) -> None:
        conn, tx, self._conn, self._tx = self._conn, self._tx, None, None
        if conn is None:
            return
        try:
            if tx is not None and tx.is_active:
                tx.commit() if success else tx.rollback()
        except Exception as error:  # error boundary: a failed commit is raised; after a failed read the rollback must not hide its error
            if success:
                raise wrap_driver_error(error, f"{self.engine_label} error while ending the "
                                        "read transaction") from error
        finally:
            with best_effort("closing the SQLAlchemy connection"):  # the server may have closed it
                conn.close()

    @property
    def connection(self) -> Any:
        """The SQLAlchemy Connection of the open read (the dialect's catalog questions)."""
        self._require_open()
        return self._conn

    def quote_ident(self, name: str) -> str:
        return self.dialect.quote_ident(name)

    # --- hooks --------------------------------------------------------------------------

    def _probe_columns(self, sql: str, params: Sequence[Any],
                       table_hint: tuple[str | None, str] | None) -> list[SourceColumn]:
        from sqlalchemy import literal_column, select

        inner = to_text(sql, params).columns().subquery(BASE_ALIAS)
        result = self._conn.execute(select(literal_column("*")).select_from(inner).limit(0))
        try:
            description = list(result.cursor.description or [])
        finally:
            result.close()
        sa_dialect = self._engine().dialect
        columns = []
        for entry in description:
            name = str(entry[0])
            sa_type, native = self._described_type(entry), _stated_name(entry)
            if sa_type is None and table_hint is not None:
                sa_type, native = self._reflected_columns(table_hint).get(name), None
            if sa_type is None:
                columns.append(SourceColumn(name, "unknown", None, unsupported_reason=(
                    f"neither the driver nor the table's reflection states this column's type "
                    f"(an expression in a query?) — add `columns: {{{name}: <type>}}` in "
                    f"rivet.yaml or export a table")))
            else:
                columns.append(sqlalchemy_column(name, sa_type, sa_dialect, native))
        if self.backend == "sqlite":  # any column may hold any storage class: coerce each value
            columns = [dataclasses.replace(c, direct=False) for c in columns]
        self._probed[sql] = columns
        return columns

    def _described_type(self, entry: Sequence[Any]) -> Any | None:
        """The SQLAlchemy type of a result column from the driver's description, where the
        driver names the type (DuckDB: the type's text; psycopg: an OID it knows)."""
        code = entry[1] if len(entry) > 1 else None
        if code is None:
            return None
        sa_dialect = self._engine().dialect
        if isinstance(code, int):
            name = self._pg_type_name(code, entry)
            return type_from_name(name, sa_dialect) if name else None
        return type_from_name(str(code), sa_dialect)

    def _pg_type_name(self, oid: int, entry: Sequence[Any]) -> str | None:
        """psycopg's name for a type OID, with a numeric's precision and scale (from the
        description's public fields); None for another driver."""
        adapters = getattr(self._conn.connection.driver_connection, "adapters", None)
        info = adapters.types.get(oid) if adapters is not None else None
        if info is None or info.oid != oid:  # unknown, or the OID of an array of `info`
            return None
        name = _PG_ALIASES.get(info.name, info.name)
        if name == "numeric" and len(entry) > 5 and entry[4] is not None:
            return f"numeric({entry[4]},{entry[5] or 0})"
        return name

    def _reflected_columns(self, table_hint: tuple[str | None, str]) -> dict[str, Any]:
        """Column name → reflected SQLAlchemy type of the export's table (cached)."""
        if table_hint not in self._reflected:
            schema, table = table_hint
            found = self.dialect.reflected_types(self, schema, table)
            if found and self.backend in ("mysql", "mariadb"):
                from sqlalchemy.types import JSON

                # MariaDB's JSON is LONGTEXT with a json_valid() CHECK (as the native reader
                # knows it: rivet_core/source/mysql/types.py).
                for column in self.dialect.json_checked_columns(self, table, schema):
                    if column in found:
                        found[column] = JSON()
            self._reflected[table_hint] = found
        return self._reflected[table_hint]

    def _open_cursor(self, sql: str, params: Sequence[Any], batch_rows: int
                     ) -> tuple[list[SourceColumn] | None, Iterator[Sequence[Sequence[Any]]]]:
        self._warn_without_server_side_cursor()
        rows = min(batch_rows, FETCH_ROWS)
        conn = self._conn.execution_options(stream_results=True, yield_per=rows)
        # yield_per on the result too: it sizes the buffered fetch (one FETCH of `rows` per
        # chunk) where the execution option alone let the buffer start at one row.
        result = conn.execute(to_text(sql, params)).yield_per(rows)
        return self._probed.get(sql), _partitions(result, rows)

    def _warn_without_server_side_cursor(self) -> None:
        sa_dialect = self._engine().dialect
        if sa_dialect.supports_server_side_cursors or self._warned_buffering:
            return
        self._warned_buffering = True
        if self.backend == "sqlite":
            return  # the stdlib driver steps the statement: it never holds the result
        log.warning(
            "the SQLAlchemy dialect '%s' has no server-side cursors: its driver may hold the "
            "whole result in client memory, so this read's memory is bounded by the result "
            "size, not by the batch size — export large tables with mode: chunked",
            sa_dialect.name)

    def _scalar(self, sql: str, params: Sequence[Any]) -> Any:
        row = self._conn.execute(to_text(sql, params)).first()
        return None if row is None else row[0]


def _stated_name(entry: Sequence[Any]) -> str | None:
    """The type name a driver states in its description (DuckDB), for `rivet.native_type`."""
    code = entry[1] if len(entry) > 1 else None
    return None if code is None or isinstance(code, int) else str(code)


def _text_json(driver_connection: Any) -> None:
    """psycopg: json/jsonb as the text PostgreSQL renders (as the native session loads them),
    not parsed into Python objects and dumped again (numbers and spacing would change)."""
    adapters = getattr(driver_connection, "adapters", None)
    if adapters is None or not hasattr(adapters, "register_loader"):
        return
    from psycopg.types.string import TextLoader

    for type_name in ("json", "jsonb"):
        adapters.register_loader(type_name, TextLoader)


def _partitions(result: Any, batch_rows: int) -> Iterator[Sequence[Sequence[Any]]]:
    """Row chunks of at most `batch_rows`; the result (its server-side cursor) is closed
    when the stream ends or is abandoned."""
    try:
        yield from result.partitions(batch_rows)
    finally:
        result.close()
