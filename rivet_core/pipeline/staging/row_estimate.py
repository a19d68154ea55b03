"""The row estimate behind a run's progress ETA, asked once on the run's own session.

The progress display (rivet_core/reporting/progress.py) opens no connection: the runner that opened
the source for the export (extract.py for a whole-table run, chunked/planning.py when it plans the
windows) asks the estimator on that session and hands the figure to the tracker.
"""

from __future__ import annotations

import logging

from rivet_core.config import ExportConfig
from rivet_core.errors import best_effort
from rivet_core.introspect.estimate import estimate_rows_in
from rivet_core.reporting.progress import ProgressTracker
from rivet_core.source.base import SourceSession

log = logging.getLogger("rivet.progress")


def export_row_estimate(session: SourceSession, export: ExportConfig) -> int | None:
    """About how many rows the export reads (catalog statistics, the planner's estimate, or a
    bounded count; rivet_core/introspect/estimate.py); None when unknown, never an error: an
    estimate is optional and the run reports real errors itself."""
    # An estimate is optional and the run reports real errors: DEBUG, not a warning per run.
    with best_effort(f"row estimate for export '{export.name}'", logger=log, level=logging.DEBUG):
        if export.table and not export.query:
            return estimate_rows_in(session, table=export.table)
        return estimate_rows_in(session, query=export.resolved_query)
    return None


def estimate_for_progress(session: SourceSession, export: ExportConfig, progress: ProgressTracker | None) -> None:
    """Hand the export's row estimate to `progress` when it wants one (a whole-table run)."""
    if progress is not None and progress.wants_estimate:
        progress.set_expected_rows(export_row_estimate(session, export))
