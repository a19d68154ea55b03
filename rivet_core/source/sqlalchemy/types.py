"""SQLAlchemy column type → Arrow type, exact, for the generic source (docs/sqlalchemy.md).

Input is a SQLAlchemy type object: the one the dialect's inspector reflects for a table
column, or the one the dialect's own type-name table (`ischema_names`) gives for a type
name the driver states in its result description. The rules follow the native readers'
(rivet_core/source/postgres/types.py, rivet_core/source/mysql/types.py), so one table read
both ways has one schema:

| SQLAlchemy type                          | Arrow                         |
|------------------------------------------|-------------------------------|
| Boolean, MySQL TINYINT(1) / BIT(1)       | bool                          |
| TINYINT, SMALLINT, YEAR                  | int16 (unsigned SMALLINT: int32) |
| INTEGER, MEDIUMINT                       | int32 (unsigned: int64)       |
| BIGINT, any SQLite integer               | int64 (unsigned: uint64)      |
| NUMERIC/DECIMAL(p,s), p ≤ 76             | decimal(p,s)                  |
| FLOAT(p ≤ 24) and the dialect's 4-byte names (PostgreSQL REAL, MySQL FLOAT, DuckDB FLOAT) | float32 |
| DOUBLE, other REAL/FLOAT                 | float64                       |
| DATE / TIME                              | date32 / time64(us)           |
| DATETIME / TIMESTAMP                     | timestamp(us), naive          |
| TIMESTAMP WITH TIME ZONE, MySQL TIMESTAMP| timestamp(us, UTC)            |
| CHAR, VARCHAR, TEXT, CLOB, ENUM, SET     | string (enum: logical `enum`) |
| BINARY, VARBINARY, BLOB, BYTEA           | binary                        |
| JSON, JSONB                              | JSON text (logical `json`)    |
| UUID                                     | uuid (logical `uuid`)         |

Everything else (unbounded NUMERIC, INTERVAL, arrays, TIME WITH TIME ZONE, a type the
dialect does not know) has no safe mapping: the column is returned with its reason, and
the session's `describe` fails naming it and the `columns:` override, before any part is
written (rivet_core/source/base.py).
"""

from __future__ import annotations

import re
from typing import Any

from rivet_core.lazy_modules import pa
from rivet_core.source.base import SourceColumn
from rivet_core.source.batching import uuid_object_converter
from rivet_core.source.postgres.types import decimal_type

_TYPE_ARGS = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_ ]*?)\s*(?:\(([^)]*)\))?\s*$")


def native_name(sa_type: Any, dialect: Any) -> str:
    """The type as the dialect writes it in DDL (`NUMERIC(12, 2)`), for `rivet.native_type`."""
    from sqlalchemy.exc import CompileError

    try:
        return str(sa_type.compile(dialect=dialect))
    except (CompileError, NotImplementedError):  # a type the dialect cannot render still has a name
        return type(sa_type).__name__


def _class_names(sa_type: Any) -> set[str]:
    """Upper-case names of the type's classes: dialect types (duckdb-engine's `UInt64`,
    MySQL's `YEAR`) are recognised by name, so no dialect package is imported here."""
    return {cls.__name__.upper() for cls in type(sa_type).__mro__}


def _unsupported(name: str, native: str, reason: str) -> SourceColumn:
    return SourceColumn(name, native, None, unsupported_reason=reason)


def _integer(sa_type: Any, names: set[str]) -> pa.DataType | None:
    """Arrow integer of an integer type, by its width and signedness (None: wider than 64
    bits). Class names cover the generic types, MySQL's and duckdb-engine's."""
    if names & {"HUGEINTEGER", "UHUGEINTEGER", "VARINT"}:
        return None
    for unsigned_names, arrow_type in (
        ({"UBIGINTEGER", "UINT64"}, pa.uint64()), ({"UINTEGER", "UINT32"}, pa.uint32()),
        ({"USMALLINTEGER", "UINT16"}, pa.uint16()), ({"UTINYINTEGER", "UINT8"}, pa.uint8()),
    ):
        if names & unsigned_names:
            return arrow_type
    unsigned = bool(getattr(sa_type, "unsigned", False))
    for signed_names, signed_type, unsigned_type in (
        ({"TINYINT", "TINYINTEGER"}, pa.int16(), pa.int16()),  # as the native MySQL reader
        ({"SMALLINTEGER", "SMALLINT"}, pa.int16(), pa.int32()),
        ({"MEDIUMINT"}, pa.int32(), pa.int64()),
        ({"BIGINTEGER", "BIGINT"}, pa.int64(), pa.uint64()),
    ):
        if names & signed_names:
            return unsigned_type if unsigned else signed_type
    return pa.int64() if unsigned else pa.int32()


