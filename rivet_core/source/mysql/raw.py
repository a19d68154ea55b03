"""MySQL / MariaDB fast read path: row packets decoded straight into Arrow columns.

The row path (`MySQLSession` + `SourceSession.stream`) lets PyMySQL turn every value into a
Python object (`Decimal`, `datetime`, `str` …) and then converts those objects to Arrow —
several Python calls per value. This path runs the same query on the same connection and
the same unbuffered result (same consistent-snapshot transaction, same session time zone,
statement and lock timeouts, same error wrapping), but after PyMySQL has read the column
definitions it takes the row packets off the socket itself:

1. framing: packets are cut out of 1 MiB socket reads by their 3-byte length and checked
   for sequence number, error (0xFF) and end (EOF 0xFE) packets — by the C extension
   `_mysqlframe` (built at install, GIL released), else by `frame_py`, the same loop in
   Python and then the only per-row Python of the path;
2. fields, vectorized per column with numpy: every value of the text protocol is a
   length-encoded string (0xFB = NULL), so a column's start, length and NULL mask for a
   whole batch are array operations, and its bytes become one Arrow binary array;
3. types, vectorized with Arrow casts from the server's canonical text: integers (signed and
   unsigned 64-bit), DECIMAL(p,s) straight to decimal128/256 (never via float), FLOAT via
   float64 exactly as PyMySQL's `float()` does, DOUBLE, DATE, DATETIME/TIMESTAMP to
   microseconds (TIMESTAMP as UTC: the session runs at time_zone '+00:00'), YEAR,
   tinyint(1) → bool (non-zero is true), text (UTF-8 validated), binary, JSON, ENUM/SET.

Everything else — TIME, BIT, `columns:` overrides, and any batch of a column whose text
the vectorized cast refuses (zero dates, invalid dates) — goes through PyMySQL's own
decoder and the row path's converter for that column and batch, so the values are exactly
the row path's. Memory: one socket read plus one batch of raw packets.

`RIVET_MYSQL_READ_PATH=rows|raw|binary|auto` (default auto) chooses: `auto`/`binary` try
the binary protocol first (`mysql_binary`: the same decoding ideas on a prepared
statement's binary rows), then this text path; `raw` starts at this text path; `rows`
forces the row path. Both fast paths need PyMySQL's connection internals (else the row
path). The choice and its reason are logged at INFO on `rivet.source`.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pymysql
from pymysql.constants import CR

from rivet_core.errors import SourceError
from rivet_core.lazy_modules import np, pa, pc
from rivet_core.source.base import SourceColumn
from rivet_core.source.batching import Converter, check_value_sizes
from rivet_core.source.mysql import wire
from rivet_core.source.mysql.wire import Wire, abandon_result, end_result

try:  # optional: built by setup.py when a C compiler is there (else frame_py/gather_py below)
    from rivet_core.source.mysql._mysqlframe import frame as frame_c
    from rivet_core.source.mysql._mysqlframe import gather as gather_c
except ImportError as _exc:  # pragma: no cover - depends on the build machine
    frame_c = gather_c = None
    _FRAME_C_MISSING = f"{type(_exc).__name__}: {_exc}"
else:
    _FRAME_C_MISSING = ""

log = logging.getLogger("rivet.source")

READ_PATH_ENV = "RIVET_MYSQL_READ_PATH"
_MODES = ("rows", "raw", "binary", "auto")
_READ_CHUNK = 1 << 20
#: Packet bytes per decoded batch (see `PacketReader.read_batch`).
BATCH_BYTES = 4 << 20
_MAX_PACKET = 0xFFFFFF
_GATHER_ROWS = 4096
_ROWS_CHUNK = 1 << 16  # row offset arrays start at this many rows and double up to max_rows


def read_path_mode() -> str:
    """`rows`, `raw`, `binary` or `auto` (default) from RIVET_MYSQL_READ_PATH."""
    raw = os.environ.get(READ_PATH_ENV, "auto").strip().lower() or "auto"
    if raw not in _MODES:
        log.warning("%s=%r is not one of rows|raw|binary|auto; using auto", READ_PATH_ENV, raw)
        return "auto"
    return raw


# --- framing ------------------------------------------------------------------------

def frame_py(buf: bytes, pos: int, seq: int, count: int, base: int,
             starts: np.ndarray, ends: np.ndarray, out_at: int) -> tuple[int, int, int]:
    """Frame up to `count` whole ordinary row packets of `buf` from offset `pos`.

    A packet is a 3-byte little-endian payload length, a 1-byte sequence number (expected:
    `seq`) and the payload. Stops, without consuming it, at a packet not wholly in `buf`
    (header and at least one payload byte), length 0, length 0xFFFFFF (a multi-packet row),
    a wrong sequence number, an error packet (0xFF) or an EOF packet (0xFE, < 9 bytes): the
    caller's slow path handles those. Accepted packet i at offset p gets
    starts[out_at + i] = base + p + 4 and ends[out_at + i] = base + p + 4 + length.
    Returns (offset after the last accepted packet, next sequence number, packets taken).

    The pure-Python twin of the C extension's `_mysqlframe.frame` (same arguments, results
    and ValueErrors for out-of-range arguments), used when the extension is not built.
    """
    limit = len(buf) - 4
    if not 0 <= pos <= len(buf):
        raise ValueError(f"pos {pos} is outside the buffer (0..{len(buf)})")
    if not 0 <= seq <= 255:
        raise ValueError(f"seq {seq} is not a sequence number (0..255)")
    if count < 0 or out_at < 0:
        raise ValueError(f"count ({count}) and out_at ({out_at}) must be >= 0")
    if base < 0:
        raise ValueError(f"base {base} is out of range")
    if out_at + count > len(starts) or out_at + count > len(ends):
        raise ValueError(f"out_at {out_at} + count {count} exceeds the output buffers "
                         f"(starts {len(starts)}, ends {len(ends)} items)")
    found_starts: list[int] = []
    found_ends: list[int] = []
    starts_append, ends_append = found_starts.append, found_ends.append
    taken = 0
    # The per-row loop: keep it free of calls other than the two appends.
    while taken < count and pos < limit:
        length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
        end = pos + 4 + length
        if end > limit + 4 or length == 0 or length >= _MAX_PACKET or buf[pos + 3] != seq:
            break
        first = buf[pos + 4]
        if first == 0xFF or (first == 0xFE and length < 9):
            break
        starts_append(base + pos + 4)
        ends_append(base + end)
        seq = (seq + 1) & 0xFF
        pos = end
        taken += 1
    if taken:
        starts[out_at:out_at + taken] = found_starts
        ends[out_at:out_at + taken] = found_ends
    return pos, seq, taken


#: The framing `PacketReader.read_batch` uses: the C extension when it is built.
frame = frame_c if frame_c is not None else frame_py
_framing_logged = False


def _log_framing() -> None:
    global _framing_logged
    if not _framing_logged:
        _framing_logged = True
        if frame is frame_c:
            log.debug("MySQL packet framing: C extension (rivet_core.source.mysql._mysqlframe)")
        else:
            log.debug("MySQL packet framing: pure Python (%s)",
                      _FRAME_C_MISSING or "frame_py selected")


class PacketReader:
    """Row packets of the active unbuffered result, read straight from PyMySQL's socket.

    After `execute()` on an SSCursor, PyMySQL has consumed the column definitions and
    left the rows unread; this reader owns the connection until the result's end packet,
    then hands it back in the state PyMySQL's own drain would leave (result inactive,
    warning count and more-results flag recorded), so `cursor.close()` and the next
    statement work as usual.
    """

    def __init__(self, conn: Any, result: Any) -> None:
        self._wire = Wire(conn)
        self._result = result
        self._buf = b""
        self._pos = 0
        self.done = False

    def _fill(self, need: int) -> None:
        """Read until `need` unread bytes are buffered (blocking), keeping the unread ones.

        Small needs read whatever the socket has (up to 1 MiB) so one call frames many
        rows; a large packet is read in one exact `read`, never by regrowing the buffer
        MiB by MiB (quadratic for a 256 MB value)."""
        missing = need - (len(self._buf) - self._pos)
        if missing <= 0:
            return
        wire = self._wire
        wire.use_read_timeout()
        while True:
            try:
                data = (wire.read(missing) if missing > _READ_CHUNK
                        else wire.read1(_READ_CHUNK))
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                wire.force_close()
                raise pymysql.err.OperationalError(
                    CR.CR_SERVER_LOST, f"Lost connection to MySQL server during query ({exc})"
                ) from exc
        if not data:
            wire.force_close()
            raise pymysql.err.OperationalError(CR.CR_SERVER_LOST, "Lost connection to MySQL server during query")
        self._buf = self._buf[self._pos:] + data
        self._pos = 0
        if len(self._buf) < need:
            self._fill(need)

    def _packet(self) -> tuple[bytes, int, int]:
        """(buffer, start, end) of the next whole packet payload (multi-packet joined)."""
        parts: list[bytes] = []
        while True:
            self._fill(4)
            buf, pos = self._buf, self._pos
            length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
            self._check_seq(buf[pos + 3])
            self._fill(4 + length)
            buf, pos = self._buf, self._pos
            start, end = pos + 4, pos + 4 + length
            self._pos = end
            if length < _MAX_PACKET and not parts:
                return buf, start, end
            parts.append(buf[start:end])
            if length < _MAX_PACKET:
                joined = b"".join(parts)
                return joined, 0, len(joined)

    def _check_seq(self, seq: int) -> None:
        wire = self._wire
        if seq != wire.next_seq_id:
            wire.force_close()
            raise pymysql.err.InternalError(
                f"Packet sequence number wrong - got {seq} expected {wire.next_seq_id}")
        wire.next_seq_id = (wire.next_seq_id + 1) % 256

    def _end(self, buf: bytes, start: int, end: int) -> None:
        """The EOF packet: record what PyMySQL would, release the result."""
        warnings = int.from_bytes(buf[start + 1:start + 3], "little") if end - start >= 5 else 0
        status = int.from_bytes(buf[start + 3:start + 5], "little") if end - start >= 5 else 0
        end_result(self._result, warnings, bool(status & 8))  # SERVER_MORE_RESULTS_EXISTS
        self.done = True

    def read_batch(self, max_rows: int, max_bytes: int | None = None,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Up to `max_rows` rows as (bytes as uint8, row starts, row ends); None at the end.

        The batch also ends once its rows hold `max_bytes` (default `BATCH_BYTES`; checked
        per socket read, so it may overshoot by about one 1 MiB read): small batches let
        the read-ahead thread hand over work early — a batch of 150 k wide rows takes ~0.4 s
        to read before the writer can start, at the start of every chunk window.

        Whole ordinary row packets already buffered are framed by `frame` (C, GIL released,
        when built); refills, multi-packet rows, end and error packets take the slow path
        (`_packet`), one packet at a time. Row offsets go into int64 arrays that start at
        64 Ki rows and double up to `max_rows` (16 bytes a row)."""
        if self.done or max_rows < 1:
            return None
        limit = BATCH_BYTES if max_bytes is None else max_bytes
        _log_framing()
        framer = frame
        pieces: list[bytes] = []
        capacity = min(max_rows, _ROWS_CHUNK)
        starts = np.empty(capacity, dtype=np.int64)
        ends = np.empty(capacity, dtype=np.int64)
        base = 0  # offset of `current` inside the concatenation of `pieces`
        current: bytes | None = None
        rows = 0
        wire = self._wire
        while rows < max_rows:
            if rows == capacity:
                capacity = min(max_rows, 2 * capacity)
                starts = _grown(starts, rows, capacity)
                ends = _grown(ends, rows, capacity)
            # Fast path: whole ordinary row packets already buffered.
            buf = self._buf
            buf_base = base if buf is current or current is None else base + len(current)
            pos, seq, taken = framer(buf, self._pos, wire.next_seq_id, capacity - rows,
                                     buf_base, starts, ends, rows)
            self._pos = pos
            wire.next_seq_id = seq
            if taken:
                if buf is not current:
                    pieces.append(buf)
                    current, base = buf, buf_base
                rows += taken
                if ends[rows - 1] - starts[0] >= limit:
                    break
                if rows == capacity:
                    continue  # full: grow (or done at max_rows), then frame on
            # Slow path, one packet: refill, multi-packet rows, end/error packets, bad seq.
            buf, start, end = self._packet()
            first = buf[start] if end > start else -1
            if first == 0xFE and end - start < 9:
                self._end(buf, start, end)
                break
            if first == 0xFF:
                abandon_result(self._result)
                self.done = True
                pymysql.err.raise_mysql_exception(buf[start:end])
            if buf is not current:
                if current is not None:
                    base += len(current)
                pieces.append(buf)
                current = buf
            starts[rows] = base + start
            ends[rows] = base + end
            rows += 1
        if not rows:
            return None
        # Only the bytes from the first row on are needed; the buffers are ~1 MiB each.
        data = np.frombuffer(b"".join(pieces), dtype=np.uint8)
        return data, starts[:rows], ends[:rows]

    def drain(self) -> None:
        """Read and drop the rest of the result (an abandoned stream) so the connection is usable."""
        while not self.done:
            buf, start, end = self._packet()
            first = buf[start] if end > start else -1
            if first == 0xFE and end - start < 9:
                self._end(buf, start, end)
            elif first == 0xFF:
                abandon_result(self._result)
                self.done = True


