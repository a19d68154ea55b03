"""Which Arrow types a Delta or an Iceberg table can hold, checked before anything is written.

Delta's types (the protocol's primitive, array, map and struct types) are narrower than
Arrow's: no unsigned integers, no time of day, no fixed-size binary (a uuid), decimals up
to precision 38, timestamps in microseconds. Iceberg's (format v2) hold a uuid, a time of
day and fixed-size binary, but no unsigned integers, no JSON (a JSON-annotated Parquet
column is not an Iceberg `string`: pyiceberg refuses to read such a file), decimals up to
precision 38, timestamps and times in microseconds. A column outside the format's set is
refused at the schema gate — before the first part is written — with the `columns:`
override that makes it fit, so a run never writes parts it cannot commit
(docs/adr/0009-table-formats.md).
"""

from __future__ import annotations

from typing import Any

from rivet_core.errors import ConfigError
from rivet_core.lazy_modules import pa


def _storage(t: pa.DataType) -> pa.DataType:
    return t.storage_type if isinstance(t, pa.ExtensionType) else t


#: The format's name as the messages say it.
_NAMES = {"delta": "Delta", "iceberg": "Iceberg"}


def _format_specific(t: pa.DataType, fmt: str) -> tuple[bool, str | None]:
    """(decided, problem) for the types the two formats treat differently."""
    name = getattr(t, "extension_name", None)
    storage = t.storage_type if isinstance(t, pa.BaseExtensionType) else t
    if fmt == "iceberg":
        if name == "arrow.uuid":
            return True, None  # Iceberg `uuid`
        if name == "arrow.json":
            return True, ("JSON (Iceberg v2 has no JSON type, and a JSON-annotated Parquet column is not "
                          "readable as its `string`) — override it: `text`")
        if pa.types.is_time(storage):
            ok = pa.types.is_time64(storage) and storage.unit == "us"
            return True, None if ok else f"a time in {storage.unit} (Iceberg stores microseconds) — override it: `text`"
        if pa.types.is_fixed_size_binary(storage):
            return True, None  # Iceberg `fixed(L)`
        return False, None
    if name == "arrow.uuid":
        return True, "a uuid (Delta has no uuid or fixed-size binary type) — override it: `text`"
    if name == "arrow.json":
        return True, None  # a JSON string: Delta `string`
    if pa.types.is_time(storage):
        return True, "a time of day (Delta has none) — override it: `text`"
    if pa.types.is_fixed_size_binary(storage):
        return True, "fixed-size binary (Delta has none) — override it: `binary`"
    return False, None


def _problem(t: pa.DataType, fmt: str = "delta") -> str | None:
    """Why `t` cannot be a column of a `fmt` table and the override that fixes it; None when
    it can."""
    decided, problem = _format_specific(t, fmt)
    if decided:
        return problem
    label = _NAMES.get(fmt, fmt)
    t = _storage(t)
    if pa.types.is_unsigned_integer(t):
        return f"an unsigned integer ({label} has none) — override it: `bigint`, or `decimal(20,0)` for uint64"
    if pa.types.is_decimal(t) and t.precision > 38:
        return f"decimal({t.precision},{t.scale}) ({label}'s decimals hold precision 38 at most) — " \
               f"override it: `decimal(38,{min(t.scale, 38)})` if the values fit, else `text`"
    if pa.types.is_timestamp(t) and t.unit != "us":
        return (f"a timestamp in {t.unit} ({label} stores microseconds) — override it: "
                f"`{'timestamp_tz' if t.tz else 'timestamp'}`")
    if pa.types.is_duration(t) or pa.types.is_interval(t):
        return f"a duration/interval ({label} has none) — override it: `text`"
    if pa.types.is_null(t):
        return f"always NULL with no type ({label} needs one) — override it, e.g. `text`"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        inner = _problem(t.value_type, fmt)
        return None if inner is None else f"an array of {inner}"
    if pa.types.is_struct(t):
        for field in t:
            inner = _problem(field.type, fmt)
            if inner is not None:
                return f"a struct whose field '{field.name}' is {inner}"
        return None
    if pa.types.is_map(t):
        return _problem(t.key_type, fmt) or _problem(t.item_type, fmt)
    return None


def table_type_errors(schema: pa.Schema, table_format: str) -> list[str]:
    """One line per column `table_format` cannot hold, naming the column and its override."""
    return [f"column '{f.name}' is {problem} under `columns:`"
            for f in schema if (problem := _problem(f.type, table_format)) is not None]


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
