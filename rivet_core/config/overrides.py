"""Column type overrides (`exports[].columns`): type strings → Arrow types (reference §4.3).

Overrides beat autodetection, so a typo must never be silently ignored: every override is
parsed when the config loads (Rivet only notices at plan time). Keys may carry a
``table.`` qualifier for `table:` exports; `normalise_column_key` strips it.
"""

from __future__ import annotations

import re

import pyarrow as pa

from rivet_core.errors import ConfigError

_DECIMAL = re.compile(r"^(decimal|numeric)\s*(?:\((.*)\))?$")

_SIMPLE: dict[str, pa.DataType] = {}
for _names, _type in (
    (("bool", "boolean"), pa.bool_()),
    (("int2", "smallint", "int16"), pa.int16()),
    (("int4", "int", "integer", "int32"), pa.int32()),
    (("int8", "bigint", "int64"), pa.int64()),
    (("float4", "real", "float32"), pa.float32()),
    (("float8", "double", "double precision", "float64"), pa.float64()),
    (("text", "varchar", "string", "char", "bpchar", "name"), pa.string()),
    (("binary", "bytea", "blob", "varbinary"), pa.binary()),
    (("date",), pa.date32()),
    (("json", "jsonb"), pa.json_(pa.string())),
    (("uuid",), pa.uuid()),
    (("timestamp",), pa.timestamp("us")),
    (("timestamp_ns",), pa.timestamp("ns")),
    (("timestamp_tz", "timestamptz", "timestamp_utc"), pa.timestamp("us", "UTC")),
    (("timestamp_tz_ns",), pa.timestamp("ns", "UTC")),
):
    for _name in _names:
        _SIMPLE[_name] = _type

#: Shown in the "unrecognised type" message.
ACCEPTED_TYPES: tuple[str, ...] = ("decimal(p,s)", "numeric(p,s)", *_SIMPLE)


def _describe(column: str | None) -> str:
    return f" for column '{column}'" if column is not None else ""


def _parse_decimal(text: str, args: str | None, column: str | None) -> pa.DataType:
    parts = [p.strip() for p in (args or "").split(",")]
    if args is None or len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ConfigError(
            f"column override: '{text}'{_describe(column)} needs both precision and scale as "
            "whole numbers, e.g. decimal(18,2)"
        )
    precision, scale = int(parts[0]), int(parts[1])
    if not 1 <= precision <= 76:
        raise ConfigError(
            f"column override: '{text}'{_describe(column)} has precision {precision} — "
            "precision must be 1..76"
        )
    if scale > precision:
        raise ConfigError(
            f"column override: '{text}'{_describe(column)} has scale {scale} greater than "
            f"precision {precision} — scale must be 0..{precision}"
        )
    if precision <= 38:
        return pa.decimal128(precision, scale)
    return pa.decimal256(precision, scale)


def parse_column_override(text: str, column: str | None = None) -> pa.DataType:
    """Parse one override type string (case-insensitive) into an Arrow type.

    `column` only improves the error message.
    """
    if not isinstance(text, str):
        raise ConfigError(
            f"column override{_describe(column)} must be a type name string, got {text!r}"
        )
    norm = " ".join(text.strip().lower().split())
    if norm in _SIMPLE:
        return _SIMPLE[norm]
    match = _DECIMAL.match(norm)
    if match:
        return _parse_decimal(text, match.group(2), column)
    raise ConfigError(
        f"column override: unrecognised type '{text}'{_describe(column)} — use one of: "
        + ", ".join(ACCEPTED_TYPES)
    )


def split_column_key(key: str) -> tuple[str | None, str]:
    """Split ``"orders.id"`` / ``"public.orders.id"`` into (qualifier, column)."""
    if "." in key:
        qualifier, column = key.rsplit(".", 1)
        return qualifier, column
    return None, key


def normalise_column_key(key: str) -> str:
    """The bare column name an override applies to (qualifier stripped)."""
    return split_column_key(key)[1]
