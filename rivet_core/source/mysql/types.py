"""MySQL / MariaDB result column → Arrow type (docs/rivet-compat.md "Type mapping", exact).

Input is the column definition the server sends with every result (PyMySQL's field
descriptor: wire type code, flags, charset number, display length, decimals). Decimal
precision is derived from the display length and decimals (length minus the point minus
the sign), so DECIMAL(p,s) columns and DECIMAL expressions alike map to Decimal128(p,s);
only an underivable width is unsupported. Integers widen when UNSIGNED (bigint unsigned →
UInt64); `tinyint(1)` and `bit(1)` are booleans; charset 63 ("binary") marks byte strings.

MariaDB's JSON is LONGTEXT with a `json_valid()` CHECK constraint and looks like text on
the wire; the session passes the set of such (table, column) pairs so they map to JSON.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from rivet_core.lazy_modules import pa
from rivet_core.source.base import SourceColumn
from rivet_core.source.postgres.types import decimal_type

BINARY_CHARSET = 63

# Wire type codes (include/mysql_com.h, enum_field_types).
DECIMAL, TINY, SHORT, LONG, FLOAT, DOUBLE, NULL, TIMESTAMP, LONGLONG, INT24 = range(10)
DATE, TIME, DATETIME, YEAR, NEWDATE, VARCHAR, BIT = 10, 11, 12, 13, 14, 15, 16
JSON, NEWDECIMAL, ENUM, SET = 245, 246, 247, 248
TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, BLOB, VAR_STRING, STRING, GEOMETRY = range(249, 256)

# Column flags.
UNSIGNED_FLAG, ENUM_FLAG, SET_FLAG = 32, 256, 2048

#: MySQL's decimals value meaning "not fixed" (floats, strings, some expressions).
NOT_FIXED_DEC = 31

@functools.cache
def _ints() -> dict[int, tuple[str, pa.DataType, pa.DataType]]:
    """Integer type code → (native name, signed type, unsigned type); built on first use
    (`pa` is lazy: rivet_core/lazy_modules.py)."""
    return {
        TINY: ("tinyint", pa.int16(), pa.int16()),
        SHORT: ("smallint", pa.int16(), pa.int32()),
        INT24: ("mediumint", pa.int32(), pa.int64()),
        LONG: ("int", pa.int32(), pa.int64()),
        LONGLONG: ("bigint", pa.int64(), pa.uint64()),
    }

_TEXTUAL = {VARCHAR, VAR_STRING, STRING, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, BLOB}


@dataclass(frozen=True)
class MySQLField:
    """The parts of a column definition the mapping needs (mirrors PyMySQL's packet)."""

    name: str
    type_code: int
    flags: int
    charsetnr: int
    length: int
    decimals: int
    org_table: str = ""
    org_name: str = ""


def _decimal_column(field: MySQLField, native_prefix: str) -> SourceColumn:
    scale = field.decimals
    unsigned = bool(field.flags & UNSIGNED_FLAG)
    precision = field.length - (1 if scale > 0 else 0) - (0 if unsigned else 1)
    native = f"{native_prefix}({precision},{scale})" + (" unsigned" if unsigned else "")
    if scale >= NOT_FIXED_DEC or precision < 1 or precision < scale or precision > 76:
        return SourceColumn(
            field.name, native_prefix, None,
            unsupported_reason=(
                "decimal width cannot be derived from the result metadata — add `columns: {"
                f"{field.name}: \"decimal(38,9)\"}}` or cast in SQL (CAST(… AS DECIMAL(p,s)))"
            ),
        )
    return SourceColumn(field.name, native, decimal_type(precision, scale))


def _text_native(field: MySQLField, binary: bool) -> str:
    if field.type_code == STRING:
        return "binary" if binary else "char"
    if field.type_code in (VARCHAR, VAR_STRING):
        return "varbinary" if binary else "varchar"
    return "blob" if binary else "text"


def mysql_column(field: MySQLField, json_columns: frozenset[tuple[str, str]] = frozenset()) -> SourceColumn:
    """Map one MySQL/MariaDB result column; see the module doc for the rules."""
    code, name = field.type_code, field.name
    unsigned = bool(field.flags & UNSIGNED_FLAG)
    suffix = " unsigned" if unsigned else ""
    if code == TINY and field.length == 1:
        return SourceColumn(name, "tinyint(1)" + suffix, pa.bool_(), direct=False)
    if code in _ints():
        native, signed_type, unsigned_type = _ints()[code]
        return SourceColumn(name, native + suffix, unsigned_type if unsigned else signed_type)
    if code == FLOAT:
        return SourceColumn(name, "float", pa.float32())
    if code == DOUBLE:
        return SourceColumn(name, "double", pa.float64())
    if code in (NEWDECIMAL, DECIMAL):
        return _decimal_column(field, "decimal")
    if code in (DATE, NEWDATE):
        return SourceColumn(name, "date", pa.date32())
    if code == TIME:
        return SourceColumn(name, "time", pa.time64("us"), direct=False)
    if code == DATETIME:
        return SourceColumn(name, "datetime", pa.timestamp("us"))
    if code == TIMESTAMP:
        # The session runs with time_zone='+00:00', so the naive value is a UTC instant.
        return SourceColumn(name, "timestamp", pa.timestamp("us", tz="UTC"))
    if code == YEAR:
        return SourceColumn(name, "year", pa.int16())
    if code == BIT:
        if field.length == 1:
            return SourceColumn(name, "bit(1)", pa.bool_(), direct=False)
        return SourceColumn(name, f"bit({field.length})", pa.int64(), direct=False)
    if code == JSON:
        return SourceColumn(name, "json", pa.json_(pa.string()), logical_type="json")
    if code == ENUM or field.flags & ENUM_FLAG:
        return SourceColumn(name, "enum", pa.string(), logical_type="enum")
    if code == SET or field.flags & SET_FLAG:
        return SourceColumn(name, "set", pa.string(), logical_type="enum")
    if code in _TEXTUAL:
        binary = field.charsetnr == BINARY_CHARSET
        if not binary and (field.org_table, field.org_name) in json_columns:
            return SourceColumn(name, "json", pa.json_(pa.string()), logical_type="json")
        native = _text_native(field, binary)
        return SourceColumn(name, native, pa.binary() if binary else pa.string())
    if code == NULL:
        return SourceColumn(name, "null", pa.string())
    if code == GEOMETRY:
        return SourceColumn(
            name, "geometry", None,
            unsupported_reason="spatial type — cast in SQL (ST_AsText(col) or ST_AsWKB(col))",
        )
    return SourceColumn(
        name, f"type {code}", None,
        unsupported_reason="no Arrow mapping for this type — cast in SQL (CAST(col AS CHAR))",
    )
