"""What the Dagster UI shows about an export: asset descriptions and event metadata.

Everything an operator reads in the UI is built here, so the wording, the redaction and
the metadata types stay the same across assets, chunk partitions, manifests and checks:

- `describe_export`: the asset description (mode, source, destination, schedule). It is
  built when the definitions load, from the config only (no connection, no env lookup of
  secrets), and every string passes through `redact_secrets`.
- `materialization_metadata` / `chunk_metadata` / `manifest_metadata`: standard keys
  (`dagster/row_count`, `dagster/column_schema`) so the UI renders them; plain numbers
  (`rows`, `bytes`, `parts`, `duration_s`, `rows_per_s`) typed with `MetadataValue.int` /
  `MetadataValue.float` so the asset's Plots tab charts them across materializations; a
  table of parts (file, rows, bytes, checksum); the run report as markdown.
- `verification_metadata`: the `manifest_verified` check's verdict, counts and a markdown
  table of failures (file, problem, expected, found) readable at a glance.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa

from rivet_core import api

MODE_LABELS = {"full": "full snapshot", "incremental": "incremental", "time_window": "time window",
               "chunked": "chunked"}
#: The parts table lists at most this many parts (a huge export has thousands); the
#: `parts` count is always exact and the manifest lists every part.
MAX_PART_ROWS = 500
QUERY_PREVIEW_CHARS = 200


# ------------------------------------------------------------------------------ description
def source_label(config: api.RivetConfig, export: api.ExportConfig) -> str:
    """`<engine> <where> · <table or query>`, without resolving any secret.

    `url_env` / `password_env` are shown by variable name (the value is never read here);
    an inline URL is redacted (`scheme://REDACTED@host`)."""
    src = config.source
    if src.url:
        where = f"`{api.redact_secrets(src.url)}`"
    elif src.url_env:
        where = f"URL from `${src.url_env}`"
    elif src.url_file:
        where = f"URL from file `{src.url_file}`"
    else:
        host = f"{src.host or 'localhost'}" + (f":{src.port}" if src.port else "")
        where = f"`{src.user + '@' if src.user else ''}{host}/{src.database or ''}`"
    if export.table:
        what = f"table `{export.table}`"
    elif export.query_file:
        what = f"query file `{export.query_file}`"
    else:
        sql = " ".join((export.query or "").split())
        if len(sql) > QUERY_PREVIEW_CHARS:
            sql = sql[:QUERY_PREVIEW_CHARS] + "…"
        what = f"query `{api.redact_secrets(sql)}`"
    return api.redact_secrets(f"{src.type} {where} · {what}")


def destination_label(config: api.RivetConfig, export: api.ExportConfig) -> str:
    """`<type> <url> · <format>[, <compression>]`, the endpoint redacted."""
    dest = export.destination
    if dest.type in ("s3", "gcs", "azure"):
        scheme = {"s3": "s3", "gcs": "gs", "azure": "az"}[dest.type]
        where = f"`{scheme}://{dest.bucket}/{dest.prefix or ''}`"
        if dest.endpoint:
            where += f" at `{dest.endpoint}`"
    elif dest.type == "local":
        path = Path(dest.local_path)
        where = f"`{path if path.is_absolute() else config.config_dir / path}`"
    else:
        where = ""
    codec, level = export.effective_compression()
    fmt = export.format + (f", {codec}" + (f" level {level}" if level is not None else "")
                           if codec != "none" else "")
    return api.redact_secrets(f"{dest.type} {where} · {fmt}".replace("  ", " "))


def schedule_label(config: api.RivetConfig, export: api.ExportConfig) -> str:
    """The cron expression and its default status (the export's, else the top-level
    `dagster.schedule_status`, else STOPPED — the rule automation.py applies), or `none`."""
    own = export.dagster
    if export.mode == "chunked":
        return "none (the planner sensor requests chunk windows)"
    if not (own and own.schedule):
        return "none"
    status = (own.schedule_status or (config.dagster.schedule_status if config.dagster else None)
              or "STOPPED")
    label = f"`{own.schedule}` ({status} by default)"
    if export.mode == "time_window":
        grain = (export.dagster.partitions if export.dagster and getattr(export.dagster, "partitions", None)
                 else "daily")
        unit = {"hourly": "hour", "daily": "day", "weekly": "week", "monthly": "month"}.get(grain, grain)
        label += f", re-exports the last {export.days_window or 1} complete {unit} partition(s) per tick"
    return label


def describe_export(config: api.RivetConfig, export: api.ExportConfig) -> str:
    """The asset description: the export's own description, then mode, source,
    destination and schedule (markdown; the UI renders it on the asset page)."""
    mode = MODE_LABELS.get(export.mode, export.mode)
    if export.mode == "time_window":
        grain = export.dagster.partitions if export.dagster and getattr(export.dagster, "partitions", None) else "daily"
        tz = export.dagster.timezone if export.dagster and export.dagster.timezone else "UTC"
        mode = f"{grain} {mode} ({tz})"
    lines = [export.description or f"Rivet export `{export.name}`.", "",
             f"- mode: {mode}"]
    if export.cursor_column:
        lines.append(f"- cursor: `{export.cursor_column}`")
    if export.time_column:
        lines.append(f"- time column: `{export.time_column}`")
    lines += [f"- source: {source_label(config, export)}",
              f"- destination: {destination_label(config, export)}",
              f"- schedule: {schedule_label(config, export)}"]
    return "\n".join(lines)


def chunk_unit(export: api.ExportConfig) -> str:
    """What one partition of a chunked export holds, in the user's words."""
    if export.chunk_by_days:
        return f"{export.chunk_by_days} day(s) of `{export.chunk_column}`"
    if export.chunk_by_key:
        return f"a range of `{export.chunk_by_key}`"
    return f"up to {export.chunk_size:,} values of `{export.chunk_column}`" if export.chunk_size else "a slice"


