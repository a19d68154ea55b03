"""Lineage: the source tables as assets, so the graph reads database table → export → yours.

Each export of a `table:` depends on an `AssetSpec` of that table, keyed
`[<engine>, <database>, <schema>, <table>]` (`[<engine>, <database>, <table>]` where the
engine has no schemas apart from the database: MySQL/MariaDB, SQLite) — the engine first so
a source table never takes the key of an export (`shop/customers` exporting
`postgres/shop/public/customers`; a `type: sqlalchemy` source's engine is its dialect,
`duckdb/shop/main/customers`: `naming.source_kind`) — with kind = the engine and
`dagster/table_name` = the qualified name. The spec is built from those names only, so two
configs (or two component instances) that read the same table produce equal specs, which
`dg.Definitions.merge` accepts. Exports of a `query:` have no single source table and no
source asset.

Column lineage is 1:1: every exported column comes from the source column of the same
name (rivet never renames or derives columns, apart from its optional meta columns, which
have no source column).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import dagster as dg

from rivet_core import api
from rivet_dagster.naming import safe_name, source_kind, source_name

#: The schema PostgreSQL resolves an unqualified table name to (the default search_path).
_PG_DEFAULT_SCHEMA = "public"


def source_table(config: api.RivetConfig, export: api.ExportConfig) -> tuple[str | None, str] | None:
    """(schema, table) the export reads, with PostgreSQL's default schema filled in; None
    for a query export. MySQL and SQLite have no schema level below the database."""
    parts = export.table_parts
    if parts is None:
        return None
    schema, table = parts
    if config.source.type == "postgres":
        return schema or _PG_DEFAULT_SCHEMA, table
    return None, table


def source_table_key(config: api.RivetConfig, export: api.ExportConfig,
                     prefix: Sequence[str] = ()) -> dg.AssetKey | None:
    """`[*prefix, <engine>, <database>, <schema>, <table>]`, or None for a query export."""
    found = source_table(config, export)
    if found is None:
        return None
    schema, table = found
    return dg.AssetKey([*prefix, source_kind(config), source_name(config), *([schema] if schema else []), table])


def qualified_table_name(config: api.RivetConfig, export: api.ExportConfig) -> str | None:
    """`<database>.<schema>.<table>` (or `<database>.<table>`), the `dagster/table_name` of the
    source table asset."""
    found = source_table(config, export)
    if found is None:
        return None
    schema, table = found
    return ".".join([source_name(config), *([schema] if schema else []), table])


def source_table_specs(config: api.RivetConfig, exports: Iterable[api.ExportConfig],
                       prefix: Sequence[str] = ()) -> list[dg.AssetSpec]:
    """One spec per distinct source table of `exports` (see the module docstring)."""
    specs: dict[dg.AssetKey, dg.AssetSpec] = {}
    for export in exports:
        key = source_table_key(config, export, prefix)
        if key is None or key in specs:
            continue
        name = qualified_table_name(config, export)
        specs[key] = dg.AssetSpec(
            key, description=f"Source table `{name}` ({source_kind(config)}), read by rivet exports.",
            group_name=f"{safe_name(source_name(config))}_source", kinds={source_kind(config)},
            metadata={"dagster/table_name": name})
    return list(specs.values())


#: rivet's meta columns (`_rivet_exported_at`, `_rivet_row_hash`) are added by the writer.
META_COLUMN_PREFIX = "_rivet_"


def column_lineage(source_key: dg.AssetKey | None, columns: Iterable[str]) -> dg.TableColumnLineage | None:
    """`dagster/column_lineage`: each exported column from the source column of the same
    name; rivet's meta columns have no source column."""
    if source_key is None:
        return None
    return dg.TableColumnLineage(deps_by_column={
        name: [dg.TableColumnDep(asset_key=source_key, column_name=name)]
        for name in columns if not name.startswith(META_COLUMN_PREFIX)})