def _numeric(name: str, native: str, sa_type: Any) -> SourceColumn:
    precision, scale = getattr(sa_type, "precision", None), getattr(sa_type, "scale", None)
    if precision is None:
        return _unsupported(name, native, (
            "unbounded numeric has no precision — add `columns: {"
            f"{name}: \"decimal(38,9)\"}}` (your precision and scale) or cast in SQL "
            f"(CAST({name} AS NUMERIC(p,s)))"))
    if not 1 <= precision <= 76:
        return _unsupported(name, native, (
            f"precision {precision} exceeds Arrow's 76 digits — cast in SQL or to text"))
    return SourceColumn(name, native, decimal_type(precision, scale or 0))


#: Type names that are 4-byte floats in a dialect (elsewhere REAL/FLOAT are 8 bytes: SQLite's
#: REAL, MySQL's REAL).
_FLOAT4_NAMES = {"postgresql": {"REAL"}, "mssql": {"REAL"}, "duckdb": {"REAL", "FLOAT"},
                 "mysql": {"FLOAT"}, "mariadb": {"FLOAT"}}


def _float(sa_type: Any, names: set[str], dialect_name: str) -> pa.DataType:
    """float32 for the 4-byte types, float64 for the rest (DOUBLE, FLOAT(53), …)."""
    if names & {"DOUBLE", "DOUBLE_PRECISION"}:
        return pa.float64()
    precision = getattr(sa_type, "precision", None)
    if precision is not None and precision <= 24:
        return pa.float32()
    if precision is None and names & _FLOAT4_NAMES.get(dialect_name, set()):
        return pa.float32()
    return pa.float64()


