"""Open table formats: an export's Parquet parts committed as a Delta Lake table.

`table_format: delta` (docs/adr/0009-table-formats.md) turns the run's verified parts into
one table commit. The commit is a step of the finalize facade (rivet_core/pipeline/facade/finalize.py):
parts written and verified (docs/invariants.md I1/I2) → **table commit** → manifest.json
(which records the table version) → _SUCCESS → cursor. This package holds the format code
so the facade only calls `commit_table`; nothing here writes our manifest or the state store.
"""

from __future__ import annotations

from rivet_core.tableformat.commit import TableCommit, commit_table
from rivet_core.tableformat.types import refuse_unholdable, table_type_errors

__all__ = ["TableCommit", "commit_table", "refuse_unholdable", "table_type_errors"]
