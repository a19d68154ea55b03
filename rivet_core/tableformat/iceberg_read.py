"""Read an export's Iceberg table back (an integration's downstream loader, examples).

The catalog's current snapshot, or — for a time partition — that snapshot's data files
under the partition's `<col>=<key>/`: the rows a reader of the table sees for that window
(read.py does the same for Delta).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from rivet_core.destination import Destination


def read_iceberg(dest: Destination, export: Any, sub_prefix: str = "") -> tuple[pa.Table, int] | None:
    """(rows, snapshot sequence number) of the export's table, whose root is `dest`'s prefix
    minus `sub_prefix`; None when the catalog has no such table yet."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    from rivet_core.tableformat.iceberg_catalog import identifier, location_uri, open_catalog
    from rivet_core.tableformat.location import location_of

    loc = location_of(dest, sub_prefix)
    with open_catalog(export, loc) as catalog:
        try:
            table = catalog.load_table(identifier(export))
        except (NoSuchTableError, NoSuchNamespaceError):
            return None
        snapshot = table.current_snapshot()
        version = int(snapshot.sequence_number) if snapshot is not None else 0
        if not sub_prefix:
            return table.scan().to_arrow(), version
        base = f"{location_uri(loc)}/{sub_prefix}"
        tasks = [t for t in table.scan().plan_files() if t.file.file_path.startswith(base)]
        scan = ArrowScan(table_metadata=table.metadata, io=table.io, projected_schema=table.schema(),
                         row_filter=AlwaysTrue())
        return scan.to_table(tasks), version