def sqlalchemy_column(name: str, sa_type: Any, dialect: Any,
                      native: str | None = None) -> SourceColumn:
    """Map one column (see the module doc); total: never raises. `native`: the type's name
    as the driver stated it (default: as the dialect renders the SQLAlchemy type)."""
    from sqlalchemy import types as t

    native = native or native_name(sa_type, dialect)
    names = _class_names(sa_type)
    if isinstance(sa_type, t.NullType):
        return _unsupported(name, native, (
            f"the {dialect.name} dialect does not know this column's type — add `columns: "
            f"{{{name}: <type>}}` or cast in SQL"))
    if isinstance(sa_type, t.JSON) or "JSONB" in names:
        return SourceColumn(name, native, pa.json_(pa.string()), logical_type="json")
    if isinstance(sa_type, t.Uuid) or "UUID" in names:
        return SourceColumn(name, native, pa.uuid(), logical_type="uuid",
                            converter=uuid_object_converter(name))
    if isinstance(sa_type, t.Boolean) or ("BIT" in names and getattr(sa_type, "length", 0) == 1):
        return SourceColumn(name, native, pa.bool_(), direct=False)
    if "TINYINT" in names and getattr(sa_type, "display_width", None) == 1:
        return SourceColumn(name, native, pa.bool_(), direct=False)  # MySQL's BOOLEAN
    if "YEAR" in names:
        return SourceColumn(name, native, pa.int16(), direct=False)
    if "BIT" in names:
        return SourceColumn(name, native, pa.int64(), direct=False)
    if isinstance(sa_type, t.Integer):
        # SQLite stores every integer in up to 8 bytes, whatever width the column declares.
        arrow_type = pa.int64() if dialect.name == "sqlite" else _integer(sa_type, names)
        if arrow_type is None:
            return _unsupported(name, native, (
                f"128-bit integers have no exact Arrow integer — add `columns: {{{name}: "
                f"\"decimal(39,0)\"}}` or cast in SQL"))
        return SourceColumn(name, native, arrow_type)
    if isinstance(sa_type, t.Float):
        return SourceColumn(name, native, _float(sa_type, names, dialect.name))
    if isinstance(sa_type, t.Numeric):
        return _numeric(name, native, sa_type)
    if isinstance(sa_type, t.DateTime):
        # MySQL's TIMESTAMP is an instant (the session reads it in UTC, as the native one).
        zoned = bool(getattr(sa_type, "timezone", False)) or (
            "TIMESTAMP" in names and dialect.name in ("mysql", "mariadb"))
        return SourceColumn(name, native, pa.timestamp("us", tz="UTC" if zoned else None))
    if isinstance(sa_type, t.Date):
        return SourceColumn(name, native, pa.date32())
    if isinstance(sa_type, t.Time):
        if getattr(sa_type, "timezone", False):
            return _unsupported(name, native, (
                f"time with time zone has no Arrow type — cast in SQL (CAST({name} AS TIME)) "
                f"or add `columns: {{{name}: string}}`"))
        return SourceColumn(name, native, pa.time64("us"))
    if isinstance(sa_type, t.Enum) or "SET" in names:
        return SourceColumn(name, native, pa.string(), logical_type="enum", direct=False)
    if isinstance(sa_type, t.String):
        return SourceColumn(name, native, pa.string())
    if isinstance(sa_type, t._Binary):
        return SourceColumn(name, native, pa.binary())
    if isinstance(sa_type, t.Interval):
        return _unsupported(name, native, (
            f"interval has no exact Arrow type here — cast in SQL to text or add `columns: "
            f"{{{name}: string}}`"))
    if isinstance(sa_type, t.ARRAY):
        return _unsupported(name, native, (
            f"arrays are not mapped by the SQLAlchemy source — cast in SQL to text (or JSON "
            f"text) or add `columns: {{{name}: string}}`"))
    return _unsupported(name, native, (
        f"no Arrow mapping for SQLAlchemy type {type(sa_type).__name__} — cast in SQL or add "
        f"`columns: {{{name}: <type>}}`"))


def _standard_names() -> dict[str, Any]:
    """SQL's standard type names, for a name the dialect's own table lacks (duckdb-engine's
    has no DECIMAL, DOUBLE or BLOB)."""
    from sqlalchemy import types as t

    return {"DECIMAL": t.DECIMAL, "NUMERIC": t.NUMERIC, "DOUBLE": t.DOUBLE, "REAL": t.REAL,
            "FLOAT": t.FLOAT, "BLOB": t.BLOB, "BYTEA": t.LargeBinary, "VARBINARY": t.VARBINARY,
            "TIMESTAMP": t.TIMESTAMP, "DATETIME": t.DATETIME, "DATE": t.DATE, "TIME": t.TIME,
            "VARCHAR": t.VARCHAR, "TEXT": t.TEXT, "CHAR": t.CHAR, "BOOLEAN": t.BOOLEAN,
            "SMALLINT": t.SMALLINT, "INTEGER": t.INTEGER, "BIGINT": t.BIGINT,
            "JSON": t.JSON, "UUID": t.UUID}


def type_from_name(type_name: str, dialect: Any) -> Any | None:
    """The SQLAlchemy type of a type name as the driver states it (`DECIMAL(12,2)`,
    `TIMESTAMP WITH TIME ZONE`), through the dialect's own name table; None when the
    dialect has no such table or does not know the name."""
    table = getattr(dialect, "ischema_names", None) or {}
    match = _TYPE_ARGS.match(type_name)
    if not match:
        return None
    base = match.group(1).strip()
    cls = (table.get(base) or table.get(base.lower()) or table.get(base.upper())
           or _standard_names().get(base.upper()))
    if cls is None:
        return None
    args = [int(a) for a in (match.group(2) or "").split(",") if a.strip().lstrip("-").isdigit()]
    try:
        sa_type = cls(*args) if args else cls()
    except TypeError:
        sa_type = cls()
    if "WITH TIME ZONE" in base.upper() and hasattr(sa_type, "timezone"):
        sa_type.timezone = True
    return sa_type
