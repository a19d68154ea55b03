"""PostgreSQL default read path: `COPY (<sql>) TO STDOUT (FORMAT binary)` on the session's
own connection, fetched and decoded into Arrow buffers by a small C extension
(`_pgbinary.c`) with the GIL released.

Why not ADBC (which was the default before): the ADBC PostgreSQL driver wheels on PyPI
(1.12, 1.13) are compiled without optimisation — `perf` on the bench `orders` export showed
40 % of the client's CPU in the driver, in out-of-line calls such as
`std::unique_ptr::operator->` and `__bswap_32`. It also needs a second connection per read
(snapshot export and import: two more round trips per chunk window). And psycopg's own COPY
reads hand over one CopyData message (one row) per Python call: ~1 µs a row, 9.7 s for the
10 M-row bench `narrow` table against a 5.3 s `psql \\copy` floor. Here C loops over
`PQgetCopyData` (the libpq psycopg loaded, found by `libpq_access`) for ~4 MiB at a time and
decodes whole tuples straight into Arrow's buffers; Python only wraps the buffers.

Semantics are those of the row path and of `adbc`:
- Same snapshot and settings: the COPY runs on the session's connection inside its
  REPEATABLE READ READ ONLY transaction, in a savepoint, so abandoning the stream (the COPY
  is cancelled) leaves the snapshot usable, and the statement/lock timeouts apply.
- Parameters are bound client-side by psycopg (`copy.render_sql`).
- Types: a column is eligible when its type (domains resolved) maps exactly onto the Arrow
  type `describe()` chose (`ineligible_reason`; also used by `adbc`): bool, int2/4/8,
  float4/8, date, time, timestamp[tz], text/varchar/bpchar/name, enum (sent as its label's
  text), bytea, json/jsonb, uuid (uuid, json and jsonb also into a string, by a `columns:`
  override: the decoder writes PostgreSQL's own text form, `_binary_ineligible` — a Delta
  table has no uuid, an Iceberg table no JSON) and
  numeric(p ≤ 38, s ≥ 0) → decimal128 computed exactly from the base-10000 digits. Values the
  other paths refuse are refused here with the same messages: dates and timestamps outside
  0001-01-01 .. 9999-12-31 (±infinity), `24:00:00`, numeric NaN/±Infinity, a numeric that
  does not fit its column's precision.
- Errors from the server (statement timeout, terminated backend) arrive as psycopg errors
  and are classified and redacted like every other PG error (`driver_errors`).
- Memory: one fetch is ~1..4 MiB of COPY data (`adbc.batch_bytes`), decoded on a
  reader thread (`read_ahead.ReadAhead`, `batch_budget`) while the consumer encodes.

The path needs the C extension (built by `scripts/bootstrap.sh`; no compiler → the ADBC
path), a tested psycopg release and a libpq whose functions ctypes can find (Linux
`/proc/self/maps`) — every psycopg internal it touches is in `libpq_access`, which says
what is missing; the session then warns once (`fast_path.warn_once`) and reads through
ADBC. The client encoding must be UTF-8 (text is copied as sent).
"""

from __future__ import annotations

import decimal
import functools
import logging
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg

from rivet_core.errors import SourceError, best_effort
from rivet_core.lazy_modules import pa
from rivet_core.source.base import SourceColumn
from rivet_core.source.batching import check_value_sizes, split_batches, value_coercer
from rivet_core.source.fast_path import Fallback, warn_once
from rivet_core.source.postgres import libpq_access
from rivet_core.source.postgres.copy import (
    PgReadSession,
    Probed,
    copy_in_savepoint,
    first_ineligible,
)
from rivet_core.source.query import quote_ident_pg
from rivet_core.source.read_ahead import ReadAhead, batch_budget

try:
    from rivet_core.source.postgres import _pgbinary
except ImportError:  # no C compiler at install time: the ADBC path serves instead
    _pgbinary = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from rivet_core.source.postgres.types import PgTypeInfo

log = logging.getLogger("rivet.source")

