"""PostgreSQL result column → Arrow type (docs/rivet-compat.md "Type mapping", exact).

Input is what the server tells us about each result column — type OID and type modifier
from the RowDescription, plus one `pg_type` catalog row per column — so numeric precision
and scale come from the typmod of the result itself (a plain column, a view column or an
explicit `::numeric(p,s)` cast all carry it; an expression does not). Output is a
`SourceColumn` per column: an Arrow type, or the reason there is none (the session turns
those into one `UnsupportedTypeError`).

Decisions: decimals are never floats; unbounded/computed numeric is unsupported without an
override; timestamptz is an instant in UTC, timestamp stays naive; json/jsonb are UTF-8 text
as PostgreSQL renders it (the session loads them as text); interval is ISO-8601 text (the
session sets IntervalStyle=iso_8601); enum is text with logical type `enum`; only 1-D arrays
of scalar types with an exact Python→Arrow path are lists (numeric[] is not: its elements
carry no typmod).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from rivet_core.lazy_modules import pa
from rivet_core.source.base import SourceColumn
from rivet_core.source.batching import uuid_object_converter

#: Catalog lookup for the result's type OIDs; one row per result column, in order.
CATALOG_SQL = """
SELECT x.i,
       format_type(x.oid, NULLIF(x.mod, -1)),
       t.typname, t.typtype, t.typcategory,
       e.typname, e.typtype,
       b.typname
FROM unnest(%s::oid[], %s::int4[]) WITH ORDINALITY AS x(oid, mod, i)
LEFT JOIN pg_catalog.pg_type t ON t.oid = x.oid
LEFT JOIN pg_catalog.pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
LEFT JOIN pg_catalog.pg_type b ON b.oid = t.typbasetype AND t.typtype = 'd'
ORDER BY x.i
"""


@dataclass(frozen=True)
class PgTypeInfo:
    """What the catalog says about one result column's type."""

    formatted: str          # format_type(oid, typmod), e.g. "numeric(12,2)"
    typname: str
    typtype: str            # b base, e enum, d domain, r range, c composite, p pseudo, m multirange
    typcategory: str        # 'A' for arrays
    elem_typname: str | None
    elem_typtype: str | None
    base_typname: str | None  # for domains


@functools.cache
def _simple() -> dict[str, pa.DataType]:
    """Built on first use: `pa` is lazy (rivet_core/lazy_modules.py)."""
    return {
        "bool": pa.bool_(),
        "int2": pa.int16(), "int4": pa.int32(), "int8": pa.int64(), "oid": pa.int64(),
        "float4": pa.float32(), "float8": pa.float64(),
        "date": pa.date32(),
        "time": pa.time64("us"),
        "timestamp": pa.timestamp("us"),
        "timestamptz": pa.timestamp("us", tz="UTC"),
        "text": pa.string(), "varchar": pa.string(), "bpchar": pa.string(),
        "name": pa.string(), "char": pa.string(), "citext": pa.string(),
        "bytea": pa.binary(),
    }


#: Element types a 1-D array may have: the driver yields Python values Arrow takes as-is.
_ARRAY_ELEMENTS = {
    "bool", "int2", "int4", "int8", "float4", "float8", "text", "varchar", "bpchar", "name",
    "date", "time", "timestamp", "timestamptz", "bytea",
}

_UNSUPPORTED_REASONS: dict[str, str] = {
    "timetz": "time with time zone has no Arrow type — cast in SQL (col::time or col::text)",
    "money": "money is locale-formatted text — cast in SQL (col::numeric(19,2))",
    "xml": "xml has no Arrow mapping — cast in SQL (col::text)",
    "inet": "network address type — cast in SQL (col::text)",
    "cidr": "network address type — cast in SQL (col::text)",
    "macaddr": "network address type — cast in SQL (col::text)",
    "macaddr8": "network address type — cast in SQL (col::text)",
    "hstore": "hstore has no Arrow mapping — cast in SQL (hstore_to_json(col)::text)",
    "tsvector": "full-text search type — cast in SQL (col::text)",
    "tsquery": "full-text search type — cast in SQL (col::text)",
    "geometry": "PostGIS geometry — cast in SQL (ST_AsText(col) or ST_AsBinary(col))",
    "geography": "PostGIS geography — cast in SQL (ST_AsText(col) or ST_AsBinary(col))",
}
_GEOMETRIC = {"point", "line", "lseg", "box", "path", "polygon", "circle"}


