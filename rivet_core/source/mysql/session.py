"""MySQL / MariaDB source session (PyMySQL): one connection, one consistent snapshot.

Contract (docs/rivet-compat.md "Session setup"): on connect the session sets
`time_zone='+00:00'` (TIMESTAMP values are UTC instants, cursor literals compare in UTC),
removes `NO_BACKSLASH_ESCAPES` from `sql_mode` (PyMySQL escapes bound values with
backslashes), sets the statement-duration limit from `statement_timeout_s` when > 0 —
`max_execution_time` in ms on MySQL, `max_statement_time` in seconds on MariaDB (detected
from VERSION()) — and `innodb_lock_wait_timeout` from `lock_timeout_s`, then opens
`START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY` so describe, stream and scalar
share one snapshot. Streaming uses an unbuffered `SSCursor`: rows come off the socket one
batch at a time. While a stream is open the connection cannot run another statement
(MySQL protocol rule), so consume or close a stream before calling `scalar`.

`describe` runs `SELECT * FROM (<sql>) AS _rivet_probe LIMIT 0`, which returns the column
definitions without reading rows.

`stream` decodes the row packets of that unbuffered result straight into Arrow columns
(`mysql_raw`, vectorized per column) unless `RIVET_MYSQL_READ_PATH=rows` or the PyMySQL
connection lacks what that needs; then it uses the row path (PyMySQL rows → Arrow). Both
read the same statement on the same connection, so snapshot, time zone and timeouts are
identical; the choice is logged.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any

import pymysql
import pymysql.cursors

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import ConfigError, SourceError
from rivet_core.lazy_modules import pa
from rivet_core.redact import redact_secrets, redact_url
from rivet_core.source.base import SourceColumn, SourceSession, strip_sql, wrap_driver_error
from rivet_core.source.fast_path import warn_once
from rivet_core.source.mysql import binary as mysql_binary
from rivet_core.source.mysql import raw as mysql_raw
from rivet_core.source.mysql import wire
from rivet_core.source.mysql.dialect import DIALECT
from rivet_core.source.mysql.pressure import MySQLPressureProbe
from rivet_core.source.mysql.types import _TEXTUAL, BINARY_CHARSET, MySQLField, mysql_column
from rivet_core.source.query import quote_ident_mysql
from rivet_core.source.read_ahead import ReadAhead, batch_budget
from rivet_core.source.tls import is_tls_verify_failure, mysql_ssl_context

_CONNECT_TIMEOUT_S = 10
_JSON_CHECK = re.compile(r"^\s*json_valid\(`((?:[^`]|``)+)`\)\s*$", re.IGNORECASE)


def mysql_connect_args(url: str) -> dict[str, Any]:
    """PyMySQL keyword arguments for a `mysql://user:pw@host:port/db` URL."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        raise ConfigError(f"MySQL URL {redact_url(url)} has no host — expected mysql://user:password@host:port/database")
    args: dict[str, Any] = {
        "host": parts.hostname,
        "port": parts.port or 3306,
        "user": urllib.parse.unquote(parts.username or ""),
        # bytes: PyMySQL encodes a str password as latin-1, which fails for (or garbles) any
        # password outside latin-1; the server hashes the UTF-8 bytes it was given
        "password": urllib.parse.unquote(parts.password or "").encode("utf-8"),
        "charset": "utf8mb4",
        "connect_timeout": _CONNECT_TIMEOUT_S,
        "autocommit": True,  # transactions are explicit (START TRANSACTION … below)
        "program_name": "rivet",
    }
    database = urllib.parse.unquote(parts.path.lstrip("/"))
    if database:
        args["database"] = database
    ssl_mode, ssl_ctx = mysql_ssl_context(parts.query)
    if ssl_mode == "disabled":
        args["ssl_disabled"] = True
    elif ssl_ctx is not None:
        args["ssl"] = ssl_ctx  # PyMySQL then refuses a server without TLS (no downgrade)
    return args


