"""Fetched rows → Arrow record batches: batch sizing, column-wise conversion, value guards.

Owns three contracts:
- **Batch sizing** (docs/rivet-compat.md "Tuning and batch sizing"): `estimate_row_bytes` and `batch_rows` turn a memory
  target into a fetch window; batch size never appears in SQL.
- **Exact conversion**: each column is converted as a whole (`pa.array(values, type=…)`).
  A column whose driver values already match the Arrow type takes that fast path; any
  other column (overrides, SQLite's dynamic values, MySQL TIME/BIT) goes through a
  per-value coercion that either produces the exact value or raises naming the column —
  never a silent float for a decimal, never a truncated integer.
- **`max_value_mb`**: a text/JSON/binary cell over the ceiling aborts the read with
  `RIVET_VALUE_TOO_LARGE` before the batch reaches a writer.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rivet_core.config.tuning import ResolvedTuning, batch_rows_for_memory
from rivet_core.errors import SourceError, UnsupportedTypeError
from rivet_core.lazy_modules import pa, pc

Converter = Callable[[Sequence[Any]], "pa.Array"]

_UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1)
_DEC_CONTEXT = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_EVEN)


# --- sizing ------------------------------------------------------------------------------

def _type_bytes(arrow_type: pa.DataType) -> int:
    if isinstance(arrow_type, pa.BaseExtensionType):
        if arrow_type.extension_name == "arrow.json":
            return 256
        return _type_bytes(arrow_type.storage_type)
    if pa.types.is_boolean(arrow_type):
        return 1
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type):
        return max(arrow_type.bit_width // 8, 1)
    if pa.types.is_date32(arrow_type):
        return 4
    if (pa.types.is_timestamp(arrow_type) or pa.types.is_time(arrow_type)
            or pa.types.is_duration(arrow_type) or pa.types.is_date64(arrow_type)):
        return 8
    if pa.types.is_decimal(arrow_type):
        return 16
    if (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
            or pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type)):
        return 256
    return 64


def estimate_row_bytes(schema: pa.Schema) -> int:
    """Row-width estimate per docs/rivet-compat.md "Tuning and batch sizing" (+1 byte per column for validity/overhead)."""
    return sum(_type_bytes(field.type) + 1 for field in schema)


def batch_rows(schema: pa.Schema, tuning: ResolvedTuning) -> int:
    """Fetch window in rows: memory-derived when `batch_size_memory_mb` is set, else static."""
    if tuning.batch_size_memory_mb:
        return batch_rows_for_memory(estimate_row_bytes(schema), tuning.batch_size_memory_mb)
    return max(int(tuning.batch_size), 1)


# --- per-value coercion (slow path, exact or loud) -------------------------------------

class _Null(Exception):
    """Internal: this value maps to NULL (e.g. a MySQL zero date, a malformed UUID)."""


#: Column name → how many non-NULL source values the type contract wrote as NULL (a MySQL
#: zero date '0000-00-00', a malformed UUID). A session owns one (SourceSession.mapped_to_null)
#: and the run turns it into a warning, so the mapping is never silent.
NullTally = dict[str, int]


def _bad(column: str, value: Any, target: pa.DataType, why: str = "") -> SourceError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    extra = f" ({why})" if why else ""
    return SourceError(
        f"column '{column}': value {shown} cannot be converted to {target}{extra} — "
        f"fix the column override in rivet.yaml or cast the column in SQL"
    )


def _to_decimal(value: Any) -> decimal.Decimal:
    if isinstance(value, decimal.Decimal):
        return value
    if isinstance(value, bool):
        return decimal.Decimal(int(value))
    if isinstance(value, (int, str)):
        return decimal.Decimal(str(value).strip())
    if isinstance(value, float):
        # str(float) is the shortest round-trip text: 12.34 stays 12.34, not its binary expansion.
        return decimal.Decimal(str(value))
    if isinstance(value, bytes):
        return decimal.Decimal(value.decode("ascii").strip())
    raise TypeError(type(value).__name__)


def _decimal_coercer(target: pa.DataType, column: str) -> Callable[[Any], Any]:
    exponent = decimal.Decimal(1).scaleb(-target.scale)
    precision = target.precision

    def coerce(value: Any) -> Any:
        try:
            number = _to_decimal(value)
        except (TypeError, ValueError, decimal.InvalidOperation, UnicodeDecodeError) as exc:
            raise _bad(column, value, target) from exc
        if not number.is_finite():
            raise SourceError(
                f"column '{column}' holds {number} (NaN/Infinity), which a decimal cannot "
                f"represent — filter it out, cast it in SQL (e.g. NULLIF({column}, 'NaN')), "
                f"or override the column as float8"
            )
        # Overrides fix the scale; values with finer scale are rounded half-even to it.
        quantized = number.quantize(exponent, context=_DEC_CONTEXT)
        if len(quantized.as_tuple().digits) > precision and quantized != 0:
            raise _bad(column, value, target, f"more than {precision} significant digits")
        return quantized

    return coerce


def _int_value(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise ValueError("fractional value")
    if isinstance(value, decimal.Decimal):
        if value == value.to_integral_value():
            return int(value)
        raise ValueError("fractional value")
    if isinstance(value, (bytes, bytearray)):  # MySQL BIT(n)
        return int.from_bytes(value, "big")
    if isinstance(value, str):
        return int(value.strip())
    raise TypeError(type(value).__name__)


def _bool_value(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float, decimal.Decimal)):
        return value != 0
    if isinstance(value, (bytes, bytearray)):  # MySQL BIT(1)
        return int.from_bytes(value, "big") != 0
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("1", "t", "true", "y", "yes", "on"):
            return True
        if text in ("0", "f", "false", "n", "no", "off"):
            return False
    raise ValueError("not a boolean")


def _json_text(value: Any) -> str:
    """JSON text for driver containers; decimals stay exact numbers (json.dumps would fail)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else "null"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_json_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(
            f"{json.dumps(str(k), ensure_ascii=False)}: {_json_text(v)}" for k, v in value.items()
        ) + "}"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return json.dumps(bytes(value).hex())
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return json.dumps(value.isoformat())
    return json.dumps(str(value), ensure_ascii=False)