def describe_chunk_asset(config: api.RivetConfig, export: api.ExportConfig, planner: str) -> str:
    """The description of a chunked export's partitioned asset: what a partition is and what
    makes the export visible — no internal names (a partitions definition, an invariant)."""
    return describe_export(config, export) + (
        f"\n- partitions: one per chunk of the table ({chunk_unit(export)}), added as the table grows "
        f"by the `{planner}` sensor, which also requests their runs\n"
        "- resumable: a run that stops keeps the chunks it finished\n"
        f"- visible to readers once `{export.name}_manifest` has published every chunk")


def describe_manifest_asset(export: api.ExportConfig) -> str:
    """The description of a chunked export's `<export>_manifest` asset."""
    return (f"The published dataset of chunked export `{export.name}`: once every chunk of `{export.name}` "
            "is materialized, it writes manifest.json and _SUCCESS (with the run report and "
            "notification) — readers see the export from then on. Until then it fails, naming "
            "the chunks still missing.")


# ------------------------------------------------------------------------------ materializations
def column_schema(schema: pa.Schema) -> dg.TableSchema:
    return dg.TableSchema(columns=[
        dg.TableColumn(name=f.name, type=str(f.type),
                       description=(f.metadata or {}).get(b"rivet.native_type", b"").decode() or None)
        for f in schema])


PARTS_SCHEMA = dg.TableSchema(columns=[
    dg.TableColumn("file", "string"), dg.TableColumn("rows", "int"),
    dg.TableColumn("bytes", "int"), dg.TableColumn("checksum", "string")])


def part_checksum(part: Any) -> str:
    """The part's content fingerprint as recorded in the manifest (`xxh3:<hex>`), else its
    MD5 (`md5:<base64>`), else empty (a part rehydrated from the file log)."""
    if getattr(part, "content_fingerprint", ""):
        return part.content_fingerprint
    return f"md5:{part.content_md5}" if getattr(part, "content_md5", "") else ""


def parts_table(parts: Sequence[Any]) -> dg.TableMetadataValue:
    """file, rows, bytes, checksum per part (ManifestPart or PartRecord), capped at MAX_PART_ROWS."""
    return dg.MetadataValue.table(
        records=[dg.TableRecord({"file": p.path, "rows": int(p.rows), "bytes": int(p.size_bytes),
                                 "checksum": part_checksum(p)}) for p in parts[:MAX_PART_ROWS]],
        schema=PARTS_SCHEMA)


def numbers(rows: int, size_bytes: int, parts: int, duration_ms: int | None, *,
            partition: bool = False) -> dict[str, dg.MetadataValue]:
    """The plotted numbers. Typed explicitly: a Python int that happens to be a float
    elsewhere would otherwise become a different metadata type and break the plot.
    `rows` is what this materialization wrote; a partition reports it as
    `dagster/partition_row_count` (the asset's `dagster/row_count` is the dataset's size,
    which `standard_metadata` adds where it is known)."""
    meta: dict[str, dg.MetadataValue] = {
        "dagster/partition_row_count" if partition else "dagster/row_count": dg.MetadataValue.int(rows),
        "rows": dg.MetadataValue.int(rows),
        "bytes": dg.MetadataValue.int(size_bytes),
        "parts": dg.MetadataValue.int(parts),
    }
    if duration_ms is not None:
        seconds = max(duration_ms, 1) / 1000.0
        meta["duration_s"] = dg.MetadataValue.float(round(seconds, 3))
        meta["rows_per_s"] = dg.MetadataValue.float(round(rows / seconds, 1))
    return meta


