"""PostgreSQL source session (psycopg 3): one connection, one snapshot, server-side cursors.

Contract (docs/rivet-compat.md "Session setup"): on enter the session opens a
`REPEATABLE READ READ ONLY` transaction and sets, LOCAL to it, `TimeZone='UTC'` (so
timestamptz values and cursor literals are UTC whatever the database default is),
`IntervalStyle='iso_8601'` (interval → ISO-8601 text), ISO `DateStyle`, shortest-exact
float text, and `statement_timeout` / `lock_timeout` from tuning when > 0. `describe`,
`stream` and `scalar` therefore all see the same snapshot. Streaming uses a named
(server-side) cursor: `DECLARE … NO SCROLL CURSOR` + `FETCH batch_rows`, so client memory is
bounded by one batch. The transaction commits on a clean exit and rolls back otherwise.

`describe` does not execute the query: declaring a cursor only plans it, and the portal
description carries each column's type OID and typmod (precision/scale of numerics).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.types.string import TextLoader

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import SourceError
from rivet_core.lazy_modules import pa
from rivet_core.redact import redact_secrets, redact_url
from rivet_core.source.base import SourceColumn, SourceSession, strip_sql, wrap_driver_error
from rivet_core.source.postgres import adbc as pg_adbc
from rivet_core.source.postgres import binary as pg_binary
from rivet_core.source.postgres.copy import READ_PATH_ENV, log, read_path_mode, render_sql
from rivet_core.source.postgres.dialect import DIALECT
from rivet_core.source.postgres.pressure import PgPressureProbe
from rivet_core.source.postgres.types import CATALOG_SQL, PgTypeInfo, pg_column
from rivet_core.source.query import quote_ident_pg
from rivet_core.source.tls import is_tls_verify_failure

_T = TypeVar("_T")
_CONNECT_TIMEOUT_S = 10


def normalize_pg_url(url: str) -> str:
    """Accept SQLAlchemy-style schemes (`postgresql+psycopg://`) as libpq URLs."""
    scheme, sep, rest = url.partition("://")
    if sep and "+" in scheme:
        return f"{scheme.split('+', 1)[0]}://{rest}"
    return url


def pg_connect(url: str) -> psycopg.Connection[Any]:
    """The one place a PostgreSQL source connection is opened (autocommit off).

    TLS comes from the URL (`sslmode`, `sslrootcert`, … — `source.tls` is written into it by
    `rivet_core.config.tls.apply_tls`), so every caller connects with the configured TLS.
    A TLS failure is reported as one, never as retryable: a bad certificate does not get
    better by reconnecting. The client encoding is always UTF-8 (what Arrow strings and the
    fast read paths need): the server converts from its own encoding, and — for a SQL_ASCII
    database — validates, so bytes that are not UTF-8 fail the read with the server's
    "invalid byte sequence" instead of reaching the output.
    """
    try:
        return psycopg.connect(
            url, application_name="rivet", connect_timeout=_CONNECT_TIMEOUT_S, autocommit=False,
            client_encoding="UTF8",
        )
    except psycopg.Error as exc:
        where = f"cannot connect to PostgreSQL at {redact_url(url)}"
        text = str(exc).lower()
        if is_tls_verify_failure(exc):
            raise SourceError(
                f"{where}: TLS verification failed: {redact_secrets(str(exc).strip())} — the "
                "server certificate does not verify against source.tls.ca_file (or the system "
                "CAs), or its name does not match the host; fix the CA / host name, or relax "
                "source.tls.mode"
            ) from exc
        if "no encryption" in text and "pg_hba.conf" in text:
            raise SourceError(
                f"{where}: {redact_secrets(str(exc).strip())} — the server accepts this user "
                "only over TLS; set source.tls (e.g. mode: verify-full with ca_file)"
            ) from exc
        raise wrap_driver_error(
            exc, where,
            "check the URL, credentials and that the server is reachable; "
            "`rivet doctor` tests the source connection",
        ) from exc


class PostgresSession(SourceSession):
    """See module docstring."""

    engine = "postgres"
    engine_label = "PG"
    dialect = DIALECT

    def __init__(self, url: str, tuning: ResolvedTuning) -> None:
        super().__init__(normalize_pg_url(url), tuning)
        self._conn: psycopg.Connection[Any] | None = None
        self._cursor_ids = itertools.count(1)
        self._type_cache: dict[tuple[int, int], PgTypeInfo] = {}

    def quote_ident(self, name: str) -> str:
        return quote_ident_pg(name)

    # --- lifecycle ----------------------------------------------------------------------

    def _connect(self) -> None:
        conn = pg_connect(self._url)
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        # Text for json/jsonb (as PostgreSQL renders it) and interval (ISO-8601, see below).
        for type_name in ("json", "jsonb", "interval"):
            conn.adapters.register_loader(type_name, TextLoader)
        self._conn = conn
        try:
            self._begin_read()
        except BaseException:
            conn.close()
            self._conn = None
            raise

    def _close(self, *, success: bool) -> None:
        self._end_read_transaction(psycopg.Error, success=success)

    def _finish_read(self) -> None:
        self._commit_read_transaction(psycopg.Error)

    def _begin_read(self) -> None:
        """A read transaction: its `SET LOCAL`s, the first of them opening the snapshot (a
        finished read's settings ended with its transaction)."""
        try:
            for statement in self.transaction_settings():
                self.connection.execute(statement)
        except psycopg.Error as exc:
            raise wrap_driver_error(exc, "cannot start the PostgreSQL read transaction") from exc

    def transaction_settings(self) -> list[str]:
        """The `SET LOCAL`s of every read transaction of this session (and of the ADBC
        connection that joins its snapshot): UTC, ISO styles, exact floats, timeouts."""
        settings = [
            "SET LOCAL TimeZone = 'UTC'",
            "SET LOCAL IntervalStyle = 'iso_8601'",
            "SET LOCAL DateStyle = 'ISO, YMD'",
            "SET LOCAL extra_float_digits = 1",
        ]
        if self.tuning.statement_timeout_s > 0:
            settings.append(
                f"SET LOCAL statement_timeout = {int(self.tuning.statement_timeout_s) * 1000}"
            )
        if self.tuning.lock_timeout_s > 0:
            settings.append(f"SET LOCAL lock_timeout = {int(self.tuning.lock_timeout_s) * 1000}")
        return settings

    def adbc_conninfo(self) -> str:
        """libpq conninfo for a second connection to the same server as the same user, with
        the same TLS settings (they live in the URL). Holds the password: never log it."""
        return make_conninfo(
            self._url, application_name="rivet", connect_timeout=str(_CONNECT_TIMEOUT_S),
            client_encoding="UTF8",
        )

    def pressure_probe(self) -> PgPressureProbe:
        return PgPressureProbe(pg_connect(self._url), self.connection.info.backend_pid)

    @property
    def connection(self) -> psycopg.Connection[Any]:
        if self._conn is None:
            self._require_open()
            raise AssertionError("unreachable: session is open but has no connection")
        return self._conn

    # --- engine hooks -------------------------------------------------------------------

    def _type_infos(self, oids: list[int], mods: list[int]) -> list[PgTypeInfo]:
        missing = [(o, m) for o, m in zip(oids, mods, strict=True) if (o, m) not in self._type_cache]
        if missing:
            rows = self.connection.execute(
                CATALOG_SQL, [[o for o, _ in missing], [m for _, m in missing]]
            ).fetchall()
            for (oid, mod), row in zip(missing, rows, strict=True):
                _, formatted, typname, typtype, category, elem, elem_type, base = row
                self._type_cache[(oid, mod)] = PgTypeInfo(
                    formatted=formatted or f"oid {oid}", typname=typname or f"oid {oid}",
                    typtype=typtype or "", typcategory=category or "",
                    elem_typname=elem, elem_typtype=elem_type, base_typname=base,
                )
        return [self._type_cache[(o, m)] for o, m in zip(oids, mods, strict=True)]

    def _live_columns(self, cursor: psycopg.ServerCursor[Any]) -> list[SourceColumn]:
        return [column for column, _ in self._live_columns_with_types(cursor)]

    def _live_columns_with_types(
        self, cursor: psycopg.ServerCursor[Any]
    ) -> list[tuple[SourceColumn, PgTypeInfo]]:
        result = cursor.pgresult
        description = cursor.description or []
        if result is None:
            return []
        oids = [result.ftype(i) for i in range(result.nfields)]
        mods = [result.fmod(i) for i in range(result.nfields)]
        infos = self._type_infos(oids, mods)
        return [
            (pg_column(column.name, mod, info), info)
            for column, mod, info in zip(description, mods, infos, strict=True)
        ]

    def _probe_with_types(
        self, sql: str, params: Sequence[Any]
    ) -> list[tuple[SourceColumn, PgTypeInfo]]:
        return self._describe(sql, params, self._live_columns_with_types)

    # --- read paths (binary, adbc, rows) ------------------------------------------------

    def planned_read_path(self) -> str | None:
        return pg_binary.planned_path(self.connection)

    def stream(
        self, sql: str, params: Sequence[Any], schema: pa.Schema, batch_rows: int
    ) -> Iterator[pa.RecordBatch]:
        """The fastest path that keeps every column exact: binary COPY decoded in C, else
        (C extension not built) ADBC's binary COPY, else the row path (see `binary` and
        `adbc`; docs/benchmarks.md "Read paths" for why these three); the choice is logged."""
        self._check_stream_args(batch_rows)
        sql = strip_sql(sql)
        mode = read_path_mode()
        why = f"{READ_PATH_ENV}=rows"
        if mode != "rows":
            with self.driver_errors("describing the query"):
                probed = self._probe_with_types(sql, params)  # once, for both fast paths
            if mode in ("auto", "binary"):
                use_binary, why = pg_binary.plan_binary(self, probed, schema)
                if use_binary:
                    log.info("PG read path: binary (%s)", why)
                    yield from pg_binary.stream_binary(
                        self, sql, params, probed, schema, batch_rows,
                        pg_adbc.batch_bytes(schema, batch_rows))
                    return
                log.debug("PG binary COPY path not used (%s)", why)
            use_adbc, why = pg_adbc.plan_adbc(probed, schema)
            if use_adbc:
                try:
                    read = pg_adbc.open_adbc(self)
                except pg_adbc.AdbcUnavailable as exc:
                    pg_adbc.log.warning("PG ADBC read path unavailable (%s); using the row path", exc)
                    why = f"ADBC unavailable: {exc}"
                else:
                    log.info("PG read path: adbc (%s)", why)
                    rendered = render_sql(self, sql, params)
                    try:
                        yield from pg_adbc.stream_adbc(self, read, rendered, schema, batch_rows)
                        return
                    except pg_adbc.AdbcUnavailable as exc:  # raised before any batch
                        pg_adbc.log.warning("PG ADBC read path refused the result (%s); "
                                            "using the row path", exc)
                        why = f"ADBC refused the result: {exc}"
        log.info("PG read path: rows (%s)", why)
        yield from super().stream(sql, params, schema, batch_rows)

    def _describe(self, sql: str, params: Sequence[Any], read: Callable[[Any], _T]) -> _T:
        """DECLARE the query on a server cursor and `read` its description: no row is run."""
        cursor = self._new_cursor()
        try:
            cursor.execute(sql, list(params) or None)
            return read(cursor)
        finally:
            cursor.close()

    def _new_cursor(self) -> psycopg.ServerCursor[Any]:
        return self.connection.cursor(
            name=f"_rivet_{next(self._cursor_ids)}", scrollable=False, withhold=False
        )

    def _probe_columns(
        self, sql: str, params: Sequence[Any], table_hint: tuple[str | None, str] | None
    ) -> list[SourceColumn]:
        return self._describe(sql, params, self._live_columns)

    def _open_cursor(
        self, sql: str, params: Sequence[Any], batch_rows: int
    ) -> tuple[list[SourceColumn] | None, Iterator[Sequence[Sequence[Any]]]]:
        cursor = self._new_cursor()
        cursor.itersize = batch_rows
        try:
            cursor.execute(sql, list(params) or None)
            live = self._live_columns(cursor)
        except BaseException:
            _close_quietly(cursor)
            raise
        return live, _fetch_chunks(cursor, batch_rows)

    def _scalar(self, sql: str, params: Sequence[Any]) -> Any:
        row = self.connection.execute(sql, list(params) or None).fetchone()
        return None if row is None else row[0]


def _fetch_chunks(
    cursor: psycopg.ServerCursor[Any], batch_rows: int
) -> Iterator[Sequence[Sequence[Any]]]:
    try:
        while True:
            rows = cursor.fetchmany(batch_rows)
            if not rows:
                return
            yield rows
    finally:
        _close_quietly(cursor)


def _close_quietly(cursor: psycopg.ServerCursor[Any]) -> None:
    """Close a server cursor; in an aborted transaction CLOSE itself fails, which is moot."""
    try:
        cursor.close()
    except psycopg.Error:
        pass