def _text_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, (dict, list, tuple)):
        return _json_text(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    return str(value)


def _binary_value(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, uuid.UUID):
        return value.bytes
    raise TypeError(type(value).__name__)


def _uuid_value(value: Any) -> bytes:
    """16 raw bytes, 36-char text or a UUID object; anything else is NULL (docs/rivet-compat.md "Type mapping")."""
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if len(raw) == 16:
            return raw
        try:
            value = raw.decode("ascii")
        except UnicodeDecodeError as exc:
            raise _Null from exc
    if isinstance(value, str):
        try:
            return uuid.UUID(value.strip()).bytes
        except ValueError as exc:
            raise _Null from exc
    raise _Null


def _is_zero_date(value: Any) -> bool:
    return isinstance(value, (str, bytes)) and (
        value[:10] in ("0000-00-00", b"0000-00-00")
    )


def _datetime_value(value: Any, tz: str | None) -> dt.datetime:
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("ascii")
    if isinstance(value, str):
        if _is_zero_date(value):
            raise _Null
        value = dt.datetime.fromisoformat(value.strip())
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        value = _EPOCH + dt.timedelta(seconds=value)
    elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    if not isinstance(value, dt.datetime):
        raise TypeError(type(value).__name__)
    if tz is None and value.tzinfo is not None:
        # A naive target holds UTC wall-clock time (sessions run in UTC).
        value = value.astimezone(_UTC).replace(tzinfo=None)
    elif tz is not None and value.tzinfo is None:
        value = value.replace(tzinfo=_UTC)
    return value


def _date_value(value: Any) -> dt.date:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_UTC)
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("ascii")
    if isinstance(value, str):
        if _is_zero_date(value):
            raise _Null
        text = value.strip()
        return dt.date.fromisoformat(text[:10]) if len(text) > 10 else dt.date.fromisoformat(text)
    raise TypeError(type(value).__name__)


