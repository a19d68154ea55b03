"""The engine-neutral half of a source session: schema assembly, overrides, streaming loop.

A `SourceSession` is one connection and one consistent read (PG: a REPEATABLE READ READ
ONLY snapshot; MySQL: a consistent-snapshot transaction; SQLite: a read transaction).
Engine modules supply three things — how to probe the result columns (`_probe_columns`),
how to open a streaming result (`_open_cursor`), and how to run a scalar query — and this
module does the rest the same way for every engine:

- `describe` applies `columns:` overrides (they always win), then fails with ONE
  `UnsupportedTypeError` listing EVERY column without a safe mapping, before any row is
  read. Field metadata carries `rivet.native_type` and, where relevant,
  `rivet.logical_type` (json, uuid, enum, interval).
- `stream` yields batches of exactly the schema it was given, at most `batch_rows` rows
  each, converting column-wise (see `batching`), never holding the whole result.
- Driver errors leave as `SourceError` (permanent) or `TransientError` (retryable, per
  `retry.classify_error`), raised `from` the driver error, with credentials redacted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import RivetError, SourceError, TransientError, UnsupportedTypeError
from rivet_core.lazy_modules import pa
from rivet_core.redact import redact_secrets
from rivet_core.source.batching import Converter, NullTally, make_converter, rows_to_batch
from rivet_core.source.retry import classify_error

if TYPE_CHECKING:
    from rivet_core.source.dialect import RawResult, SourceDialect
    from rivet_core.source.pressure import PressureProbe

NATIVE_TYPE_KEY = b"rivet.native_type"
LOGICAL_TYPE_KEY = b"rivet.logical_type"


@dataclass(frozen=True)
class SourceColumn:
    """One result column as the engine sees it, before overrides.

    `arrow_type` is None when there is no safe mapping (`unsupported_reason` says why).
    `direct` is True when the driver's Python values for this column already have the
    types `pa.array` expects for `arrow_type` (fast path); False forces per-value coercion.
    `converter`, when set, replaces the generic converter for the native type.
    """

    name: str
    native_type: str
    arrow_type: pa.DataType | None
    logical_type: str | None = None
    unsupported_reason: str | None = None
    direct: bool = True
    converter: Converter | None = None


def logical_type_of(arrow_type: pa.DataType) -> str | None:
    """Logical type implied by an Arrow extension type (used for overrides)."""
    if isinstance(arrow_type, pa.BaseExtensionType):
        if arrow_type.extension_name == "arrow.json":
            return "json"
        if arrow_type.extension_name == "arrow.uuid":
            return "uuid"
    return None


def unsupported_message(engine_label: str, bad: Sequence[SourceColumn]) -> str:
    """The one error that lists every unmappable column with its type and fix."""
    lines = [
        f"{len(bad)} column(s) have no safe Rivet mapping — add column overrides in rivet.yaml "
        f"(columns: {{col: type}}) or cast in SQL:"
    ]
    for column in bad:
        lines.append(
            f"  • {column.name} ({engine_label} type '{column.native_type}'): "
            f"{column.unsupported_reason}"
        )
    return "\n".join(lines)


def strip_sql(sql: str) -> str:
    """Trim whitespace and trailing semicolons so the text can be wrapped as a subquery."""
    text = sql.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    return text


class SourceSession:
    """One connection + one consistent read; use as a context manager (see module doc)."""

    engine: str = ""
    engine_label: ClassVar[str] = ""
    #: The engine's SQL and rules for the layers above (rivet_core/source/dialect.py).
    dialect: ClassVar[SourceDialect]

    def __init__(self, url: str, tuning: ResolvedTuning) -> None:
        self._url = url
        self.tuning = tuning
        self._entered = False
        #: Values this session's reads wrote as NULL by the type contract (batching.NullTally).
        self.mapped_to_null: NullTally = {}

    # --- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> SourceSession:
        self._connect()
        self._entered = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._entered = False
        self._close(success=exc is None)

    def finish_read(self) -> None:
        """End this session's read (commit its snapshot transaction) and keep the session for
        another: a caller that reads several independent units in turn (a chunked run's
        windows, rivet_core/pipeline/resources/window_sessions.py) calls `begin_read` before the next.
        Engines that can keep the connection do (PostgreSQL, MySQL: no new connection — on
        PostgreSQL a new server process — per unit); the others close it here and connect
        again in `begin_read`. Nothing of the finished read is visible to the next one: it
        takes a new snapshot."""
        self._require_open()
        self._finish_read()

    def begin_read(self) -> None:
        """Start the next read (a new snapshot transaction) after `finish_read`."""
        self._require_open()
        self._begin_read()

    def _finish_read(self) -> None:
        self._close(success=True)

    def _begin_read(self) -> None:
        self._connect()

    def _require_open(self) -> None:
        if not self._entered:
            raise SourceError(
                f"{self.engine} source session used outside its `with` block — open it with "
                f"`with open_source(url, tuning) as session:`"
            )

    def _check_stream_args(self, batch_rows: int) -> None:
        """The preconditions of every `stream` override (each engine's fast path checks
        them before choosing its read path, so a bad call fails the same way on all)."""
        self._require_open()
        if batch_rows < 1:
            raise ValueError(f"batch_rows must be >= 1, got {batch_rows}")

    # --- engine hooks -------------------------------------------------------------------

    def _connect(self) -> None:
        raise NotImplementedError

    def _close(self, *, success: bool) -> None:
        raise NotImplementedError

    def _end_read_transaction(self, driver_error: type[BaseException], *, success: bool) -> None:
        """Shared `_close` of the DB-API servers (PostgreSQL, MySQL): commit a finished read,
        roll back an abandoned one, always close. A failing commit of a read that completed
        is reported (the snapshot's data may be unreliable); anything else on the way out is
        not, because the connection is being released anyway."""
        conn, self._conn = self._conn, None  # type: ignore[attr-defined]
        if conn is None:
            return
        try:
            if success:
                conn.commit()
            else:
                conn.rollback()
        except driver_error as exc:
            if success:
                raise wrap_driver_error(exc, f"{self.engine_label} error while ending the read transaction") from exc
        finally:
            try:
                conn.close()
            except driver_error:
                pass  # already closed by the server; nothing left to release

    def _commit_read_transaction(self, driver_error: type[BaseException]) -> None:
        """Shared `_finish_read` of the DB-API servers: commit the finished read and keep the
        connection (`_end_read_transaction` without the close)."""
        try:
            self.connection.commit()  # type: ignore[attr-defined]
        except driver_error as exc:
            raise wrap_driver_error(exc, f"{self.engine_label} error while ending the read transaction") from exc

    def quote_ident(self, name: str) -> str:
        raise NotImplementedError

    def _probe_columns(
        self, sql: str, params: Sequence[Any], table_hint: tuple[str | None, str] | None
    ) -> list[SourceColumn]:
        raise NotImplementedError

    def _open_cursor(
        self, sql: str, params: Sequence[Any], batch_rows: int
    ) -> tuple[list[SourceColumn] | None, Iterator[Sequence[Sequence[Any]]]]:
        """Start the streaming read; return the live column info (None if the engine
        cannot tell types before data, e.g. SQLite) and an iterator of row chunks."""
        raise NotImplementedError

    def _scalar(self, sql: str, params: Sequence[Any]) -> Any:
        raise NotImplementedError

    # --- public API ---------------------------------------------------------------------

    def probe_columns(
        self,
        sql: str,
        params: Sequence[Any] = (),
        table_hint: tuple[str | None, str] | None = None,
    ) -> list[SourceColumn]:
        """Result columns of `sql` as the engine maps them, *including* the unmappable ones
        (`arrow_type` None, `unsupported_reason` set), before `columns:` overrides.

        Scan-free like `describe` (SQLite reads at most a few sample rows to type an
        untyped expression); `params` and `table_hint` are as for `describe`.

        The raw material of `describe`, for reports that must show every column's fate
        (`rivet check`, `rivet init`) where `describe` would stop at the first unmappable
        column. Driver errors leave as `SourceError`/`TransientError` like everywhere else.
        """
        self._require_open()
        with self.driver_errors("describing the query"):
            return self._probe_columns(strip_sql(sql), params, table_hint)

    def describe(
        self,
        sql: str,
        params: Sequence[Any] = (),
        overrides: Mapping[str, pa.DataType] | None = None,
        table_hint: tuple[str | None, str] | None = None,
    ) -> pa.Schema:
        """Arrow schema of `sql`'s result, scan-free; raises listing every unmappable column.

        `overrides` (column → Arrow type, from `columns:`) beat autodetection and silence
        that column's "unsupported". `table_hint` = (schema, table) of a `table:` export;
        engines use it where result metadata alone is not enough (MariaDB JSON columns).
        """
        columns = self.probe_columns(sql, params, table_hint)
        overrides = overrides or {}
        fields: list[pa.Field] = []
        unsupported: list[SourceColumn] = []
        for column in columns:
            metadata = {NATIVE_TYPE_KEY: column.native_type.encode("utf-8")}
            override = overrides.get(column.name)
            if override is not None:
                arrow_type = override
                logical = logical_type_of(override) or (
                    column.logical_type if override == column.arrow_type else None
                )
            elif column.arrow_type is None:
                unsupported.append(column)
                continue
            else:
                arrow_type, logical = column.arrow_type, column.logical_type
            if logical:
                metadata[LOGICAL_TYPE_KEY] = logical.encode("utf-8")
            fields.append(pa.field(column.name, arrow_type, nullable=True, metadata=metadata))
        if unsupported:
            raise UnsupportedTypeError(unsupported_message(self.engine_label, unsupported))
        return pa.schema(fields)

    def stream(
        self, sql: str, params: Sequence[Any], schema: pa.Schema, batch_rows: int
    ) -> Iterator[pa.RecordBatch]:
        """Yield the result as batches of exactly `schema`, each at most `batch_rows` rows."""
        self._check_stream_args(batch_rows)
        with self.driver_errors("starting the query"):
            live_columns, chunks = self._open_cursor(strip_sql(sql), params, batch_rows)
        if live_columns is not None and len(live_columns) != len(schema):
            raise SourceError(
                f"the query returns {len(live_columns)} column(s) but the expected schema has "
                f"{len(schema)} ({', '.join(schema.names)}) — the source changed between "
                f"describe and read; re-run the export"
            )
        converters = self._converters(schema, live_columns)
        max_value_mb = self.tuning.max_value_mb
        iterator = iter(chunks)
        try:
            while True:
                with self.driver_errors("reading rows"):
                    rows = next(iterator, None)
                if rows is None:
                    return
                if rows:
                    yield rows_to_batch(rows, schema, converters, max_value_mb)
        finally:
            # An abandoned or failed stream must release its server-side cursor now, not
            # whenever the garbage collector gets to it: the session may run more queries.
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    def pressure_probe(self) -> PressureProbe | None:
        """A side connection that samples this source's load for the governor
        (rivet_core/source/pressure.py), or None when the engine has none (SQLite: one
        process, nobody else to spare). Never the session's own connection: the snapshot
        transaction must stay untouched."""
        return None

    def planned_read_path(self) -> str | None:
        """The read path `stream` takes on this install for columns with an exact fast form,
        for `rivet doctor` (rivet_core/source/fast_path.py): the fast path, or the fallback
        naming the driver release; None when the engine has no fast path (SQLite)."""
        return None

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """First column of the first row (None when there is no row)."""
        self._require_open()
        with self.driver_errors("running a probe query"):
            return self._scalar(strip_sql(sql), params)

    def catalog_query(self, sql: str, params: Sequence[Any] = (), *,
                      tolerate: bool = False) -> RawResult | None:
        """(column names, rows) of a statement the streaming path cannot run — `EXPLAIN`,
        PRAGMAs, catalog reads whose result must not go through `describe` (MySQL wraps a
        probe in a derived table, PostgreSQL declares a cursor, and neither accepts EXPLAIN
        there) — on this session's own connection, so it sees the same snapshot.

        `tolerate=True` is for a statement that may legitimately fail (EXPLAIN of a user
        query the planner rejects): PostgreSQL wraps it in a SAVEPOINT so the failure does
        not abort the snapshot transaction, and the failure returns None instead of raising.
        """
        self._require_open()
        try:
            return self.dialect.raw_fetch(self.connection, sql, params, tolerate)  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - every driver's error type funnels here
            if tolerate:
                return None
            raise wrap_driver_error(exc, f"{self.engine_label} error while reading the catalog") from exc

    # --- helpers ------------------------------------------------------------------------

    def _converters(
        self, schema: pa.Schema, live_columns: list[SourceColumn] | None
    ) -> list[Converter]:
        converters: list[Converter] = []
        for index, field in enumerate(schema):
            live = live_columns[index] if live_columns is not None else None
            native_match = live is not None and live.arrow_type == field.type
            if native_match and live is not None and live.converter is not None:
                converters.append(live.converter)
            else:
                direct = native_match and live is not None and live.direct
                converters.append(make_converter(field.type, field.name, direct=direct,
                                                 tally=self.mapped_to_null))
        return converters

    def driver_errors(self, doing: str) -> _DriverErrors:
        """A context manager that turns a driver exception raised while `doing` into a
        redacted SourceError/TransientError; the read-path modules use it too."""
        return _DriverErrors(self.engine_label, doing)


class _DriverErrors:
    """Context manager turning driver exceptions into redacted Source/Transient errors."""

    def __init__(self, engine_label: str, doing: str) -> None:
        self._engine_label = engine_label
        self._doing = doing

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if exc is None or isinstance(exc, (RivetError, GeneratorExit, KeyboardInterrupt)):
            return False
        if not isinstance(exc, Exception):
            return False
        raise wrap_driver_error(exc, f"{self._engine_label} error while {self._doing}") from exc


def wrap_driver_error(exc: BaseException, context: str, hint: str = "") -> RivetError:
    """A redacted RivetError for a driver exception; transient iff the classifier says so."""
    decision = classify_error(exc)
    detail = redact_secrets(str(exc).strip()) or type(exc).__name__
    message = f"{context}: {detail}"
    if hint:
        message += f" — {hint}"
    if decision.transient:
        return TransientError(message)
    return SourceError(message)