#: PostgreSQL type name (domains resolved) → the Arrow type both binary paths produce, when
#: that is exactly the type `types_pg` maps the column to; numeric is handled apart.
@functools.cache
def exact_types() -> dict[str, pa.DataType]:
    """Built on first use: `pa` is lazy (rivet_core/lazy_modules.py)."""
    return {
        "bool": pa.bool_(), "int2": pa.int16(), "int4": pa.int32(), "int8": pa.int64(),
        "float4": pa.float32(), "float8": pa.float64(), "date": pa.date32(),
        "time": pa.time64("us"), "timestamp": pa.timestamp("us"),
        "timestamptz": pa.timestamp("us", tz="UTC"), "text": pa.string(),
        "varchar": pa.string(), "bpchar": pa.string(), "name": pa.string(),
        "bytea": pa.binary(), "json": pa.json_(), "jsonb": pa.json_(), "uuid": pa.uuid(),
    }

#: Type name → the decoder's column kind (`_pgbinary.c`).
_KINDS: dict[str, str] = {
    "bool": "b", "int2": "h", "int4": "i", "int8": "l", "float4": "f", "float8": "d",
    "date": "D", "time": "T", "timestamp": "S", "timestamptz": "S", "text": "s",
    "varchar": "s", "bpchar": "s", "name": "s", "json": "s", "jsonb": "j", "bytea": "y",
    "uuid": "u", "numeric": "n",
}

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_HEADER = struct.Struct("!11sII")  # signature, flags, header extension length

#: Why a temporal value has no Arrow form (`range_error`), shared by both binary paths.
OUT_OF_RANGE = "outside 0001-01-01 .. 9999-12-31, e.g. infinity"
NO_TIME_24 = "24:00:00 has no Arrow time"


def range_error(field: pa.Field, what: str) -> SourceError:
    """A value Arrow cannot hold (`OUT_OF_RANGE`, `NO_TIME_24`): name the column, suggest a cast."""
    return SourceError(
        f"column '{field.name}': PG value cannot be read as {field.type} ({what}) — cast the "
        "column in SQL (for example to text), or filter the row out"
    )


def numeric_fit_error(field: pa.Field, detail: str = "") -> SourceError:
    """A numeric value that does not fit the column's decimal128 precision/scale."""
    return SourceError(
        f"column '{field.name}': PG numeric value does not fit {field.type}{detail} — widen the "
        "column's precision with a `columns:` override or cast in SQL"
    )


def base_typname(info: PgTypeInfo) -> str:
    """The column's type name, a domain resolved to its base type; an enum reads as `text`
    (its binary send form is the label's text, exactly what the row path returns)."""
    if info.typtype == "e":
        return "text"
    return info.base_typname if info.typtype == "d" and info.base_typname else info.typname


def ineligible_reason(field: pa.Field, live: SourceColumn, info: PgTypeInfo) -> str | None:
    """Why this column has no exact binary decode into `field.type` (None: it has one)."""
    if live.arrow_type is None or live.arrow_type != field.type:
        return f"column '{field.name}' has an override ({field.type}) that changes its representation"
    if info.typcategory == "A":
        return f"column '{field.name}' is an array"
    typname = base_typname(info)
    if typname == "numeric":
        if pa.types.is_decimal128(field.type) and field.type.scale >= 0:
            return None
        return f"column '{field.name}' (numeric) needs {field.type}"
    expected = exact_types().get(typname)
    if expected is None or expected != field.type:
        return f"column '{field.name}' has type {typname}"
    return None


# --- whether the C reader runs here ------------------------------------------------------

def c_extension_missing() -> Fallback | None:
    """The `Fallback` when rivet's C decoder is not built (no compiler at install time)."""
    if _pgbinary is not None:
        return None
    return libpq_access.not_usable(
        "rivet's C decoder rivet_core.source.postgres._pgbinary is not built",
        "install a C compiler and re-run scripts/bootstrap.sh (or reinstall rivet)")


def _usable_on(conn: psycopg.Connection[Any]) -> Fallback | None:
    """Why the C reader cannot drive this connection (None: it can)."""
    return c_extension_missing() or libpq_access.fallback(conn)