def table_name(export: api.ExportConfig) -> str:
    """`dagster/table_name`: an Iceberg export's table as its catalog names it
    (`<catalog>.<namespace>.<table>`), else the export's name."""
    from rivet_dagster.naming import safe_name

    block = export.iceberg
    if export.table_format == "iceberg" and block is not None and block.namespace:
        return f"{block.catalog_name}.{block.namespace}.{block.table or export.name}"
    return safe_name(export.name)


def standard_metadata(config: api.RivetConfig, export: api.ExportConfig, uri: str,
                      schema: pa.Schema | None, dataset_rows: int | None = None) -> dict[str, Any]:
    """Dagster's standard keys for a materialization: `dagster/uri` (credentials redacted),
    `dagster/table_name`, `dagster/column_schema`, `dagster/column_lineage` (1:1 to the
    source table's columns) and, when known, `dagster/row_count` = the dataset's size."""
    from rivet_dagster.lineage import column_lineage, source_table_key

    meta: dict[str, Any] = {"dagster/uri": api.redact_secrets(uri), "dagster/table_name": table_name(export)}
    if schema is not None:
        meta["dagster/column_schema"] = column_schema(schema)
        lineage = column_lineage(source_table_key(config, export), schema.names)
        if lineage is not None:
            meta["dagster/column_lineage"] = lineage
    if dataset_rows is not None:
        meta["dagster/row_count"] = dg.MetadataValue.int(dataset_rows)
    return meta


def dataset_uri(summary: api.RunSummary) -> str:
    """`dagster/uri` of a run: a `table_format` export's table root — a time partition's
    parts are files of that one table (docs/adr/0009-table-formats.md), so its folder is not
    what a reader opens — else the run's destination prefix."""
    table = summary.table_commit
    if not table:
        return summary.destination_uri or ""
    uri = str(table["uri"])
    if "://" not in uri:  # a local table: delta-rs names it by its path
        uri = Path(uri).resolve().as_uri()
    return uri.rstrip("/") + "/"