def mysql_connect(url: str) -> pymysql.connections.Connection[Any]:
    """The one place a MySQL/MariaDB source connection is opened.

    TLS comes from the URL's `ssl-mode` / `ssl-ca` (`source.tls` is written there by
    `rivet_core.config.tls.apply_tls`), so no caller can skip it. For a required mode the
    socket is checked after the handshake as well: PyMySQL versions differ in whether they
    fall back to plaintext when the server offers no TLS, and `required` must never do that.
    A TLS failure is reported as one and is not retryable (PyMySQL reports it as error 2003,
    "can't connect", which the retry classifier would otherwise treat as a network blip).
    """
    args = mysql_connect_args(url)
    where = f"cannot connect to MySQL at {redact_url(url)}"
    try:
        conn = wire.connect(**args)
    except pymysql.err.MySQLError as exc:
        detail = redact_secrets(str(exc).strip())
        if is_tls_verify_failure(exc):
            raise SourceError(
                f"{where}: TLS verification failed: {detail} — the server certificate does not "
                "verify against source.tls.ca_file (or the system CAs), or its name does not "
                "match the host; fix the CA / host name, or relax source.tls.mode"
            ) from exc
        if isinstance(exc, pymysql.err.OperationalError) and exc.args and exc.args[0] == 2026:
            raise SourceError(f"{where}: TLS failed: {detail}") from exc
        hint = ("check the URL, credentials and that the server is reachable; "
                "`rivet doctor` tests the source connection")
        if "ssl" not in args and exc.args and exc.args[0] == 1045:
            hint = ("check the credentials; if this user must connect over TLS (REQUIRE SSL), "
                    "set source.tls")
        raise wrap_driver_error(exc, where, hint) from exc
    if "ssl" in args and not wire.is_tls(conn):
        conn.close()
        raise SourceError(
            f"{where}: source.tls requires TLS but the server did not negotiate it — enable TLS "
            "on the server (ssl_cert/ssl_key), or set source.tls.mode: disable knowingly"
        )
    return conn


def _field_of(packet: Any) -> MySQLField:
    return MySQLField(
        name=packet.name, type_code=packet.type_code, flags=packet.flags,
        charsetnr=packet.charsetnr, length=packet.length, decimals=packet.scale,
        org_table=packet.org_table or "", org_name=packet.org_name or "",
    )