def numeric_precision_scale(typmod: int) -> tuple[int, int] | None:
    """(precision, scale) encoded in a numeric typmod; None for unbounded (-1)."""
    if typmod < 4:
        return None
    packed = typmod - 4
    precision = (packed >> 16) & 0xFFFF
    # PostgreSQL 15+ allows a negative scale, stored as an 11-bit two's complement.
    scale = ((packed & 0x7FF) ^ 1024) - 1024
    return precision, scale


def decimal_type(precision: int, scale: int) -> pa.DataType:
    """Decimal128 up to 38 digits, Decimal256 above (Arrow's limit is 76)."""
    if precision <= 38:
        return pa.decimal128(precision, scale)
    return pa.decimal256(precision, scale)


def _numeric_column(name: str, typmod: int, formatted: str) -> SourceColumn:
    ps = numeric_precision_scale(typmod)
    if ps is None:
        return SourceColumn(
            name, formatted, None,
            unsupported_reason=(
                "unbounded numeric has no precision — add `columns: {"
                f"{name}: \"decimal(38,9)\"}}` (your precision and scale) or cast in SQL "
                f"({name}::numeric(p,s))"
            ),
        )
    precision, scale = ps
    if precision > 76:
        return SourceColumn(
            name, formatted, None,
            unsupported_reason=(
                f"precision {precision} exceeds Arrow's 76 digits — cast in SQL "
                f"({name}::numeric(76,s)) or to text"
            ),
        )
    return SourceColumn(name, formatted, decimal_type(precision, scale))


def _reason_for(typname: str, typtype: str) -> str:
    if typname in _UNSUPPORTED_REASONS:
        return _UNSUPPORTED_REASONS[typname]
    if typname in _GEOMETRIC:
        return "geometric type has no Arrow mapping — cast in SQL (col::text)"
    if typtype in ("r", "m"):
        return "range type — cast in SQL (lower(col), upper(col), or col::text)"
    if typtype == "c":
        return "composite (row) type — select its fields individually or cast to text"
    if typtype == "p":
        return "pseudo-type (record/void/unknown) — give the expression a concrete type"
    return "no Arrow mapping for this type — cast in SQL (col::text)"


def _array_column(name: str, info: PgTypeInfo) -> SourceColumn:
    element = info.elem_typname or "?"
    if element in _ARRAY_ELEMENTS:
        return SourceColumn(name, info.formatted, pa.list_(_simple()[element]))
    if element == "numeric":
        reason = (
            "numeric[] elements carry no precision — cast in SQL (col::text[] or "
            "array_to_json(col)::text)"
        )
    else:
        reason = (
            f"arrays of {element} are not supported — cast in SQL (col::text[] or "
            f"array_to_json(col)::text)"
        )
    return SourceColumn(name, info.formatted, None, unsupported_reason=reason)


def pg_column(name: str, typmod: int, info: PgTypeInfo) -> SourceColumn:
    """Map one result column; see the module doc for the rules."""
    typname = info.typname
    if info.typtype == "d" and info.base_typname:
        typname = info.base_typname
    if info.typcategory == "A" and info.elem_typname:
        return _array_column(name, info)
    if typname == "numeric":
        return _numeric_column(name, typmod, info.formatted)
    if typname in _simple():
        return SourceColumn(name, info.formatted, _simple()[typname])
    if typname in ("json", "jsonb"):
        return SourceColumn(name, info.formatted, pa.json_(pa.string()), logical_type="json")
    if typname == "uuid":
        return SourceColumn(
            name, info.formatted, pa.uuid(), logical_type="uuid",
            converter=uuid_object_converter(name),
        )
    if typname == "interval":
        return SourceColumn(name, info.formatted, pa.string(), logical_type="interval")
    if info.typtype == "e":
        return SourceColumn(name, info.formatted, pa.string(), logical_type="enum")
    return SourceColumn(
        name, info.formatted, None, unsupported_reason=_reason_for(typname, info.typtype)
    )