def planned_path(conn: psycopg.Connection[Any]) -> str:
    """What `rivet doctor` shows: the path a read takes on this install."""
    off = _usable_on(conn)
    if off is None:
        return (f"binary COPY decoded in C (psycopg {libpq_access.psycopg_version()}, its libpq "
                "found) for columns with an exact binary form, else the row path")
    return f"fallback — {off.message()}"


#: Source types a `columns:` override may read into a plain string on this path, and the
#: decoder's kind for that: a uuid in PostgreSQL's own text form ('U'); json's text as sent;
#: jsonb's text after its version byte ('j') — both exactly what `::text` returns. A Delta
#: table has no uuid type and an Iceberg v2 table no JSON type, so these overrides are what
#: the table-format gates name; without this they sent the whole query to the row path.
_AS_TEXT_KINDS: dict[str, str] = {"uuid": "U", "json": "s", "jsonb": "j"}


def _text_kind(field: pa.Field, info: PgTypeInfo) -> str | None:
    """The decoder kind when this column is read into a string by override, else None."""
    return _AS_TEXT_KINDS.get(base_typname(info)) if field.type == pa.string() else None


#: Cast on the server, for a column the decoder has no kind for but whose row-path value is
#: exactly the cast's result: a string column (interval in the session's ISO-8601 style,
#: "char", citext, a domain over one of them — the row path loads all of these as the
#: server's text output, which is what `::text` returns), and oid, read as int8 on both
#: paths. Without it one such column sent the whole query to the row path: ~5.6× the wall
#: and 371 MB against 201 MB for the 5 M-row `orders` (docs/benchmarks.md "The row path's
#: cliff"). Arrays and overrides are not cast: their row-path values are not a cast's text.
_SERVER_CASTS: dict[str, str] = {"oid": "int8"}


def _server_cast(field: pa.Field, live: SourceColumn, info: PgTypeInfo) -> str | None:
    """The type to cast this column to in the COPY (module comment above), or None."""
    typname = base_typname(info)
    if (info.typcategory == "A" or typname in _KINDS or live.arrow_type is None
            or live.arrow_type != field.type or live.converter is not None):
        return None
    if field.type == pa.string():
        return "text"
    cast = _SERVER_CASTS.get(typname)
    return cast if cast is not None and exact_types().get(cast) == field.type else None


def _binary_ineligible(field: pa.Field, live: SourceColumn, info: PgTypeInfo) -> str | None:
    """`ineligible_reason`, plus the overrides only this decoder can honour exactly and the
    columns it reads cast on the server."""
    if _text_kind(field, info) is not None or _server_cast(field, live, info) is not None:
        return None
    return ineligible_reason(field, live, info)


def server_casts(probed: Probed, schema: pa.Schema) -> list[str | None]:
    """Per column, the server-side cast the binary COPY applies (None: read as it is)."""
    return [_server_cast(field, live, info) for field, (live, info) in zip(schema, probed, strict=True)]


def with_server_casts(sql: str, probed: Probed, casts: list[str | None], has_params: bool) -> str:
    """`sql` wrapped so that the columns with a cast are read cast (`server_casts`); `sql`
    itself when none is. The wrapper selects the result's own columns by name, in order, so
    it is used only when those names are unique (`plan_binary`). `%` in a name is doubled
    when the query has parameters: psycopg binds them client-side (`render_sql`)."""
    if not any(casts):
        return sql
    columns = []
    for (live, _), cast in zip(probed, casts, strict=True):
        name = quote_ident_pg(live.name)
        if has_params:
            name = name.replace("%", "%%")
        columns.append(f"{name}::{cast}" if cast else name)
    return f"SELECT {', '.join(columns)} FROM (\n{sql}\n) AS _rivet_cast"