class MySQLSession(SourceSession):
    """See module docstring."""

    engine = "mysql"
    engine_label = "MySQL"
    dialect = DIALECT

    def __init__(self, url: str, tuning: ResolvedTuning) -> None:
        super().__init__(url, tuning)
        self._conn: pymysql.connections.Connection[Any] | None = None
        self.is_mariadb = False
        self.server_version = ""
        self._json_cache: dict[tuple[str, str], frozenset[tuple[str, str]]] = {}

    def quote_ident(self, name: str) -> str:
        return quote_ident_mysql(name)

    # --- lifecycle ----------------------------------------------------------------------

    def _connect(self) -> None:
        conn = mysql_connect(self._url)
        self._conn = conn
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION(), @@SESSION.sql_mode")
                version, sql_mode = cur.fetchone()
                self.server_version = str(version)
                self.is_mariadb = "mariadb" in self.server_version.lower()
                modes = [m for m in str(sql_mode or "").split(",") if m and m != "NO_BACKSLASH_ESCAPES"]
                cur.execute("SET SESSION sql_mode = %s", (",".join(modes),))
                cur.execute("SET time_zone = '+00:00'")
                timeout_s = int(self.tuning.statement_timeout_s)
                if timeout_s > 0:
                    if self.is_mariadb:
                        cur.execute(f"SET SESSION max_statement_time = {timeout_s}")
                    else:
                        cur.execute(f"SET SESSION max_execution_time = {timeout_s * 1000}")
                if self.tuning.lock_timeout_s > 0:
                    cur.execute(
                        f"SET SESSION innodb_lock_wait_timeout = {max(int(self.tuning.lock_timeout_s), 1)}"
                    )
                cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            self._begin_read()
        except BaseException as exc:  # the half-opened connection goes; the error goes on
            conn.close()
            self._conn = None
            if isinstance(exc, pymysql.err.MySQLError):
                raise wrap_driver_error(exc, "cannot start the MySQL read transaction") from exc
            raise

    def _close(self, *, success: bool) -> None:
        self._end_read_transaction(pymysql.err.MySQLError, success=success)

    def _finish_read(self) -> None:
        self._commit_read_transaction(pymysql.err.MySQLError)

    def _begin_read(self) -> None:
        """A read: a new consistent snapshot (the session's variables — sql_mode, UTC,
        timeouts, the isolation level — last as long as the connection)."""
        try:
            with self.connection.cursor() as cur:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        except pymysql.err.MySQLError as exc:
            raise wrap_driver_error(exc, "cannot start the MySQL read transaction") from exc

    def pressure_probe(self) -> MySQLPressureProbe:
        return MySQLPressureProbe(mysql_connect(self._url), self.connection.thread_id(), self.is_mariadb)

    @property
    def connection(self) -> pymysql.connections.Connection[Any]:
        if self._conn is None:
            self._require_open()
            raise AssertionError("unreachable: session is open but has no connection")
        return self._conn

    # --- engine hooks -------------------------------------------------------------------

    def _json_columns(
        self, fields: list[MySQLField], schema_hint: str | None
    ) -> frozenset[tuple[str, str]]:
        """MariaDB JSON columns among the result's source tables (CHECK json_valid(col))."""
        if not self.is_mariadb:
            return frozenset()
        tables = sorted({
            f.org_table for f in fields
            if f.org_table and f.type_code in _TEXTUAL and f.charsetnr != BINARY_CHARSET
        })
        if not tables:
            return frozenset()
        key = (schema_hint or "", ",".join(tables))
        if key not in self._json_cache:
            placeholders = ", ".join(["%s"] * len(tables))
            sql = (
                "SELECT TABLE_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
                "WHERE CONSTRAINT_SCHEMA = COALESCE(%s, DATABASE()) "
                f"AND TABLE_NAME IN ({placeholders})"
            )
            found: set[tuple[str, str]] = set()
            with self.connection.cursor() as cur:
                cur.execute(sql, [schema_hint, *tables])
                for table, clause in cur.fetchall():
                    match = _JSON_CHECK.match(str(clause))
                    if match:
                        found.add((str(table), match.group(1).replace("``", "`")))
            self._json_cache[key] = frozenset(found)
        return self._json_cache[key]

    def _origin_fields(self, sql: str, params: Sequence[Any]) -> list[MySQLField] | None:
        """Column origins (org_table) for MariaDB's JSON check lookup.

        The derived-table probe reports the probe alias as every column's table, so this
        second probe uses the parenthesised form `(<sql>) LIMIT 0`, which keeps the base
        table; MariaDB rejects it for some shapes (e.g. a leading WITH), in which case JSON
        columns are reported as text — still exact UTF-8, only the logical type is lost.
        """
        try:
            with self.connection.cursor() as cur:
                cur.execute(f"({sql}) LIMIT 0", list(params) or None)
                packets = wire.field_packets(cur)
                cur.fetchall()
        except pymysql.err.MySQLError:
            return None
        return [_field_of(p) for p in packets]

    def _probe_columns(
        self, sql: str, params: Sequence[Any], table_hint: tuple[str | None, str] | None
    ) -> list[SourceColumn]:
        probe = f"SELECT * FROM ({sql}) AS _rivet_probe LIMIT 0"
        with self.connection.cursor() as cur:
            cur.execute(probe, list(params) or None)
            packets = wire.field_packets(cur)
            cur.fetchall()
        fields = [_field_of(p) for p in packets]
        json_columns: frozenset[tuple[str, str]] = frozenset()
        if self.is_mariadb and any(
            f.type_code in _TEXTUAL and f.charsetnr != BINARY_CHARSET for f in fields
        ):
            origins = self._origin_fields(sql, params)
            if origins is not None and len(origins) == len(fields):
                json_columns = self._json_columns(origins, table_hint[0] if table_hint else None)
                fields = [
                    MySQLField(f.name, f.type_code, f.flags, f.charsetnr, f.length, f.decimals,
                               o.org_table, o.org_name)
                    for f, o in zip(fields, origins, strict=True)
                ]
        return [mysql_column(f, json_columns) for f in fields]

    def planned_read_path(self) -> str | None:
        return mysql_raw.planned_path(self.connection)

    def stream(
        self, sql: str, params: Sequence[Any], schema: pa.Schema, batch_rows: int
    ) -> Iterator[pa.RecordBatch]:
        """Raw packets → Arrow (`mysql_raw`) by default, else the row path (module doc)."""
        self._check_stream_args(batch_rows)
        if mysql_raw.read_path_mode() == "rows":
            reason: str | None = f"{mysql_raw.READ_PATH_ENV}=rows"
        else:
            reason = wire.unsupported_reason(self.connection)
            off = wire.fallback(self.connection) if reason is not None else None
            if off is not None:
                warn_once(off)  # loud: a driver upgrade must not turn the fast path off silently
        if reason is not None:
            mysql_raw.log.info("MySQL read path: rows (%s)", reason)
            yield from super().stream(sql, params, schema, batch_rows)
            return
        sql = strip_sql(sql)
        if mysql_raw.read_path_mode() in ("auto", "binary"):
            binary = self._plan_binary(sql, params, schema)
            if binary is not None:
                prepared, decoder = binary
                mysql_raw.log.info("MySQL read path: binary (%d column(s), prepared statement)",
                                   len(schema))
                with ReadAhead(
                    mysql_binary.stream_binary(self.connection, prepared, decoder, batch_rows,
                                               self.driver_errors),
                    **batch_budget(), name="rivet-mysql-read",
                ) as ahead:
                    yield from ahead
                return
        with self.driver_errors("starting the query"):
            live, cur = self._execute_unbuffered(sql, params)
        try:
            if len(live) != len(schema):
                raise SourceError(
                    f"the query returns {len(live)} column(s) but the expected schema has "
                    f"{len(schema)} ({', '.join(schema.names)}) — the source changed between "
                    f"describe and read; re-run the export"
                )
            result = wire.unread_rows(cur)
            if result is None:
                return  # no result set: nothing to read (the row path yields nothing too)
            decoder = mysql_raw.BatchDecoder(
                schema, live, wire.value_converters(result), self._converters(schema, live),
                self.tuning.max_value_mb,
            )
            mysql_raw.log.info(
                "MySQL read path: raw (%d of %d column(s) vectorized)",
                len(decoder.vector_columns), len(schema),
            )
            reader = mysql_raw.PacketReader(self.connection, result)
            # framing + decode of batch N+1 on a thread while the consumer encodes batch N
            with ReadAhead(
                mysql_raw.stream_raw(reader, decoder, batch_rows, self.driver_errors),
                **batch_budget(), name="rivet-mysql-read",
            ) as ahead:
                yield from ahead
        finally:
            try:
                cur.close()
            except pymysql.err.Error:
                pass  # the connection is already broken; the read error surfaced above

    def _plan_binary(
        self, sql: str, params: Sequence[Any], schema: pa.Schema
    ) -> tuple[mysql_binary.Prepared, mysql_binary.BinaryBatchDecoder] | None:
        """Prepare `sql` for the binary protocol when every column qualifies, else log why
        not and return None (the text path reads it)."""
        conn = self.connection
        with self.driver_errors("preparing the query"):
            rendered = conn.cursor().mogrify(sql, list(params)) if params else sql
        try:
            prepared = mysql_binary.prepare(conn, rendered)
        except pymysql.err.OperationalError:
            raise  # the connection is gone: the text path would fail the same way
        except pymysql.err.Error as exc:
            mysql_raw.log.info("MySQL binary protocol not used (the server cannot prepare "
                               "the query: %s)", exc)
            return None
        if prepared is None:
            mysql_raw.log.info("MySQL binary protocol not used (the query has '?' markers)")
            return None
        json_columns: frozenset[tuple[str, str]] = frozenset().union(*self._json_cache.values())
        live = [mysql_column(_field_of(p), json_columns) for p in prepared.fields]
        reason = mysql_binary.ineligible_reason(prepared, live, schema)
        decoder = None
        if reason is None:
            decoder = mysql_binary.BinaryBatchDecoder(
                schema, live, prepared.fields, mysql_binary.pymysql_decoders(conn, prepared.fields),
                self._converters(schema, live), self.tuning.max_value_mb,
            )
            reason = mysql_binary.eligible_casts(decoder)
        if reason is not None or decoder is None:
            with self.driver_errors("closing a prepared statement"):
                mysql_binary.close(conn, prepared)
            mysql_raw.log.info("MySQL binary protocol not used (%s)", reason)
            return None
        return prepared, decoder

    def _execute_unbuffered(
        self, sql: str, params: Sequence[Any]
    ) -> tuple[list[SourceColumn], pymysql.cursors.SSCursor]:
        """Run `sql` on an unbuffered cursor; return the live columns and the open cursor."""
        cur = self.connection.cursor(pymysql.cursors.SSCursor)
        try:
            if params:
                cur.execute(sql, list(params))
            else:
                cur.execute(sql)
            packets = wire.field_packets(cur)
        except BaseException:
            cur.close()
            raise
        # Column info needs no extra query here: the JSON check lookup is cached from
        # describe, and a lookup now would collide with the open unbuffered result.
        fields = [_field_of(p) for p in packets]
        json_columns: frozenset[tuple[str, str]] = frozenset().union(*self._json_cache.values())
        return [mysql_column(f, json_columns) for f in fields], cur

    def _open_cursor(
        self, sql: str, params: Sequence[Any], batch_rows: int
    ) -> tuple[list[SourceColumn] | None, Iterator[Sequence[Sequence[Any]]]]:
        live, cur = self._execute_unbuffered(sql, params)
        return live, _fetch_chunks(cur, batch_rows)

    def _scalar(self, sql: str, params: Sequence[Any]) -> Any:
        with self.connection.cursor() as cur:
            if params:
                cur.execute(sql, list(params))
            else:
                cur.execute(sql)
            row = cur.fetchone()
            cur.fetchall()
        return None if row is None else row[0]


def _fetch_chunks(cur: pymysql.cursors.SSCursor, batch_rows: int) -> Iterator[Sequence[Sequence[Any]]]:
    try:
        while True:
            rows = cur.fetchmany(batch_rows)
            if not rows:
                return
            yield rows
    finally:
        try:
            cur.close()  # drains any unread rows so the connection stays usable
        except pymysql.err.Error:
            pass  # the connection is already broken; the read error surfaced above
