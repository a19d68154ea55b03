"""`rivet run --reconcile`: the source row count, taken inside the export's own snapshot.

Rivet runs `SELECT COUNT(*) FROM (<base_query>) AS _rivet_reconcile` after the export, on a
new connection, and skips incremental and time-window exports (their slice of the table is
gone by then). We count the unit's *own* query — the same WHERE (cursor range, time window),
the same parameters — on the *same* session, right after the stream was drained: the read
is one snapshot (PostgreSQL REPEATABLE READ, MySQL/MariaDB a consistent-snapshot
transaction, SQLite a read transaction; rivet_core/source/base.py), so a row committed
while the export ran is in neither the rows nor the count, and a difference is a real one
(a reader that lost or repeated rows, a query whose result is not a function of the
snapshot).

The verdict is a gate, not a remark: `reconcile_gate` runs before any part is published,
and a mismatch raises `DataIntegrityError` (exit 3) — the run fails with nothing at the
destination, no `manifest.json`, no `_SUCCESS`, and the cursor where it was. Either way
the count is recorded: `summary.source_row_count` / `summary.reconciled` become the
manifest's `source.extraction.source_row_count` (successful runs), the metrics row's
`source_count` / `reconciled`, the journal's `ReconciliationResult` and the run report.

Chunked exports read each window in its own session: each window is counted in its own
snapshot (chunk_commit.stage_window) and a window that differs fails before its parts are
written; the run records the sum when this process counted every committed row (a resume
that kept an earlier process's windows records none — `rivet reconcile` checks those).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rivet_core.errors import DataIntegrityError
from rivet_core.runrecord.summary import RunSummary
from rivet_core.source.base import SourceSession, strip_sql


class ReconcileMismatch(DataIntegrityError):
    """The rows written differ from the source count in the export's snapshot (exit 3)."""

    code = "RIVET_RECONCILE_MISMATCH"


def count_sql(sql: str) -> str:
    """The COUNT(*) of a unit's query, wrapped as a subquery (Rivet's alias)."""
    return f"SELECT COUNT(*) FROM ({strip_sql(sql)}) AS _rivet_reconcile"


def count_in_snapshot(session: SourceSession, sql: str, params: Sequence[Any]) -> int:
    """COUNT(*) of `sql` on an open session (its snapshot)."""
    value = session.scalar(count_sql(sql), list(params))
    return int(value or 0)


def reconcile_gate(summary: RunSummary, source_count: int | None, rows_written: int) -> None:
    """Record the verdict (summary, journal) and raise `ReconcileMismatch` on a difference.
    `source_count` None (not taken) records nothing."""
    if source_count is None:
        return
    matched = source_count == rows_written
    summary.source_row_count = source_count
    summary.reconcile_counted_rows = rows_written
    summary.reconciled = matched
    summary.journal.record("ReconciliationResult", source_count=source_count, exported_rows=rows_written,
                           matched=matched)
    if not matched:
        raise ReconcileMismatch(
            f"export '{summary.export_name}': reconcile mismatch — the source holds {source_count} row(s) for "
            f"this export's query in the export's own snapshot, {rows_written} were written "
            f"(diff {rows_written - source_count:+d}); nothing was published and the cursor did not move")


__all__ = ["ReconcileMismatch", "count_in_snapshot", "count_sql", "reconcile_gate"]
