"""What a table commit hands back: the `table` block the manifest records (one shape for
Delta and Iceberg, so the committers and the dispatcher in commit.py share it without
importing each other)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TableCommit:
    """What the manifest records about the commit (its `table` block)."""

    format: str
    uri: str
    #: Delta: the table version; Iceberg: the current snapshot's sequence number.
    version: int
    operation: str
    #: Files the table's new version holds, and the rows they hold (its add actions).
    files: int
    rows: int
    #: Iceberg: the current snapshot, the catalog's `namespace.table` and name, and the
    #: metadata file the catalog points at after the commit.
    snapshot_id: int | None = None
    name: str | None = None
    catalog: str | None = None
    metadata_location: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": self.format, "uri": self.uri, "version": self.version,
                               "operation": self.operation, "files": self.files, "rows": self.rows}
        for key in ("snapshot_id", "name", "catalog", "metadata_location"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


__all__ = ["TableCommit"]
