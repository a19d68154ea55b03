"""Incremental cursor values: pick the new high-water mark from a batch, render it as text.

docs/rivet-compat.md "Incremental": the new cursor is the cursor column's value in the last non-null row of
the last batch (the query is `ORDER BY cursor`, so that is the maximum), stored as text and
bound back as a parameter on the next run. Renderings: integers and floats as decimal
text, decimals exact (`format(d, "f")`, never exponent form), strings as-is, timestamps
`YYYY-MM-DDTHH:MM:SS.ffffff` without a zone (instants converted to UTC; 9 digits for
nanosecond columns), dates `YYYY-MM-DD`, times `HH:MM:SS.ffffff`, UUIDs hyphenated
lowercase. The text must compare correctly against the column when bound as a literal
in a UTC session, which is why instants lose their zone only after conversion to UTC.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from typing import Any

from rivet_core.lazy_modules import pa, pc

_UTC = dt.UTC


def _render_float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def _render_decimal(value: decimal.Decimal) -> str:
    return format(value, "f")


def _iso_seconds(moment: dt.datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SS`, zero-padded (strftime's %Y is not, for years < 1000)."""
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
            f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}")


def _render_timestamp(value: Any, arrow_type: pa.DataType) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        # Nanosecond column: value is integer ns since the epoch (see last_cursor_in_batch).
        seconds, nanos = divmod(value, 1_000_000_000)
        moment = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds)
        return _iso_seconds(moment) + f".{nanos:09d}"
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_UTC).replace(tzinfo=None)
        text = _iso_seconds(value)
        if pa.types.is_timestamp(arrow_type) and arrow_type.unit == "ns":
            return text + f".{value.microsecond * 1000:09d}"
        return text + f".{value.microsecond:06d}"
    if isinstance(value, dt.date):
        return value.isoformat() + "T00:00:00.000000"
    raise TypeError(f"cannot render {type(value).__name__} as a timestamp cursor")


def render_cursor_value(value: Any, arrow_type: pa.DataType) -> str:
    """Text form of a cursor value of `arrow_type` (see module doc). NULL is not a cursor."""
    if value is None:
        raise ValueError("a NULL value cannot be an incremental cursor")
    if isinstance(value, pa.Scalar):
        value = value.as_py()
    if pa.types.is_timestamp(arrow_type):
        return _render_timestamp(value, arrow_type)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _render_float(value)
    if isinstance(value, decimal.Decimal):
        return _render_decimal(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        if len(value) == 16 and _is_uuid_type(arrow_type):
            return str(uuid.UUID(bytes=bytes(value)))
        return bytes(value).hex()
    if isinstance(value, dt.datetime):
        return _render_timestamp(value, arrow_type)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        return value.replace(tzinfo=None).isoformat(timespec="microseconds")
    if isinstance(value, str):
        return value
    raise TypeError(
        f"cannot use a {arrow_type} value as an incremental cursor — choose an integer, "
        f"decimal, text, date, timestamp or uuid column"
    )


def _is_uuid_type(arrow_type: pa.DataType) -> bool:
    return isinstance(arrow_type, pa.BaseExtensionType) and arrow_type.extension_name == "arrow.uuid"


def last_cursor_in_batch(batch: pa.RecordBatch, column: str) -> Any | None:
    """Last non-null value of `column` in `batch` (None if every value is NULL).

    Nanosecond timestamps come back as integer nanoseconds since the epoch, because a
    Python datetime would drop the last three digits; `render_cursor_value` knows that.
    """
    array = batch.column(column)
    non_null = array.drop_null()
    if len(non_null) == 0:
        return None
    last = non_null[len(non_null) - 1]
    if pa.types.is_timestamp(array.type) and array.type.unit == "ns":
        return pc.cast(non_null.slice(len(non_null) - 1), pa.int64())[0].as_py()
    return last.as_py()
