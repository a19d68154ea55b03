"""Materialization metadata: what an operator needs without opening a terminal.

Standard keys (`dagster/row_count`, `dagster/column_schema`) so the UI renders and plots
them; plain numbers (bytes, parts, duration, rows/s) so trends plot across
materializations; the destination, cursor range, both run ids and the run report as
markdown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa

from rivet_core import api


def column_schema(schema: pa.Schema) -> dg.TableSchema:
    return dg.TableSchema(columns=[
        dg.TableColumn(name=f.name, type=str(f.type),
                       description=(f.metadata or {}).get(b"rivet.native_type", b"").decode() or None)
        for f in schema])


def materialization_metadata(summary: api.RunSummary, schema: pa.Schema | None) -> dict[str, Any]:
    seconds = max(summary.duration_ms, 1) / 1000.0
    meta: dict[str, Any] = {
        "dagster/row_count": summary.total_rows,
        "destination": dg.MetadataValue.url(summary.destination_uri or ""),
        "parts": len(summary.manifest_parts),
        "bytes_written": summary.bytes_written,
        "duration_ms": summary.duration_ms,
        "rows_per_second": round(summary.total_rows / seconds, 1),
        "status": summary.status,
        "rivet_run_id": summary.run_id,
    }
    if schema is not None:
        meta["dagster/column_schema"] = column_schema(schema)
    if summary.cursor_column:
        meta["cursor_column"] = summary.cursor_column
        meta["cursor_low"] = summary.cursor_low or ""
        meta["cursor_high"] = summary.cursor_high or ""
    if summary.manifest_parts:
        meta["parts_table"] = dg.MetadataValue.md(
            "| path | rows | bytes |\n|---|---:|---:|\n"
            + "\n".join(f"| `{p.path}` | {p.rows} | {p.size_bytes} |" for p in summary.manifest_parts))
    if summary.report_path and Path(summary.report_path).exists():
        meta["run_report"] = dg.MetadataValue.md(Path(summary.report_path).read_text())
        meta["run_report_path"] = dg.MetadataValue.path(summary.report_path)
    return meta
