"""Which Arrow types a Delta table can hold, checked before anything is written.

Delta's types (the protocol's primitive, array, map and struct types) are narrower than
Arrow's: no unsigned integers, no time of day, no fixed-size binary (a uuid), decimals up
to precision 38, timestamps in microseconds. A column outside that set is refused at the
schema gate — before the first part is written — with the `columns:` override that makes
it fit, so a run never writes parts it cannot commit (docs/adr/0009-table-formats.md).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from rivet_core.errors import ConfigError


def _storage(t: pa.DataType) -> pa.DataType:
    return t.storage_type if isinstance(t, pa.ExtensionType) else t


def _problem(t: pa.DataType) -> str | None:
    """Why `t` cannot be a Delta column and the override that fixes it; None when it can."""
    name = getattr(t, "extension_name", None)
    if name == "arrow.uuid":
        return "a uuid (Delta has no uuid or fixed-size binary type) — override it: `text`"
    if name == "arrow.json":
        return None  # a JSON string: Delta `string`
    t = _storage(t)
    if pa.types.is_unsigned_integer(t):
        return "an unsigned integer (Delta has none) — override it: `bigint`, or `decimal(20,0)` for uint64"
    if pa.types.is_time(t):
        return "a time of day (Delta has none) — override it: `text`"
    if pa.types.is_fixed_size_binary(t):
        return "fixed-size binary (Delta has none) — override it: `binary`"
    if pa.types.is_decimal(t) and t.precision > 38:
        return f"decimal({t.precision},{t.scale}) (Delta's decimals hold precision 38 at most) — " \
               f"override it: `decimal(38,{min(t.scale, 38)})` if the values fit, else `text`"
    if pa.types.is_timestamp(t) and t.unit != "us":
        return (f"a timestamp in {t.unit} (Delta stores microseconds) — override it: "
                f"`{'timestamp_tz' if t.tz else 'timestamp'}`")
    if pa.types.is_duration(t) or pa.types.is_interval(t):
        return "a duration/interval (Delta has none) — override it: `text`"
    if pa.types.is_null(t):
        return "always NULL with no type (Delta needs one) — override it, e.g. `text`"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        inner = _problem(t.value_type)
        return None if inner is None else f"an array of {inner}"
    if pa.types.is_struct(t):
        for field in t:
            inner = _problem(field.type)
            if inner is not None:
                return f"a struct whose field '{field.name}' is {inner}"
        return None
    if pa.types.is_map(t):
        return _problem(t.key_type) or _problem(t.item_type)
    return None


def table_type_errors(schema: pa.Schema, table_format: str) -> list[str]:
    """One line per column `table_format` cannot hold, naming the column and its override."""
    return [f"column '{f.name}' is {problem} under `columns:`"
            for f in schema if (problem := _problem(f.type)) is not None]


def refuse_unholdable(export: Any, schema: pa.Schema) -> None:
    """The schema gate's table-format check: raise `ConfigError` naming every column the
    export's `table_format` cannot hold (nothing is written yet); no-op for plain files."""
    fmt = getattr(export, "table_format", None)
    if fmt is None:
        return
    problems = table_type_errors(schema, fmt)
    if problems:
        raise ConfigError(f"export '{export.name}': table_format: {fmt} cannot hold every column: "
                          + "; ".join(problems) + " — nothing was written")


def delta_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema of the table: extension types by their storage (a JSON column is a
    Delta `string`); the file keeps its own logical annotation."""
    return pa.schema([pa.field(f.name, _storage(f.type), f.nullable) for f in schema])
