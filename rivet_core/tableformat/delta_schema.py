"""The Delta table's schema: built from the parts' Arrow schema, evolved by added columns.

A new source column reaches here only when the schema-drift policy let it through
(`on_schema_drift: fail` stops the run at the gate, before any part); it is added to the
table as a nullable column in a metadata commit before the data commit (a crash between
the two leaves a column with no rows, which the re-run's commit fills). A column whose type
changed cannot be held by both old and new files, so the run fails before its data commit.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from rivet_core.tableformat.errors import TableCommitError


def deltalake_schema(schema: pa.Schema) -> Any:
    from deltalake import Schema

    return Schema.from_arrow(pa.schema([f.with_nullable(True) for f in schema]))


def evolve_schema(table: Any, schema: pa.Schema, export_name: str, properties: Any) -> None:
    """Add `schema`'s new columns to `table`; refuse a changed type (module docstring)."""
    current = pa.schema(table.schema().to_arrow())
    wanted = pa.schema(deltalake_schema(schema).to_arrow())
    changed = [f"'{f.name}' {current.field(f.name).type} → {f.type}" for f in wanted
               if f.name in current.names and not current.field(f.name).type.equals(f.type)]
    if changed:
        raise TableCommitError(
            f"export '{export_name}': column type changed for the Delta table ({', '.join(changed)}) — "
            "pin the old type with `columns:`, or rebuild the table (`--full-refresh` after removing "
            "_delta_log/)")
    added = [f for f in deltalake_schema(schema).fields if f.name not in current.names]
    if added:
        table.alter.add_columns(added, commit_properties=properties)