def plan_binary(session: PgReadSession, probed: Probed, schema: pa.Schema) -> tuple[bool, str]:
    """(use the binary path?, why) from the query's probed columns."""
    off = _usable_on(session.connection)
    if off is not None:
        warn_once(off)  # loud: a driver upgrade must not turn the fast path off silently
        return False, off.message()
    encoding = session.connection.info.encoding
    if encoding not in ("utf-8", "utf8"):
        return False, f"client encoding is {encoding}, not UTF-8"
    why = first_ineligible(schema, probed, _binary_ineligible)
    if why is not None:
        return False, why
    cast = [f"{live.name} ({base_typname(info)}) as {c}"
            for (live, info), c in zip(probed, server_casts(probed, schema), strict=True) if c]
    if not cast:
        return True, f"all {len(schema)} column(s) have an exact binary form"
    names = [live.name for live, _ in probed]
    if len(set(names)) != len(names):
        return False, "a column needs a cast on the server and the result's column names are not unique"
    return True, (f"all {len(schema)} column(s) have an exact binary form; cast on the server: "
                  + ", ".join(cast))


# --- the stream --------------------------------------------------------------------------

class _CopyOut:
    """One binary COPY on the session's connection: the reader thread fetches and decodes
    (`batches`); the consumer's thread ends it (`finish`) after the reader has stopped."""

    def __init__(self, conn: psycopg.Connection[Any], copy: psycopg.Copy, probed: Probed,
                 schema: pa.Schema, casts: list[str | None], max_value_mb: int) -> None:
        self._conn = conn
        self._copy = copy
        self._get, self._free = libpq_access.copy_data_functions()
        self._ptr = libpq_access.pgconn_pointer(conn)
        self._schema = schema
        self._max_value_mb = max_value_mb
        self._kinds = "".join(_KINDS[cast] if cast else (_text_kind(field, info) or _KINDS[base_typname(info)])
                              for field, (_, info), cast in zip(schema, probed, casts, strict=True)).encode()
        self._precisions = [f.type.precision if pa.types.is_decimal(f.type) else 0 for f in schema]
        self._scales = [f.type.scale if pa.types.is_decimal(f.type) else 0 for f in schema]
        self.state = "open"  # open → ended (COPY data complete) | failed (libpq error)
        self.truncated = False  # the data ended before the trailer (see `batches`)

    def _fetch(self, max_bytes: int) -> bytes:
        data, status = _pgbinary.fetch(self._get, self._free, self._ptr, max_bytes)
        if status:
            self.state = "ended" if status == 1 else "failed"
        return data

    def batches(self, fetch_bytes: int) -> Iterator[pa.RecordBatch]:
        """Decoded, checked batches of the COPY (runs on the reader thread). Stops without
        raising when the data ends early or libpq reports an error: `finish` raises the
        server's error (or the truncation)."""
        data, offset, header = b"", 0, False
        while self.state == "open":
            chunk = self._fetch(fetch_bytes)
            # A tuple cut off at the end of the last fetch is carried over (a copy of one
            # partial tuple); usually every fetch ends on a tuple boundary.
            data = data[offset:] + chunk if offset < len(data) else chunk
            offset = 0
            if not header:
                offset = self._header(data)
                if offset < 0:
                    offset = 0
                    continue
                header = True
            columns, rows, offset, ended = self._decode(data, offset)
            if rows:
                yield self._batch(columns, rows)
            if ended:
                if self.state == "open":
                    self._fetch(1)  # reach libpq's end of the COPY (-1)
                return
        # The COPY data ended without the trailer: libpq reports a server error (timeout,
        # terminated backend, division by zero) as the end of the data too; `finish` raises
        # that error, or — when the server says the COPY succeeded — the truncation.
        self.truncated = True

    def _header(self, data: bytes) -> int:
        """Offset of the first tuple, or -1 while the header is incomplete."""
        if len(data) < _HEADER.size:
            return -1
        signature, _flags, extension = _HEADER.unpack_from(data)
        if signature != _SIGNATURE:
            raise SourceError("PG binary COPY data starts without the PGCOPY signature")
        start = _HEADER.size + extension
        return start if len(data) >= start else -1

    def _decode(self, data: bytes, offset: int) -> tuple[list[Any], int, int, bool]:
        try:
            return _pgbinary.decode(data, offset, self._kinds, self._precisions, self._scales,
                                    1 << 30)
        except ValueError as exc:
            raise self._value_error(exc) from None

    def _value_error(self, exc: ValueError) -> Exception:
        if len(exc.args) != 3:
            return exc
        what, column, code = exc.args
        field = self._schema.field(column)
        if what == "protocol":
            return SourceError(f"column '{field.name}': malformed PG binary COPY data (row {code} of "
                               "a batch) — retry the export; if it persists, report it")
        if code == 1:
            return range_error(field, OUT_OF_RANGE)
        if code == 2:
            return range_error(field, NO_TIME_24)
        if code in (3, 4, 5):
            special = {3: "NaN", 4: "Infinity", 5: "-Infinity"}[code]
            try:
                value_coercer(field.type, field.name)(decimal.Decimal(special))
            except Exception as coerced:  # error boundary: returns the row path's own error
                return coerced
        return numeric_fit_error(field)

    def _batch(self, columns: list[Any], rows: int) -> pa.RecordBatch:
        arrays = []
        for field, (validity, nulls, values, data) in zip(self._schema, columns, strict=True):
            storage = field.type.storage_type if isinstance(field.type, pa.BaseExtensionType) else field.type
            buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(values)]
            if data is not None:
                buffers.append(pa.py_buffer(data))
            array = pa.Array.from_buffers(storage, rows, buffers, null_count=nulls)
            if isinstance(field.type, pa.BaseExtensionType):
                array = pa.ExtensionArray.from_storage(field.type, array)
            check_value_sizes(array, field.name, self._max_value_mb)
            arrays.append(array)
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema)

    def cancel(self) -> None:
        """Interrupt a fetch in flight (another thread): the server ends the COPY with an
        error, which `finish` then discards."""
        with best_effort("cancel the COPY", logger=log):
            self._conn.cancel_safe(timeout=10)

    def finish(self, *, raise_errors: bool) -> None:
        """End the COPY on the consumer's thread: an unfinished one is cancelled and drained;
        then the final result is read (the server's error raised when `raise_errors`)."""
        if self.state == "open":
            self.cancel()
            while self.state == "open":
                self._fetch(4 * 1024 * 1024)
        results = libpq_access.end_copy(self._conn, self._copy)
        if not raise_errors:
            return
        libpq_access.raise_first_error(self._conn, results)
        if not results:
            raise SourceError("PG binary COPY ended without a final result")
        if self.truncated:
            raise SourceError("PG binary COPY ended without its trailer (truncated stream) — "
                              "retry the export; if it persists, report it with the server version")


