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


def chunk_metadata(run: api.ChunkPartitionRun, results: list[Any]) -> dict[str, Any]:
    """A chunk partition's materialization: its window(s), rows, parts, and the chunk run."""
    rows = sum(r.rows for r in results)
    records = [rec for r in results for rec in r.records]
    windows = [c.window for c in run.claimed]
    meta: dict[str, Any] = {
        "dagster/row_count": rows,
        "destination": dg.MetadataValue.url(run.dest.uri),
        "parts": len(records),
        "bytes_written": sum(rec.size_bytes for rec in records),
        "chunk_run_id": run.run_id,
        "rivet_run_id": run.run_id,
        "windows": dg.MetadataValue.md(
            "| partition | chunk | from | to | rows |\n|---|---:|---|---|---:|\n" + "\n".join(
                f"| `{w.key}` | {w.index} | {w.lo if w.lo is not None else '−∞'} | "
                f"{w.hi if w.hi is not None else '+∞'} | {r.rows} |" for w, r in zip(windows, results, strict=False))),
        "dagster/column_schema": column_schema(run.output_schema),
    }
    if records:
        meta["parts_table"] = dg.MetadataValue.md(
            "| path | rows | bytes |\n|---|---:|---:|\n"
            + "\n".join(f"| `{rec.path}` | {rec.rows} | {rec.size_bytes} |" for rec in records))
    return meta


def manifest_metadata(run: api.ChunkManifestRun, summary: api.RunSummary) -> dict[str, Any]:
    """`<export>_manifest`: the finalized run (same keys as an export) plus its window count."""
    meta = materialization_metadata(summary, run.output_schema)
    meta["chunk_windows"] = run.windows_total
    meta["chunk_run_id"] = summary.run_id
    return meta
