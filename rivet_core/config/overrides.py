"""Column type overrides (`exports[].columns`): type strings → Arrow types (docs/rivet-compat.md "Type mapping").

Overrides beat autodetection, so a typo must never be silently ignored: every override is
parsed when the config loads (Rivet only notices at plan time). Keys may carry a
``table.`` qualifier for `table:` exports; `normalise_column_key` strips it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rivet_core.errors import ConfigError

if TYPE_CHECKING:
    import pyarrow as pa

_DECIMAL = re.compile(r"^(decimal|numeric)\s*(?:\((.*)\))?$")

# Arrow types are built on first use (pyarrow is imported then), so loading a config without
# `columns:` overrides — `rivet state`, `metrics`, `journal` — never imports pyarrow.
_SIMPLE_SPECS: tuple[tuple[tuple[str, ...], Callable[[Any], pa.DataType]], ...] = (
    (("bool", "boolean"), lambda pa: pa.bool_()),
    (("int2", "smallint", "int16"), lambda pa: pa.int16()),
    (("int4", "int", "integer", "int32"), lambda pa: pa.int32()),
    (("int8", "bigint", "int64"), lambda pa: pa.int64()),
    (("float4", "real", "float32"), lambda pa: pa.float32()),
    (("float8", "double", "double precision", "float64"), lambda pa: pa.float64()),
    (("text", "varchar", "string", "char", "bpchar", "name"), lambda pa: pa.string()),
    (("binary", "bytea", "blob", "varbinary"), lambda pa: pa.binary()),
    (("date",), lambda pa: pa.date32()),
    (("json", "jsonb"), lambda pa: pa.json_(pa.string())),
    (("uuid",), lambda pa: pa.uuid()),
    (("timestamp",), lambda pa: pa.timestamp("us")),
    (("timestamp_ns",), lambda pa: pa.timestamp("ns")),
    (("timestamp_tz", "timestamptz", "timestamp_utc"), lambda pa: pa.timestamp("us", "UTC")),
    (("timestamp_tz_ns",), lambda pa: pa.timestamp("ns", "UTC")),
)
_SIMPLE_NAMES: tuple[str, ...] = tuple(name for names, _ in _SIMPLE_SPECS for name in names)
_SIMPLE: dict[str, pa.DataType] = {}  # filled by _simple_types() on first use


def _simple_types() -> dict[str, pa.DataType]:
    if not _SIMPLE:
        import pyarrow as pa

        _SIMPLE.update({name: make(pa) for names, make in _SIMPLE_SPECS for name in names})
    return _SIMPLE


#: Shown in the "unrecognised type" message.
ACCEPTED_TYPES: tuple[str, ...] = ("decimal(p,s)", "numeric(p,s)", *_SIMPLE_NAMES)


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
    import pyarrow as pa

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
    simple = _simple_types()
    if norm in simple:
        return simple[norm]
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
