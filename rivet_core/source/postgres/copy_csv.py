"""PostgreSQL fast read path: `COPY (<sql>) TO STDOUT (FORMAT csv)` → pyarrow streaming CSV.

The row path (`PgReadSession` + `SourceSession.stream`) fetches rows through a named
server-side cursor and converts Python objects to Arrow column by column. For results whose
every column has a text form that Arrow's CSV reader parses *exactly* into the type
`describe()` chose, this module instead streams the server's CSV output through a small
file-like adapter into `pyarrow.csv.open_csv` and yields record batches of exactly the
given schema — same snapshot transaction (the COPY runs on the session's connection, inside
its REPEATABLE READ READ ONLY transaction with the same `SET LOCAL` settings), same
statement/lock timeouts, same error wrapping, same `max_value_mb` ceiling, same numeric
NaN error, bounded memory (one CSV block plus one output batch in flight).

Eligibility (per column; any ineligible column sends the whole query to the row path):
- the schema field's type equals the type the live result column maps to (so a `columns:`
  override that changes the representation is ineligible) and
- the native type (domains resolved to their base type) is one of: bool, int2/4/8, oid,
  float4/8, numeric(p,s) with p <= 38 and s >= 0 (decimal128), text/varchar/bpchar/name/
  "char"/citext, enum, date, time, timestamp, timestamptz, uuid, json, jsonb, interval.
Not eligible: arrays, bytea, decimal256, everything else. The connection's client encoding
must be UTF-8.

PG CSV output in the session's settings (UTC TimeZone, ISO DateStyle, iso_8601
IntervalStyle, extra_float_digits=1 → shortest exact floats): NULL is an unquoted empty
field and '' is `""` (→ `strings_can_be_null`, not `quoted_strings_can_be_null`); booleans
are t/f; floats may be NaN/Infinity/-Infinity (parsed exactly by Arrow); timestamptz is
`YYYY-MM-DD HH:MM:SS[.ffffff]+00`; numeric is exact decimal text with the column's scale
(parsed straight into decimal128, never via float); uuid is canonical text (decoded to the
16 raw bytes vectorized); json/jsonb/interval/enum/text are the exact text the row path
receives.

The private switch `RIVET_PG_READ_PATH=rows|copy|adbc|binary|auto` (default auto) picks a
path: `auto`/`binary` try the binary COPY path first (`pg_binary`, when its C extension is
built and every column maps exactly), then ADBC (`pg_adbc`), then this CSV path, then the
row path; `adbc` starts at ADBC; `copy` starts at this CSV path; `rows` forces the row path. An ineligible schema always falls through to the
next path. The choice and its reason are logged at INFO on `rivet.source`.
"""

from __future__ import annotations

import decimal
import logging
import re
import threading
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from rivet_core.errors import SourceError

try:  # numpy is in the lock (via pyarrow/pandas users) but not a direct dependency
    import numpy as np
except ImportError:  # pragma: no cover - exercised only without numpy
    np = None  # type: ignore[assignment]
from rivet_core.source.base import SourceColumn
from rivet_core.source.batching import (
    check_value_sizes,
    estimate_row_bytes,
    rebatch,
    value_coercer,
)
from rivet_core.source.postgres.copy import (
    READ_PATH_ENV,
    PgReadSession,
    Probed,
    copy_in_savepoint,
    first_ineligible,
)

if TYPE_CHECKING:
    from rivet_core.source.postgres.types import PgTypeInfo

log = logging.getLogger("rivet.source")

_MIB = 1024 * 1024
#: CSV read block. Arrow's streaming CSV reader reads ahead on a background I/O thread and
#: queues up to a few dozen blocks whatever the consumer's pace, so the block size — not the
#: batch size — bounds the reader's memory. Measured on the 11-column bench `orders` table:
#: 16 MiB blocks cost ~+250 MB RSS, 1 MiB blocks ~+80 MB, at the same client CPU. A
#: record larger than half a block gets a segment of its own (see `_CopyReader`).
_MIN_BLOCK = 1 * _MIB
_MAX_BLOCK = 1 * _MIB

#: Native types (domain base resolved) whose PG CSV text Arrow parses exactly.
_DIRECT = {
    "bool", "int2", "int4", "int8", "oid", "float4", "float8", "date", "time",
    "timestamp", "timestamptz",
}
_TEXT = {"text", "varchar", "bpchar", "name", "char", "citext", "interval"}