def stream_binary(
    session: PgReadSession, sql: str, params: Any, probed: Probed, schema: pa.Schema,
    batch_rows: int, fetch_bytes: int,
) -> Iterator[pa.RecordBatch]:
    """Yield `schema` batches of at most `batch_rows` rows from a binary COPY of `sql` (in a
    savepoint: `copy.copy_in_savepoint`)."""
    conn = session.connection
    casts = server_casts(probed, schema)  # the COPY's casts and the decoder's kinds agree
    sql = with_server_casts(sql, probed, casts, bool(params))
    with copy_in_savepoint(session, sql, params, "binary") as copy:
        out = _CopyOut(conn, copy, probed, schema, casts, session.tuning.max_value_mb)
        ahead = ReadAhead(out.batches(fetch_bytes), cancel=out.cancel, **batch_budget(),
                          name="rivet-pg-binary-read")
        try:
            yield from split_batches(iter(ahead), batch_rows)
        except BaseException:
            ahead.close()
            out.finish(raise_errors=False)
            raise
        ahead.close()
        out.finish(raise_errors=True)


__all__ = ["c_extension_missing", "exact_types", "planned_path", "NO_TIME_24", "OUT_OF_RANGE", "base_typname", "ineligible_reason",
           "numeric_fit_error", "plan_binary", "range_error", "stream_binary"]
