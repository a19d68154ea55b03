"""The type names `rivet check` shows in Rivet's vocabulary (docs/rivet-compat.md "Rivet's CLI
matrix"): the Arrow type as Rust's arrow crate spells it (`Int32`, `Utf8`,
`Timestamp(Microsecond, Some("UTC"))`), which Rivet users grep for, and a PostgreSQL source
type by its catalog name (`int4`, `timestamptz`) rather than its SQL spelling (`integer`).
pyarrow's own spelling stays in the JSON as `rivet_type`.
"""

from __future__ import annotations

from typing import Any

#: PostgreSQL's SQL spellings (format_type) → catalog names (pg_type.typname).
_PG_NAMES = {
    "smallint": "int2", "integer": "int4", "bigint": "int8", "real": "float4", "double precision": "float8",
    "boolean": "bool", "character varying": "varchar", "character": "bpchar",
    "timestamp without time zone": "timestamp", "timestamp with time zone": "timestamptz",
    "time without time zone": "time", "time with time zone": "timetz",
}
#: Engines whose type names Rivet shows as their catalog names (the others: unchanged).
_CATALOG_NAMES: dict[str, dict[str, str]] = {"postgres": _PG_NAMES}


def arrow_rs_name(arrow_type: Any) -> str:
    """`arrow_type` (a pyarrow DataType, or None) as the Rust arrow crate prints it — the
    manifest's rendering (`manifest.model.rust_arrow_type_name`), except that an extension
    type shows its own name and a list its element type only (`List(Int32)`), as Rivet's
    `check` prints them."""
    import pyarrow as pa

    from rivet_core.manifest.model import rust_arrow_type_name

    if arrow_type is None:
        return "-"
    if isinstance(arrow_type, pa.BaseExtensionType):
        return arrow_type.extension_name
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        kind = "LargeList" if pa.types.is_large_list(arrow_type) else "List"
        return f"{kind}({arrow_rs_name(arrow_type.value_type)})"
    return rust_arrow_type_name(arrow_type)


def source_type_name(engine: str, native_type: str) -> str:
    """The source type as Rivet names it: PostgreSQL's catalog name, others unchanged."""
    catalog_names = _CATALOG_NAMES.get(engine)
    if catalog_names is None:
        return native_type
    base, _, rest = native_type.partition("(")
    name = catalog_names.get(base.strip(), base.strip())
    if name in ("varchar", "bpchar", "numeric") and rest:
        return f"{name}({rest}"
    if native_type.endswith("[]"):
        return "_" + _PG_NAMES.get(native_type[:-2], native_type[:-2])
    return name


#: `--target` names Rivet accepts (aliases included) → the canonical name.
TARGETS = {"bigquery": "bigquery", "bq": "bigquery", "duckdb": "duckdb", "duck": "duckdb"}


def target_type(target: str, arrow_type: Any) -> tuple[str, str]:
    """(native type, status `ok`/`warn`/`fail`) of a column's Arrow type in `target`, for the
    Parquet this project writes. The types follow Rivet's target tables for BigQuery and
    DuckDB; a type with no safe native form is `warn` with the nearest one."""
    import pyarrow as pa

    if arrow_type is None:
        return "-", "fail"
    bq = target == "bigquery"
    if isinstance(arrow_type, pa.BaseExtensionType):
        name = arrow_type.extension_name
        if name == "arrow.uuid":
            return ("STRING", "warn") if bq else ("UUID", "ok")
        if name == "arrow.json":
            return ("JSON", "warn") if bq else ("JSON", "ok")
        arrow_type = arrow_type.storage_type
    t = pa.types
    if t.is_boolean(arrow_type):
        return ("BOOL" if bq else "BOOLEAN"), "ok"
    if t.is_integer(arrow_type):
        if bq:
            return ("NUMERIC", "warn") if arrow_type == pa.uint64() else ("INT64", "ok")
        duck = {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"}[arrow_type.bit_width]
        return (duck if t.is_signed_integer(arrow_type) else f"U{duck}"), "ok"
    if t.is_floating(arrow_type):
        return ("FLOAT64" if bq else ("FLOAT" if arrow_type.bit_width == 32 else "DOUBLE")), "ok"
    if t.is_decimal(arrow_type):
        p, s = arrow_type.precision, arrow_type.scale
        if not bq:
            return (f"DECIMAL({p}, {s})", "ok") if p <= 38 else ("DOUBLE", "warn")
        if p - s <= 29 and s <= 9:
            return "NUMERIC", "ok"
        return ("BIGNUMERIC", "ok") if p <= 76 and s <= 38 else ("STRING", "warn")
    if t.is_string(arrow_type) or t.is_large_string(arrow_type):
        return ("STRING" if bq else "VARCHAR"), "ok"
    if t.is_binary(arrow_type) or t.is_large_binary(arrow_type) or t.is_fixed_size_binary(arrow_type):
        return ("BYTES" if bq else "BLOB"), "ok"
    if t.is_date(arrow_type):
        return "DATE", "ok"
    if t.is_time(arrow_type):
        return "TIME", "ok"
    if t.is_timestamp(arrow_type):
        if bq:
            return ("TIMESTAMP", "ok") if arrow_type.tz else ("DATETIME", "warn")
        return ("TIMESTAMPTZ" if arrow_type.tz else "TIMESTAMP"), "ok"
    if t.is_duration(arrow_type):
        return ("INT64", "warn") if bq else ("INTERVAL", "ok")
    if t.is_list(arrow_type) or t.is_large_list(arrow_type):
        inner, status = target_type(target, arrow_type.value_type)
        return (f"ARRAY<{inner}>" if bq else f"{inner}[]"), status
    return "-", "fail"