# --- eligibility ----------------------------------------------------------------------

def _ineligible_reason(field: pa.Field, live: SourceColumn, info: PgTypeInfo) -> str | None:
    if live.arrow_type is None or live.arrow_type != field.type:
        return f"column '{field.name}' has an override ({field.type}) that changes its representation"
    typname = info.typname
    if info.typtype == "d" and info.base_typname:
        typname = info.base_typname
    if info.typcategory == "A":
        return f"column '{field.name}' is an array ({live.native_type})"
    if info.typtype == "e" or typname in _DIRECT or typname in _TEXT:
        return None
    if typname == "numeric":
        t = field.type
        if pa.types.is_decimal128(t) and t.scale >= 0:
            return None
        return f"column '{field.name}' ({live.native_type}) needs {t}"
    if typname in ("json", "jsonb", "uuid"):
        return None
    return f"column '{field.name}' has native type {live.native_type}"


def plan_copy(session: PgReadSession, probed: Probed, schema: pa.Schema) -> tuple[bool, str]:
    """(use COPY?, why) from the query's probed columns (`_probe_with_types`)."""
    if session.connection.info.encoding not in ("utf-8", "utf8"):
        return False, f"client encoding is {session.connection.info.encoding}, not UTF-8"
    why = first_ineligible(schema, probed, _ineligible_reason)
    if why is not None:
        return False, why
    return True, f"all {len(schema)} column(s) have an exact CSV form"


# --- CSV read options -----------------------------------------------------------------

