"""The table step of a verification, handed to `verify_at_destination` (rivet_core/manifest/verify.py).

Verifying a published prefix is one verb whatever its layout, but the Delta and Iceberg
readers live in rivet_core/tableformat/, a layer above the manifest package: the callers
(`rivet validate`, the API, the finalize's own validation) pass this function in, and it
imports the table code only when a manifest names a table — a plain Parquet/CSV
verification (and `rivet run`'s start-up) never loads it.
"""

from __future__ import annotations

from typing import Any

from rivet_core.destination import Destination, ObjectInfo
from rivet_core.manifest.model import Manifest


def check_table(dest: Destination, manifest: Manifest, listing: list[ObjectInfo] | None, export: Any,
                depth: str) -> tuple[list[tuple[str, dict[str, Any]]], set[str]]:
    """rivet_core/tableformat/verify.py `check_table`, imported on call."""
    from rivet_core.tableformat.verify import check_table as check

    return check(dest, manifest, listing, export, depth)