def planned_path(conn: Any) -> str:
    """What `rivet doctor` shows: the path a read takes on this install."""
    off = wire.fallback(conn)
    if off is not None:
        return f"fallback — {off.message()}"
    return (f"binary protocol, packets framed in {'C' if frame_c is not None else 'Python'} "
            f"(PyMySQL {'.'.join(map(str, wire.pymysql_version()))}) for eligible columns, else "
            "the text-protocol packet reader")


def _grown(array: np.ndarray, used: int, capacity: int) -> np.ndarray:
    """A `capacity`-item int64 array holding the first `used` items of `array`."""
    grown = np.empty(capacity, dtype=np.int64)
    grown[:used] = array[:used]
    return grown


# --- fields -------------------------------------------------------------------------

def little_endian(data: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The `width`-byte little-endian unsigned integers starting at each offset `at`."""
    value = np.zeros(len(at), dtype=np.int64)
    for i in range(width):
        value |= data[at + i].astype(np.int64) << (8 * i)
    return value


def lenenc(data: np.ndarray, pos: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value length, header bytes) of the length-encoded values at `pos`, whose first bytes
    are `first` (< 0xFB: the length itself; 0xFC/0xFD/0xFE: a 2/3/8-byte length follows).
    Callers mask NULLs (0xFB) themselves."""
    length = first.copy()
    header = np.ones(len(pos), dtype=np.int64)
    for marker, width in ((0xFC, 2), (0xFD, 3), (0xFE, 8)):
        wide = first == marker
        if wide.any():
            length[wide] = little_endian(data, pos[wide] + 1, width)
            header[wide] = 1 + width
    return length, header


def split_columns(
    data: np.ndarray, starts: np.ndarray, ends: np.ndarray, ncols: int
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per column: (value start, value length, NULL mask) of every row, vectorized."""
    pos = starts.copy()
    out = []
    for _ in range(ncols):
        if (pos >= ends).any():
            raise SourceError("MySQL row packet ends before its last column (protocol error)")
        first = data[pos].astype(np.int64)
        null = first == 0xFB
        length, header = lenenc(data, pos, first)
        length[null] = 0
        value_start = pos + header
        out.append((value_start, length, null))
        pos = value_start + length
    return out


def gather_py(data: np.ndarray, start: np.ndarray, length: np.ndarray, out: np.ndarray) -> int:
    """Copy data[start[i]:start[i]+length[i]] back to back into `out`; return the bytes
    written. The numpy twin of the C extension's `gather` (used when it is not built):
    an index array, a few thousand values at a time so the int64 index (8 bytes per value
    byte) stays a few MB whatever the batch."""
    n = len(start)
    if n != len(length):
        raise ValueError(f"start ({n} items) and length ({len(length)} items) differ")
    if n and (int(start.min()) < 0 or int(length.min()) < 0
              or int((start + length).max()) > len(data)):
        raise ValueError(f"a value is outside the data ({len(data)} bytes)")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    total = int(offsets[-1])
    if total > len(out):
        raise ValueError(f"the values ({total} bytes) overflow the output ({len(out)} bytes)")
    for lo in range(0, n, _GATHER_ROWS):
        hi = min(lo + _GATHER_ROWS, n)
        first, last = int(offsets[lo]), int(offsets[hi])
        if last > first:
            index = np.repeat(start[lo:hi] - offsets[lo:hi], length[lo:hi])
            index += np.arange(first, last, dtype=np.int64)
            out[first:last] = data[index]
    return total


def binary_column(data: np.ndarray, start: np.ndarray, length: np.ndarray, null: np.ndarray) -> pa.Array:
    """One column's values as an Arrow binary array (a single gather of their bytes)."""
    n = len(start)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    total = int(offsets[-1])
    values = np.empty(total, dtype=np.uint8)
    if total:
        (gather_c or gather_py)(data, np.ascontiguousarray(start, dtype=np.int64),
                                np.ascontiguousarray(length, dtype=np.int64), values)
    large = total >= 2**31 - 1
    arrow_type = pa.large_binary() if large else pa.binary()
    offset_buffer = pa.py_buffer(offsets if large else offsets.astype(np.int32))
    null_count = int(null.sum())
    validity = pa.py_buffer(np.packbits(~null, bitorder="little")) if null_count else None
    return pa.Array.from_buffers(arrow_type, n, [validity, offset_buffer, pa.py_buffer(values)],
                                 null_count=null_count)


# --- types --------------------------------------------------------------------------

_TEXT_NATIVE = ("char", "varchar", "text", "enum", "set", "json", "null")
_BINARY_NATIVE = ("binary", "varbinary", "blob")


def _vector_cast(live: SourceColumn, target: pa.DataType) -> Callable[[pa.Array], pa.Array] | None:
    """A vectorized text → `target` cast for a live column, or None (per-value path)."""
    if live.arrow_type is None or live.arrow_type != target:
        return None
    if not live.direct and not live.native_type.startswith("tinyint(1)"):
        return None  # TIME, BIT: the row path's per-value rules
    native = live.native_type.split("(")[0].split(" ")[0]
    storage = target.storage_type if isinstance(target, pa.BaseExtensionType) else target

    def as_text(array: pa.Array) -> pa.Array:
        return array.cast(pa.large_string() if pa.types.is_large_binary(array.type) else pa.string())

    if pa.types.is_boolean(target) and live.native_type.startswith("tinyint(1)"):
        return lambda a: pc.not_equal(as_text(a).cast(pa.int64()), 0)
    if (pa.types.is_integer(target) or pa.types.is_decimal(target) or pa.types.is_float64(target)
            or pa.types.is_date32(target)):
        return lambda a: as_text(a).cast(target)
    if pa.types.is_float32(target):
        return lambda a: as_text(a).cast(pa.float64()).cast(pa.float32())
    if pa.types.is_timestamp(target) and target.unit == "us":
        naive = pa.timestamp("us")
        if target.tz is None:
            return lambda a: as_text(a).cast(naive)
        return lambda a: as_text(a).cast(naive).cast(target)
    if native in _TEXT_NATIVE and (pa.types.is_string(storage) or pa.types.is_large_string(storage)):
        if isinstance(target, pa.BaseExtensionType):
            return lambda a: pa.ExtensionArray.from_storage(target, as_text(a).cast(storage))
        return lambda a: as_text(a).cast(storage)
    if native in _BINARY_NATIVE and pa.types.is_binary(target):
        return lambda a: a
    return None


class BatchDecoder:
    """Raw row batches → RecordBatches of `schema`, column by column (see module doc)."""

    def __init__(self, schema: pa.Schema, live: Sequence[SourceColumn],
                 pymysql_converters: Sequence[tuple[str | None, Any]],
                 row_converters: Sequence[Converter], max_value_mb: int) -> None:
        self.schema = schema
        self.casts = [_vector_cast(col, field.type) for col, field in zip(live, schema, strict=True)]
        self.pymysql_converters = list(pymysql_converters)
        self.row_converters = list(row_converters)
        self.max_value_mb = max_value_mb
        self.vector_columns = [f.name for f, c in zip(schema, self.casts, strict=True) if c is not None]

    def _per_value(self, index: int, raw: pa.Array) -> pa.Array:
        """The row path's exact result for one column: PyMySQL's decoder, then its converter."""
        encoding, decode = self.pymysql_converters[index]
        values: list[Any] = []
        for item in raw.to_pylist():
            if item is not None:
                if encoding is not None:
                    item = item.decode(encoding)
                if decode is not None:
                    item = decode(item)
            values.append(item)
        return self.row_converters[index](values)

    def decode(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.RecordBatch:
        fields = split_columns(data, starts, ends, len(self.schema))
        arrays: list[pa.Array] = []
        for index, (field, (start, length, null)) in enumerate(zip(self.schema, fields, strict=True)):
            raw = binary_column(data, start, length, null)
            cast = self.casts[index]
            array = None
            if cast is not None:
                try:
                    array = cast(raw)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    array = None  # e.g. a zero date: the per-value path knows the rule
            if array is None:
                array = self._per_value(index, raw)
            check_value_sizes(array, field.name, self.max_value_mb)
            arrays.append(array)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def stream_raw(reader: PacketReader, decoder: BatchDecoder, batch_rows: int,
               driver_errors: Callable[[str], Any]) -> Iterator[pa.RecordBatch]:
    """Yield decoded batches; an abandoned stream drains the rest of the result."""
    try:
        while True:
            with driver_errors("reading rows"):
                raw = reader.read_batch(batch_rows)
            if raw is None:
                return
            yield decoder.decode(*raw)
    finally:
        if not reader.done:
            try:
                reader.drain()
            except (pymysql.err.Error, SourceError):
                pass  # the connection is broken; the read error surfaced already