def _csv_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type the CSV reader produces for a schema type (extension types → string)."""
    if isinstance(arrow_type, pa.BaseExtensionType):
        return pa.string()
    return arrow_type


def _block_size(schema: pa.Schema, batch_rows: int) -> int:
    wanted = estimate_row_bytes(schema) * batch_rows
    return int(max(_MIN_BLOCK, min(wanted, _MAX_BLOCK)))


def _options(
    schema: pa.Schema, block_size: int
) -> tuple[pacsv.ReadOptions, pacsv.ParseOptions, pacsv.ConvertOptions]:
    names = [f"c{i}" for i in range(len(schema))]
    read = pacsv.ReadOptions(
        column_names=names, block_size=block_size, use_threads=True, encoding="utf8"
    )
    parse = pacsv.ParseOptions(
        delimiter=",", quote_char='"', double_quote=True, escape_char=False,
        newlines_in_values=True, ignore_empty_lines=False,
    )
    convert = pacsv.ConvertOptions(
        check_utf8=True,
        column_types={n: _csv_type(f.type) for n, f in zip(names, schema, strict=True)},
        null_values=[""], true_values=["t"], false_values=["f"],
        strings_can_be_null=True, quoted_strings_can_be_null=False,
        timestamp_parsers=[pacsv.ISO8601],
        decimal_point=".",
    )
    return read, parse, convert


# --- COPY stream adapter --------------------------------------------------------------

class _CopyReader:
    """Read-only, file-like view of a psycopg COPY OUT (what pyarrow's reader pulls from).

    PostgreSQL sends one CopyData message per row, so each `copy.read()` chunk is exactly
    one CSV record. Arrow's reader fails on a record larger than its block, so the adapter
    splits the stream into *segments*: a record larger than `row_limit` ends the current
    segment (reported as EOF) and is held back; the caller opens a new CSV reader with a
    block big enough for it (`next_segment`). Segment boundaries are record boundaries, so
    the concatenated output is exactly the single-reader output.

    Thread safety: Arrow calls `read` from its background I/O thread. When the consumer
    abandons the stream (an error downstream, a closed generator), that thread may still be
    inside `copy.read()` while the main thread leaves the COPY and rolls back its savepoint
    on the same connection — which hung or crashed the interpreter. `detach()` waits for an
    in-flight read under the lock and makes every later read an immediate EOF, so the
    connection is the main thread's alone afterwards.
    """

    def __init__(self, copy: psycopg.Copy, row_limit: int) -> None:
        self._copy = copy
        self._pending = bytearray()
        self._held: bytes | None = None
        self._eof = False          # end of the whole COPY
        self._segment_end = False  # end of the current segment (a big record is held)
        self._lock = threading.Lock()
        self._detached = False
        self.row_limit = row_limit
        self.error: BaseException | None = None
        self.closed = False

    def detach(self) -> None:
        """Stop touching the COPY: wait for a read in flight, then report EOF forever."""
        with self._lock:
            self._detached = True
            self._pending.clear()
            self._held = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def writable(self) -> bool:
        return False

    def tell(self) -> int:
        raise OSError("not seekable")

    def close(self) -> None:
        self.closed = True

    def _pull(self) -> bool:
        """Append one record to the segment; False at the end of the segment."""
        if self._eof or self._segment_end or self._detached:
            return False
        chunk = self._copy.read()
        if not chunk:
            self._eof = True
            return False
        if len(chunk) > self.row_limit and self._pending:
            self._held = bytes(chunk)
            self._segment_end = True
            return False
        self._pending += chunk
        if len(chunk) > self.row_limit:  # a segment of its own
            self._segment_end = True
        return True

    @property
    def buffered(self) -> int:
        return len(self._pending)

    def has_data(self) -> bool:
        """Pull the first record; False for an empty result (Arrow rejects an empty file)."""
        with self._lock:
            if not self._pending:
                self._pull()
            return bool(self._pending)

    def next_segment(self) -> int | None:
        """Start the next segment; return the size of its first record, or None at the end."""
        with self._lock:
            return self._next_segment()

    def _next_segment(self) -> int | None:
        if self._eof and self._held is None and not self._pending:
            return None
        self._segment_end = False
        self.closed = False
        if self._held is not None:
            self._pending += self._held
            self._held = None
            if len(self._pending) > self.row_limit:
                self._segment_end = True
        elif not self._pull():
            return None
        return len(self._pending)

    def read(self, size: int = -1) -> bytes:
        with self._lock:
            if self._detached:
                return b""
            try:
                while size < 0 or len(self._pending) < size:
                    if not self._pull():
                        break
            except BaseException as exc:
                self.error = exc
                raise
            if size < 0 or size >= len(self._pending):
                out = bytes(self._pending)
                self._pending.clear()
                return out
            with memoryview(self._pending) as view:  # one copy, not slice + copy
                out = bytes(view[:size])
            del self._pending[:size]
            return out

    def read_buffer(self, size: int = -1) -> bytes:
        return self.read(size)


# --- column finishing -----------------------------------------------------------------

if np is not None:
    _HEX = np.full(256, 255, dtype=np.uint8)
    for _i, _c in enumerate(b"0123456789"):
        _HEX[_c] = _i
    for _i, _c in enumerate(b"abcdef"):
        _HEX[_c] = 10 + _i
        _HEX[_c - 32] = 10 + _i  # upper case
    _UUID_HEX_POS = np.array([i for i in range(36) if i not in (8, 13, 18, 23)], dtype=np.intp)
    _UUID_DASH_POS = np.array([8, 13, 18, 23], dtype=np.intp)
_ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def _uuid_storage(text: pa.Array, column: str) -> pa.Array:
    """Canonical uuid text → FixedSizeBinary(16), vectorized with numpy."""
    n = len(text)
    if n == 0:
        return pa.array([], type=pa.binary(16))
    if np is None:
        try:
            return pa.array([None if v is None else uuid.UUID(v).bytes for v in text.to_pylist()],
                            type=pa.binary(16))
        except ValueError as exc:
            raise SourceError(f"column '{column}': PostgreSQL uuid text is not canonical") from exc
    filled = pc.fill_null(text, _ZERO_UUID) if text.null_count else text
    filled = filled.combine_chunks() if isinstance(filled, pa.ChunkedArray) else filled
    lengths = pc.binary_length(filled)
    if pc.min(lengths).as_py() != 36 or pc.max(lengths).as_py() != 36:
        raise SourceError(f"column '{column}': PostgreSQL uuid text is not canonical")
    offsets = np.frombuffer(filled.buffers()[1], dtype=np.int32)[
        filled.offset: filled.offset + n + 1
    ]
    data = np.frombuffer(filled.buffers()[2], dtype=np.uint8)[offsets[0]: offsets[-1]]
    chars = data.reshape(n, 36)
    nibbles = _HEX[chars[:, _UUID_HEX_POS]]
    if (nibbles == 255).any() or (chars[:, _UUID_DASH_POS] != ord("-")).any():
        raise SourceError(f"column '{column}': PostgreSQL uuid text is not canonical")
    raw = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]
    storage = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(16), n, [None, pa.py_buffer(np.ascontiguousarray(raw).tobytes())]
    )
    if text.null_count:
        storage = pc.if_else(text.is_valid(), storage, pa.scalar(None, pa.binary(16)))
    return storage


def _finish(batch: pa.RecordBatch, schema: pa.Schema, max_value_mb: int) -> pa.RecordBatch:
    arrays: list[pa.Array] = []
    for array, field in zip(batch.columns, schema, strict=True):
        target = field.type
        if isinstance(target, pa.BaseExtensionType):
            if target.extension_name == "arrow.uuid":
                array = pa.ExtensionArray.from_storage(target, _uuid_storage(array, field.name))
            else:
                array = pa.ExtensionArray.from_storage(target, array.cast(target.storage_type))
        check_value_sizes(array, field.name, max_value_mb)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


_CSV_COLUMN = re.compile(r"CSV column #(\d+)")
_INVALID_VALUE = re.compile(r"(?:invalid value|The string) '([^']*)'")


def _conversion_error(exc: pa.ArrowException, schema: pa.Schema) -> BaseException:
    """Turn an Arrow CSV error into the error the row path would raise (or a SourceError)."""
    text = str(exc)
    column_match = _CSV_COLUMN.search(text)
    if column_match:
        index = int(column_match.group(1))
        if 0 <= index < len(schema):
            field = schema.field(index)
            value_match = _INVALID_VALUE.search(text)
            if pa.types.is_decimal(field.type) and value_match:
                value = value_match.group(1)
                if value in ("NaN", "Infinity", "-Infinity"):
                    try:  # the row path's own coercion raises its exact error
                        value_coercer(field.type, field.name)(decimal.Decimal(value))
                    except SourceError as row_error:
                        return row_error
            return SourceError(
                f"column '{field.name}': PG value cannot be read as {field.type} "
                f"({text}) — cast the column in SQL, or set {READ_PATH_ENV}=rows"
            )
    if "straddl" in text:
        return SourceError(
            f"a row of the result is larger than the COPY read block ({text}) — exclude or "
            f"truncate very large columns in SQL, or set {READ_PATH_ENV}=rows",
            code="RIVET_VALUE_TOO_LARGE",
        )
    return SourceError(f"PG error while parsing COPY output: {text}")


# --- the stream -----------------------------------------------------------------------

def stream_copy(
    session: PgReadSession, sql: str, params: Sequence[Any], schema: pa.Schema,
    batch_rows: int,
) -> Iterator[pa.RecordBatch]:
    """Yield `schema` batches of at most `batch_rows` rows from a COPY of `sql` (in a
    savepoint: `copy_in_savepoint`)."""
    max_value_mb = session.tuning.max_value_mb
    with copy_in_savepoint(session, sql, params, "csv") as copy:
        base_block = _block_size(schema, batch_rows)
        source = _CopyReader(copy, row_limit=base_block // 2)
        try:
            if not source.has_data():
                return
            yield from rebatch(_segments(source, schema, base_block, max_value_mb),
                               schema, batch_rows)
        finally:
            # Before the COPY is left: Arrow's reader thread must be off the connection.
            source.detach()


def _segments(
    source: _CopyReader, schema: pa.Schema, base_block: int, max_value_mb: int
) -> Iterator[pa.RecordBatch]:
    """Finished batches of every segment of the COPY stream, in order."""
    block = _segment_block(base_block, source.buffered, source.row_limit)
    while True:
        for batch in _read_segment(source, schema, block):
            yield _finish(batch, schema, max_value_mb)
        first = source.next_segment()
        if first is None:
            return
        block = _segment_block(base_block, first, source.row_limit)


def _segment_block(base_block: int, first_record: int, row_limit: int) -> int:
    """A segment starting with an oversized record gets a block that holds it; the
    following segment returns to the normal block size."""
    if first_record > row_limit:
        return max(base_block, 2 * first_record + 1024)
    return base_block


def _read_segment(
    source: _CopyReader, schema: pa.Schema, block: int
) -> Iterator[pa.RecordBatch]:
    """CSV batches of one segment of the COPY stream (see `_CopyReader`)."""
    read, parse, convert = _options(schema, block)
    try:
        reader = pacsv.open_csv(
            source, read_options=read, parse_options=parse, convert_options=convert
        )
    except pa.ArrowException as exc:
        if source.error is not None:
            raise source.error from None
        raise _conversion_error(exc, schema) from exc
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except pa.ArrowException as exc:
            if source.error is not None:
                raise source.error from None
            raise _conversion_error(exc, schema) from exc
        if source.error is not None:
            raise source.error
        if batch.num_rows:
            yield batch
