"""Read an export's Delta table back (an integration's downstream loader, examples).

The current version, or — for a time partition — the current version's files under the
partition's `<col>=<key>/`: the rows a reader of the table sees for that window.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads

from rivet_core.destination import Destination


def read_table_format(dest: Destination, sub_prefix: str = "", export: Any = None) -> tuple[pa.Table, int] | None:
    """The one entry point (api.read_table): an Iceberg export's table through its catalog
    (iceberg_read.py; `export` names the catalog), else the Delta table at the prefix."""
    if export is not None and getattr(export, "table_format", None) == "iceberg":
        from rivet_core.tableformat.iceberg_read import read_iceberg

        return read_iceberg(dest, export, sub_prefix)
    return read_delta(dest, sub_prefix)


def read_delta(dest: Destination, sub_prefix: str = "") -> tuple[pa.Table, int] | None:
    """(rows, table version) of the table whose root is `dest`'s prefix minus `sub_prefix`;
    None when there is no table yet."""
    from deltalake import DeltaTable

    from rivet_core.tableformat.delta_log import delta_log, is_log_copy
    from rivet_core.tableformat.location import location_of, part_filesystem

    loc = location_of(dest, sub_prefix)
    with delta_log(loc) as log:  # a GCS table: a local copy of its log, data files in the bucket
        if not DeltaTable.is_deltatable(log.uri, storage_options=log.storage_options):
            return None
        table = DeltaTable(log.uri, storage_options=log.storage_options)
        version = int(table.version())
        if not sub_prefix and not is_log_copy(loc):
            return table.to_pyarrow_table(), version
        schema = pa.schema(table.schema().to_arrow())
        paths = pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()
    fs, root = part_filesystem(loc)
    mine = [f"{root}/{p}" for p in paths if p.startswith(sub_prefix)]
    if not mine:
        return schema.empty_table(), version
    return pads.dataset(mine, schema=schema, filesystem=fs, format="parquet").to_table(), version
