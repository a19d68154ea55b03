"""Load-time rules of `partition_by` (reference catalogue #36, Rivet's messages).

A `partition_by` export is split at run time into one sub-export per date bucket
(rivet_core/pipeline/buckets/run.py); these rules reject, before anything runs, the
combinations that cannot work: an empty or path-unsafe column name (it names the Hive
folder `<col>=<value>`), `mode: time_window` / `cdc`, `chunk_by_key`, `merge_on` (each
bucket is its own table, so a row whose date moves it to another bucket would stay in its
old bucket's table: no table could keep one row per key), `table_format: iceberg` with a
replacing mode (a bucket the source emptied could be neither withdrawn nor emptied) or
with `iceberg.table` (every bucket would name one table), a destination without a
`{partition}` token (every bucket would overwrite one prefix), and the token where no
partition is configured.
"""

from __future__ import annotations

from rivet_core.config.models import ExportConfig

TOKEN = "{partition}"


def _token_fields(exp: ExportConfig) -> list[str]:
    dest = exp.destination
    return [f for f in ("path", "prefix") if TOKEN in (getattr(dest, f) or "")]


def _whole_segment(text: str) -> bool:
    """Every `{partition}` in `text` stands alone between `/` (or an end)."""
    return all(part == TOKEN or TOKEN not in part for part in text.split("/"))


def partition_errors(exp: ExportConfig, label: str) -> list[str]:
    """Every `partition_by` problem of one export (module docstring)."""
    column = exp.partition_by
    fields = _token_fields(exp)
    if column is None:
        return [f"{label}: destination.{f} has the '{TOKEN}' token but partition_by is not set — "
                "add partition_by: <date or timestamp column>, or remove the token" for f in fields]
    if not column.strip():
        return [f"{label}: partition_by must name a column (a date or timestamp column)"]
    errors: list[str] = []
    if (column.startswith(".") or any(c in column for c in "/\\=\x00") or ".." in column
            or column != column.strip()):
        shown = column.replace("\x00", "\\0")
        errors.append(f"{label}: partition_by '{shown}' is not filename-safe — it names each partition's "
                      "folder '<column>=<value>'; use a column without '/', '\\', '=', '..', NUL, "
                      "a leading '.' or surrounding spaces (alias it in the query)")
    if exp.mode in ("time_window", "cdc"):
        errors.append(f"{label}: partition_by is not compatible with `mode: {exp.mode}` — partition a "
                      "full, incremental or chunked export instead")
    if exp.chunk_by_key is not None:
        errors.append(f"{label}: partition_by is not compatible with chunk_by_key — keyset requires the "
                      "`table:` shortcut, but partitioning rewrites the query; use a range chunk_column, "
                      "a smaller partition_granularity, or mode: full")
    elif (exp.mode == "chunked" and exp.chunk_column is None and exp.chunk_count is None
          and not exp.chunk_dense and exp.chunk_by_days is None):
        errors.append(f"{label}: partition_by with mode: chunked needs chunk_column — each partition is a "
                      "query over the table, so its primary key cannot be auto-resolved; name the "
                      "chunk_column (e.g. chunk_column: id)")
    if exp.merge_on:
        errors.append(f"{label}: partition_by is not compatible with merge_on — each bucket is its own table, "
                      f"so a row whose '{column}' moves it to another bucket would be merged into the new "
                      "bucket's table and stay in its old one (two rows for one key); drop partition_by (a "
                      "Delta or Iceberg reader prunes by the column's statistics), or drop merge_on and read "
                      "the newest row per key yourself")
    if exp.table_format == "iceberg" and exp.mode in ("full", "chunked"):
        errors.append(f"{label}: partition_by with table_format: iceberg is not supported for mode: {exp.mode} — "
                      "each bucket is its own table in the catalog, and a bucket whose rows all left the source "
                      "could be neither withdrawn (the catalog names its metadata) nor emptied (a run over no row "
                      "commits nothing), so it would stay readable with stale rows; use table_format: delta (a "
                      "withdrawn Delta bucket moves with its _delta_log/) or mode: incremental")
    if exp.table_format == "iceberg" and exp.iceberg is not None and exp.iceberg.table:
        errors.append(f"{label}: partition_by cannot be combined with iceberg.table — each bucket is its own table "
                      f"'<namespace>.{exp.name}__<label>'; remove iceberg.table")
    if exp.mode == "chunked" and exp.chunk_size_memory_mb is not None:
        errors.append(f"{label}: partition_by is not compatible with chunk_size_memory_mb — it needs the "
                      "`table:` shortcut, and each partition is a query; set chunk_size instead")
    if exp.destination.type == "stdout":
        errors.append(f"{label}: partition_by cannot write to stdout — each partition is its own prefix "
                      "with its own manifest; write to local, s3, gcs or azure")
    elif not fields:
        errors.append(f"{label}: partition_by requires a '{TOKEN}' token in destination.path or "
                      "destination.prefix (otherwise every partition would overwrite the same prefix) — "
                      f"e.g. prefix: {exp.name}/{TOKEN}/")
    for f in fields:
        if not _whole_segment(getattr(exp.destination, f) or ""):
            errors.append(f"{label}: destination.{f}: '{TOKEN}' must be a whole path segment (e.g. "
                          f"{exp.name}/{TOKEN}/) — it becomes the Hive folder '<column>=<value>'")
    return errors


__all__ = ["partition_errors"]