def _time_value(value: Any) -> dt.time:
    if isinstance(value, dt.time):
        return value.replace(tzinfo=None)
    if isinstance(value, dt.timedelta):  # MySQL TIME arrives as a timedelta
        if dt.timedelta(0) <= value < dt.timedelta(days=1):
            return (dt.datetime.min + value).time()
        raise ValueError("outside 00:00:00..23:59:59.999999 (MySQL TIME is an interval)")
    if isinstance(value, dt.datetime):
        return value.time()
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("ascii")
    if isinstance(value, str):
        return dt.time.fromisoformat(value.strip())
    raise TypeError(type(value).__name__)


def _float_value(value: Any) -> float:
    if isinstance(value, float):
        return value
    if isinstance(value, (int, decimal.Decimal, str)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(type(value).__name__)


def _json_value(value: Any) -> str:
    if isinstance(value, (dict, list, tuple, int, float, decimal.Decimal)):
        return _json_text(value)
    return _text_value(value)


def value_coercer(target: pa.DataType, column: str) -> Callable[[Any], Any]:
    """A function mapping one non-NULL driver value to what `pa.array(…, type=target)` takes.

    Raises `SourceError` naming the column for a value it cannot convert exactly, or
    `_Null` for values the contract maps to NULL (MySQL zero dates, malformed UUIDs).
    """
    if isinstance(target, pa.BaseExtensionType):
        name = target.extension_name
        if name == "arrow.uuid":
            return _uuid_value
        if name == "arrow.json":
            return _json_value
        return value_coercer(target.storage_type, column)
    if pa.types.is_decimal(target):
        return _decimal_coercer(target, column)
    if pa.types.is_boolean(target):
        return _bool_value
    if pa.types.is_integer(target):
        return _int_value
    if pa.types.is_floating(target):
        return _float_value
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        return _text_value
    if pa.types.is_binary(target) or pa.types.is_large_binary(target) or pa.types.is_fixed_size_binary(target):
        return _binary_value
    if pa.types.is_timestamp(target):
        tz = target.tz
        return lambda value: _datetime_value(value, tz)
    if pa.types.is_date(target):
        return _date_value
    if pa.types.is_time(target):
        return _time_value
    if pa.types.is_list(target) or pa.types.is_large_list(target):
        inner = value_coercer(target.value_type, column)
        nested_ok = pa.types.is_list(target.value_type)

        def coerce_list(value: Any) -> list[Any]:
            if not isinstance(value, (list, tuple)):
                raise TypeError(type(value).__name__)
            out: list[Any] = []
            for element in value:
                if element is None:
                    out.append(None)
                elif isinstance(element, list) and not nested_ok:
                    raise UnsupportedTypeError(
                        f"column '{column}' holds a multi-dimensional array; Rivet maps only "
                        f"1-D arrays — cast in SQL (e.g. array_to_json({column})::text)"
                    )
                else:
                    out.append(inner(element))
            return out

        return coerce_list
    return lambda value: value


def _coerce_column(values: Sequence[Any], target: pa.DataType, column: str,
                   tally: NullTally | None = None) -> list[Any]:
    coerce = value_coercer(target, column)
    out: list[Any] = []
    append = out.append
    for value in values:
        if value is None:
            append(None)
            continue
        try:
            append(coerce(value))
        except _Null:
            append(None)
            if tally is not None:
                tally[column] = tally.get(column, 0) + 1
        except (SourceError, UnsupportedTypeError):
            raise
        except (TypeError, ValueError, ArithmeticError, UnicodeDecodeError, OverflowError) as exc:
            raise _bad(column, value, target, str(exc)) from exc
    return out


def _build(values: Sequence[Any], target: pa.DataType) -> pa.Array:
    if isinstance(target, pa.BaseExtensionType):
        storage = pa.array(values, type=target.storage_type)
        return pa.ExtensionArray.from_storage(target, storage)
    return pa.array(values, type=target)


def _arrow_failures() -> tuple[type[BaseException], ...]:
    """What a failed Arrow conversion raises (an `except` evaluates this only when something
    was raised, so the lazy `pa` is not imported by defining it)."""
    return (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError,
            TypeError, ValueError, OverflowError)


def make_converter(target: pa.DataType, column: str, *, direct: bool,
                   tally: NullTally | None = None) -> Converter:
    """Column converter. `direct=True` means the driver's values already have the Python
    types Arrow expects for `target` (checked by the engine's type mapping), so the whole
    column goes straight to `pa.array`; a failure there (NaN numeric, nested array,
    out-of-range value) falls back to the coercion path, whose errors name the column.
    `tally`: where values the contract maps to NULL are counted (NullTally)."""

    def convert(values: Sequence[Any]) -> pa.Array:
        if direct:
            try:
                return _build(values, target)
            except _arrow_failures():
                pass
        coerced = _coerce_column(values, target, column, tally)
        try:
            return _build(coerced, target)
        except _arrow_failures() as exc:
            raise SourceError(
                f"column '{column}': values cannot be stored as {target}: {exc} — fix the "
                f"column override in rivet.yaml or cast the column in SQL"
            ) from exc

    return convert


def uuid_object_converter(column: str) -> Converter:
    """PG uuid: the driver yields `uuid.UUID`; Arrow's uuid type stores the 16 raw bytes."""
    target = pa.uuid()

    def convert(values: Sequence[Any]) -> pa.Array:
        try:
            raw = [None if v is None else v.bytes for v in values]
        except AttributeError:
            raw = _coerce_column(values, target, column)
        return _build(raw, target)

    return convert


# --- value ceiling --------------------------------------------------------------------

def _is_sized(arrow_type: pa.DataType) -> bool:
    if isinstance(arrow_type, pa.BaseExtensionType):
        return arrow_type.extension_name == "arrow.json"
    return (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
            or pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type))