def materialization_metadata(summary: api.RunSummary, schema: pa.Schema | None, *,
                             partition: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = numbers(summary.total_rows, summary.bytes_written, len(summary.manifest_parts),
                                   summary.duration_ms, partition=partition)
    meta.update({
        "destination": dg.MetadataValue.url(summary.destination_uri or ""),
        "status": summary.status,
        "rivet_run_id": summary.run_id,
        "parts_table": parts_table(summary.manifest_parts),
    })
    if schema is not None:
        meta["dagster/column_schema"] = column_schema(schema)
    meta.update(governor_metadata(summary.governor))
    if summary.table_commit:  # table_format exports: the table version this run published
        meta["table_format"] = str(summary.table_commit["format"])
        meta["table_version"] = dg.MetadataValue.int(int(summary.table_commit["version"]))
        meta["table_uri"] = dg.MetadataValue.url(str(summary.table_commit["uri"]))
        if summary.table_commit.get("snapshot_id") is not None:  # Iceberg: the snapshot readers see
            meta["table_snapshot_id"] = dg.MetadataValue.text(str(summary.table_commit["snapshot_id"]))
    if summary.cursor_column:
        meta["cursor_column"] = summary.cursor_column
        meta["cursor_low"] = summary.cursor_low or ""
        meta["cursor_high"] = summary.cursor_high or ""
    if summary.report_path and Path(summary.report_path).exists():
        meta["run_report"] = dg.MetadataValue.md(api.redact_secrets(Path(summary.report_path).read_text()))
        meta["run_report_path"] = dg.MetadataValue.path(summary.report_path)
    return meta


def governor_metadata(governor: dict[str, Any] | None) -> dict[str, dg.MetadataValue]:
    """The source governor's figures (rivet_core/pipeline/resources/governor.py), typed so the Plots
    tab charts them: seconds paused, pressure samples taken, the highest pressure seen."""
    if not governor:
        return {}
    return {"governor_mode": dg.MetadataValue.text(str(governor["mode"])),
            "throttled_s": dg.MetadataValue.float(float(governor["throttled_s"])),
            "pressure_samples": dg.MetadataValue.int(int(governor["samples"])),
            "pressure_max": dg.MetadataValue.float(float(governor["pressure_max"]))}


def chunk_metadata(run: api.ChunkWindowRun, results: list[Any], duration_ms: int | None = None) -> dict[str, Any]:
    """What every window of a chunk run's materializations shares: the run (its id, its
    windows, its duration and rate) and the export's standard keys. A window's own figures
    (rows, bytes, parts) are `window_metadata`: a ranged run materializes several partitions
    from one output, and the run's totals on each would overstate every window."""
    rows = sum(r.rows for r in results)
    windows = [c.window for c in run.claimed]
    meta: dict[str, Any] = {}
    if duration_ms is not None:
        seconds = max(duration_ms, 1) / 1000.0
        meta["duration_s"] = dg.MetadataValue.float(round(seconds, 3))
        meta["rows_per_s"] = dg.MetadataValue.float(round(rows / seconds, 1))  # the run's rate
    meta.update({
        "destination": dg.MetadataValue.url(run.dest.uri),
        "chunk_run_id": run.run_id,
        "rivet_run_id": run.run_id,
        "windows": dg.MetadataValue.md(
            "| partition | chunk | from | to | rows |\n|---|---:|---|---|---:|\n" + "\n".join(
                f"| `{w.key}` | {w.index} | {w.lo if w.lo is not None else '−∞'} | "
                f"{w.hi if w.hi is not None else '+∞'} | {r.rows} |" for w, r in zip(windows, results, strict=False))),
    })
    meta.update(standard_metadata(run.config, run.export, run.dest.uri, run.output_schema))
    return meta


def window_metadata(run: api.ChunkWindowRun) -> dict[str, dict[str, Any]]:
    """Per chunk partition key: what that window wrote — `dagster/partition_row_count`,
    rows, bytes, parts and its parts table — for the partition-scoped metadata of its
    materialization (a window without a result wrote nothing and gets no entry)."""
    out: dict[str, dict[str, Any]] = {}
    for claimed in run.claimed:
        result = claimed.result
        if result is None:
            continue
        records = list(result.records)
        meta: dict[str, Any] = numbers(result.rows, sum(rec.size_bytes for rec in records), len(records), None,
                                       partition=True)
        meta["parts_table"] = parts_table(records)
        out[claimed.window.key] = meta
    return out


def manifest_metadata(run: api.ChunkFinalizeRun, summary: api.RunSummary) -> dict[str, Any]:
    """`<export>_manifest`: the finalized run (same keys as an export) plus its window count."""
    meta = materialization_metadata(summary, run.output_schema)
    meta["chunk_windows"] = dg.MetadataValue.int(run.windows_total)
    meta["chunk_run_id"] = summary.run_id
    return meta


# ------------------------------------------------------------------------------ manifest check
def _cell(value: object) -> str:
    """A markdown table cell: redacted, pipes escaped, one line."""
    return api.redact_secrets(value).replace("|", "\\|").replace("\n", " ")


def failures_markdown(rows: Iterable[dict[str, Any]]) -> str:
    """| file | problem | expected | found | — one line per failure."""
    rows = list(rows)
    if not rows:
        return "No failures."
    lines = ["| file | problem | expected | found |", "|---|---|---|---|"]
    for r in rows:
        file = r.get("file") or "—"
        lines.append(f"| `{_cell(file)}` | {_cell(r['problem'])} | {_cell(r.get('expected', ''))} "
                     f"| {_cell(r.get('found', ''))} |")
    return "\n".join(lines)


def verdict_label(passed: bool, prefixes: int, failures: int) -> str:
    if not prefixes:
        return "NOTHING TO VERIFY"
    return "PASSED" if passed else f"FAILED ({failures} failure{'s' if failures != 1 else ''})"


def verification_metadata(*, passed: bool, prefixes: int, parts_verified: int, parts_md5_verified: int,
                          failures: list[dict[str, Any]], untracked: int) -> dict[str, Any]:
    """The check's metadata: the verdict first, then the counts, then the failure table."""
    return {
        "verdict": dg.MetadataValue.text(verdict_label(passed, prefixes, len(failures))),
        "prefixes_checked": dg.MetadataValue.int(prefixes),
        "parts_verified": dg.MetadataValue.int(parts_verified),
        "parts_md5_verified": dg.MetadataValue.int(parts_md5_verified),
        "failures": dg.MetadataValue.int(len(failures)),
        "untracked_objects": dg.MetadataValue.int(untracked),
        "failure_table": dg.MetadataValue.md(failures_markdown(failures)),
    }
