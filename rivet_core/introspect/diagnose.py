"""`rivet check` diagnostics for one export: strategy, size, access path, verdict, types.

Verdicts, worst first (the first rule that fires decides):

- `unsafe`: the run will fail or hurt the source — a cursor, time or chunk column that is
  not a column of the query, a column without an Arrow mapping (the run stops before
  writing), a chunked export that cannot be planned, or chunk windows on a column without an
  index (every window is a full scan; ≥ 10 windows).
- `degraded`: it works but scans more than it should — incremental / time_window on a
  column without an index (each run scans the whole table to find new rows), a few
  unindexed chunk windows, or a full export of more than 10M rows.
- `acceptable`: works, with a caveat — lossy column overrides, a nullable cursor (rows with
  a NULL cursor are never exported), a full export of 1M–10M rows, or an access path the
  probe could not determine.
- `efficient`: the access column is indexed (or the table is small enough for a full
  snapshot) and every column maps exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from rivet_core.chunks.strategy import describe_chunking
from rivet_core.config.access_columns import require_access_columns
from rivet_core.config.models import ExportConfig
from rivet_core.errors import RivetError
from rivet_core.introspect.access import AccessProbe, probe_access
from rivet_core.introspect.estimate import estimate_rows_in
from rivet_core.introspect.fidelity import LOSSY, UNSUPPORTED, ColumnReport, column_reports
from rivet_core.introspect.table_report import TableReport, describe_table
from rivet_core.source.base import SourceSession
from rivet_core.source.batching import estimate_row_bytes

EFFICIENT, ACCEPTABLE, DEGRADED, UNSAFE = "efficient", "acceptable", "degraded", "unsafe"
FULL_ACCEPTABLE_ROWS = 1_000_000
FULL_DEGRADED_ROWS = 10_000_000
UNINDEXED_WINDOWS_UNSAFE = 10


@dataclass
class ExportDiagnosis:
    export_name: str
    mode: str
    strategy: str
    row_estimate: int | None = None
    row_width_bytes: float | None = None
    access_column: str | None = None
    indexed: bool | None = None  # catalog: an index leads with the access column
    access: AccessProbe | None = None  # EXPLAIN of the steady-state query
    verdict: str = EFFICIENT
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    columns: list[ColumnReport] = field(default_factory=list)
    error: str | None = None

    @property
    def type_problems(self) -> list[ColumnReport]:
        return [c for c in self.columns if c.fidelity in (LOSSY, UNSUPPORTED)]

    def to_dict(self, type_report: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "export_name": self.export_name, "mode": self.mode, "strategy": self.strategy,
            "row_estimate": self.row_estimate,
            "row_width_bytes": None if self.row_width_bytes is None else round(self.row_width_bytes, 1),
            "access": {"column": self.access_column, "indexed": self.indexed,
                       "index_used": self.access.index_used if self.access else None,
                       "explain": self.access.detail if self.access else None},
            "verdict": self.verdict, "reason": self.reason, "warnings": self.warnings,
            "error": self.error,
            "fidelity": {k: sum(1 for c in self.columns if c.fidelity == k)
                         for k in ("exact", LOSSY, UNSUPPORTED)},
        }
        if type_report:
            out["columns"] = [c.to_dict() for c in self.columns]
        return out


def diagnose_export(session: SourceSession, export: ExportConfig) -> ExportDiagnosis:
    """Diagnose one export on an open session; errors become an `unsafe` verdict."""
    diag = ExportDiagnosis(export.name, export.mode, export.mode)
    try:
        _diagnose(session, export, diag)
    except RivetError as exc:
        diag.error = exc.message
        diag.verdict, diag.reason = UNSAFE, exc.message.splitlines()[0]
    return diag


def _diagnose(session: SourceSession, export: ExportConfig, diag: ExportDiagnosis) -> None:
    overrides = export.column_overrides()
    report: TableReport | None = None
    if export.table_parts is not None:
        schema, name = export.table_parts
        report = describe_table(session, schema, name, overrides)
        diag.columns, diag.row_estimate = report.columns, report.row_estimate
        diag.row_width_bytes = report.avg_row_bytes
    else:
        probed = session.probe_columns(export.resolved_query)  # every column, unmappable too
        diag.columns = column_reports(session.dialect, probed, overrides)
        diag.row_estimate = estimate_rows_in(session, query=export.resolved_query)
    require_access_columns(export, [c.name for c in diag.columns])  # the run would stop here too
    if diag.row_width_bytes is None:
        mapped = [pa.field(c.name, c.arrow_type) for c in diag.columns if c.arrow_type is not None]
        diag.row_width_bytes = float(estimate_row_bytes(pa.schema(mapped)))
    diag.strategy, diag.access_column, windows = _strategy(session, export, diag)
    if diag.access_column:
        diag.indexed = report.is_indexed(diag.access_column) if report else None
        diag.access = probe_access(session, export.resolved_query, diag.access_column)
    diag.verdict, diag.reason = _verdict(export, diag, report, windows)


def _strategy(session: SourceSession, export: ExportConfig,
              diag: ExportDiagnosis) -> tuple[str, str | None, int | None]:
    """(strategy text, access column, estimated windows) — scan-free for chunked exports."""
    if export.mode == "incremental":
        return f"incremental on {export.cursor_column}", export.cursor_column, None
    if export.mode == "time_window":
        return (f"time_window on {export.time_column} (last {export.days_window} days)",
                export.time_column, None)
    if export.mode != "chunked":
        return "full", None, None
    shape = describe_chunking(session, export)  # the planner's resolution, without its probes
    strategy, column, size = shape.strategy, shape.column, shape.chunk_size
    diag.warnings.extend(shape.warnings)
    if strategy == "days":
        windows, shown = None, f"chunked days on {column}, {export.chunk_by_days} day(s) per window"
    elif strategy == "count":
        windows, shown = export.chunk_count, f"chunked count on {column}"
    else:
        windows = math.ceil(diag.row_estimate / size) if diag.row_estimate else None
        shown = f"chunked {strategy} on {column}, chunk_size {size:,}"
    if windows is not None:
        shown += f" (~{windows:,} window(s))"
    return shown, column, windows


def _verdict(export: ExportConfig, diag: ExportDiagnosis, report: TableReport | None,
             windows: int | None) -> tuple[str, str]:
    bad = [c for c in diag.columns if c.fidelity == UNSUPPORTED]
    if bad:
        names = ", ".join(f"{c.name} ({c.source_type})" for c in bad)
        return UNSAFE, (f"{len(bad)} column(s) have no Arrow mapping: {names} — the run fails "
                        "before writing; add `columns:` overrides or cast in the query")
    col = diag.access_column
    uses_index = diag.access.index_used if diag.access else None
    if uses_index is None and diag.indexed is not None:
        uses_index = diag.indexed
    if col and uses_index is False:
        if export.mode == "chunked":
            if (windows or 0) >= UNINDEXED_WINDOWS_UNSAFE:
                return UNSAFE, (f"chunk column '{col}' has no usable index: each of ~{windows:,} "
                                f"windows is a full table scan — CREATE INDEX on {col}")
            return DEGRADED, (f"chunk column '{col}' has no usable index: every window scans the "
                              f"table — CREATE INDEX on {col}")
        return DEGRADED, (f"'{col}' has no usable index: every run scans the whole table to find "
                          f"the rows it needs — CREATE INDEX on {col}")
    lossy = [c.name for c in diag.columns if c.fidelity == LOSSY]
    if lossy:
        return ACCEPTABLE, (f"lossy column(s) {', '.join(lossy)}: review the overrides "
                            "(`--type-report`)")
    cursor = report.column(col) if col and report is not None else None
    if export.mode == "incremental" and cursor is not None and report is not None \
            and cursor.name not in report.not_null:
        return ACCEPTABLE, f"cursor '{col}' is nullable: rows with a NULL cursor are never exported"
    if col and uses_index is None:
        return ACCEPTABLE, (diag.access.detail if diag.access else
                            f"could not tell whether '{col}' is indexed")
    rows = diag.row_estimate
    if export.mode == "full" and rows is not None and rows > FULL_DEGRADED_ROWS:
        return DEGRADED, (f"full export of ~{rows:,} rows: one long snapshot every run — use "
                          "mode: chunked (or incremental with an updated_at cursor)")
    if export.mode == "full" and rows is not None and rows > FULL_ACCEPTABLE_ROWS:
        return ACCEPTABLE, f"full export of ~{rows:,} rows: consider mode: chunked"
    if col:
        return EFFICIENT, f"'{col}' is indexed ({diag.access.detail if diag.access else 'catalog'})"
    return EFFICIENT, ("full snapshot of a small table" if rows is not None
                       else "full snapshot (row estimate unknown)")