def check_value_sizes(array: pa.Array, column: str, max_value_mb: int) -> None:
    """Raise RIVET_VALUE_TOO_LARGE when one text/JSON/binary cell exceeds `max_value_mb`."""
    if max_value_mb <= 0 or not _is_sized(array.type) or len(array) == 0:
        return
    storage = array.storage if isinstance(array, pa.ExtensionArray) else array
    longest = pc.max(pc.binary_length(storage)).as_py()
    if longest is not None and longest > max_value_mb * 1024 * 1024:
        size_mb = longest / (1024 * 1024)
        raise SourceError(
            f"RIVET_VALUE_TOO_LARGE: column '{column}' has a value of {size_mb:.1f} MB, over "
            f"max_value_mb={max_value_mb} — raise tuning.max_value_mb or exclude/truncate the "
            f"column in SQL",
            code="RIVET_VALUE_TOO_LARGE",
        )


def rows_to_batch(
    rows: Sequence[Sequence[Any]],
    schema: pa.Schema,
    converters: Sequence[Converter],
    max_value_mb: int,
) -> pa.RecordBatch:
    """Transpose fetched row tuples into columns and convert each column as a whole."""
    width = len(schema)
    columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [() for _ in range(width)]
    arrays: list[pa.Array] = []
    for index, (field, convert) in enumerate(zip(schema, converters, strict=True)):
        array = convert(columns[index])
        check_value_sizes(array, field.name, max_value_mb)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def rebatch(
    batches: Iterator[pa.RecordBatch], schema: pa.Schema, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """Re-cut a stream of batches of any size into batches of exactly `batch_rows` rows
    (the last one may be shorter), so every read path hands the writer the same shape.
    Holds at most one output batch's worth of slices."""
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    for batch in batches:
        offset = 0
        while offset < batch.num_rows:
            take = min(batch_rows - pending_rows, batch.num_rows - offset)
            pending.append(batch.slice(offset, take))
            pending_rows += take
            offset += take
            if pending_rows == batch_rows:
                yield _combine(pending, schema)
                pending, pending_rows = [], 0
    if pending_rows:
        yield _combine(pending, schema)


def split_batches(batches: Iterator[pa.RecordBatch], batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Batches of at most `batch_rows` rows by zero-copy slicing only (never combining): for
    sources whose batches are already about the right size, where `rebatch`'s copy of the
    short tails would cost more than the uneven sizes."""
    for batch in batches:
        for offset in range(0, batch.num_rows, batch_rows):
            yield batch.slice(offset, batch_rows)


def _combine(parts: list[pa.RecordBatch], schema: pa.Schema) -> pa.RecordBatch:
    if len(parts) == 1:
        return parts[0]
    return pa.Table.from_batches(parts, schema=schema).combine_chunks().to_batches()[0]
