"""`partition_by`: an export split into date buckets, each bucket its own sub-export.

Rivet's design (docs/modes.md, "partition_by"), kept as is: the run reads the partition
column's MIN, MAX and whether it has NULLs over the base query (one source session, one
snapshot), builds the contiguous day / month / year buckets between them
(bucket_math.py), and replaces the export by one *child export per bucket*:

- name `<export>__<label>` (`<export>__null` for the NULL bucket) — so each bucket has its
  own state: its own cursor (incremental), chunk checkpoint, schema baseline, lock, run
  ids, metrics rows and reports;
- query `SELECT * FROM (<base>) AS _rivet_part WHERE <col> >= 'lo' AND <col> < 'hi'`
  (`… WHERE <col> IS NULL` for the NULL bucket). The column is quoted by the source's
  dialect; the bounds are ISO dates rendered from `datetime.date` values (digits and `-`
  only), never text from the config or the source — so nothing user-controlled reaches
  the SQL text; and a query with no parameters keeps the base's `%` untouched;
- destination: the `{partition}` token of `path` / `prefix` rendered to the Hive segment
  `<col>=<label>` (`<col>=__HIVE_DEFAULT_PARTITION__` for NULLs).

Every child then runs through the ordinary runner (`ExportRun` / `ChunkedRun`: the same
facades, parts → manifest → `_SUCCESS` → cursor), so each bucket prefix holds its own
manifest and `_SUCCESS`. A bucket that replaces its data (full, chunked) supersedes its
previous manifest's parts — they move to `_quarantine/` once the new manifest landed —
so a bucket folder always reads as exactly its current rows. A failed bucket does not stop
the others (each is independent, as Rivet's run loop treats them); the run's exit code is
the worst bucket's.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from rivet_core.config import ExportConfig, RivetConfig
from rivet_core.errors import ConfigError, RivetError
from rivet_core.pipeline.bucket_math import (
    NULL_BUCKET,
    Bucket,
    as_utc_date,
    bucket_count,
    generate_buckets,
)
from rivet_core.pipeline.summary import RunSummary, new_run_id
from rivet_core.redact import redact_secrets
from rivet_core.source import engine_of, open_source
from rivet_core.source.query import SupportsQuoteIdent, dialect_for

log = logging.getLogger("rivet.run")

TOKEN = "{partition}"
#: The alias of the wrapped base query in a bucket's SQL (Rivet's).
PART_ALIAS = "_rivet_part"
#: More buckets than this is a misconfiguration (a day granularity over centuries, a
#: sentinel date such as 0001-01-01): refused before any child runs.
MAX_BUCKETS = 10_000


@dataclass
class PartitionedResult:
    """What a partitioned run did: the aggregate summary and each bucket's own summary."""

    summary: RunSummary
    buckets: list[tuple[Bucket, RunSummary]] = field(default_factory=list)


# ---------------------------------------------------------------------------- SQL
def bucket_query(dialect: SupportsQuoteIdent, base_sql: str, column: str, bucket: Bucket) -> str:
    """The bucket's extraction query (module docstring): half-open date range or IS NULL."""
    q = dialect.quote_ident(column)
    if bucket.is_null:
        return f"SELECT * FROM ({base_sql}) AS {PART_ALIAS} WHERE {q} IS NULL"
    assert bucket.lo is not None and bucket.hi is not None
    return (f"SELECT * FROM ({base_sql}) AS {PART_ALIAS} "
            f"WHERE {q} >= '{bucket.lo.isoformat()}' AND {q} < '{bucket.hi.isoformat()}'")


def probe_queries(dialect: SupportsQuoteIdent, base_sql: str, column: str) -> tuple[str, str, str]:
    """MIN, MAX and "has a NULL" of the partition column over the base query."""
    q = dialect.quote_ident(column)
    inner = f"FROM ({base_sql}) AS {PART_ALIAS}"
    return (f"SELECT MIN({q}) {inner}", f"SELECT MAX({q}) {inner}",
            f"SELECT 1 {inner} WHERE {q} IS NULL LIMIT 1")


# ---------------------------------------------------------------------------- destination
def _render_token(text: str | None, segment: str) -> str | None:
    return text.replace(TOKEN, segment) if text else text


def child_destination(export: ExportConfig, segment: str) -> Any:
    """The export's destination with `{partition}` rendered to `segment` (path and prefix)."""
    dest = export.destination
    return dest.model_copy(update={"path": _render_token(dest.path, segment),
                                   "prefix": _render_token(dest.prefix, segment)})


def root_export(export: ExportConfig) -> ExportConfig:
    """The export with its destination cut just before `{partition}`: the prefix every
    bucket lives under (what `rivet validate` lists); the remainder after the token is
    `token_suffix`."""
    dest = export.destination
    update = {f: getattr(dest, f).split(TOKEN, 1)[0] for f in ("path", "prefix")
              if getattr(dest, f) and TOKEN in getattr(dest, f)}
    return export.model_copy(update={"destination": dest.model_copy(update=update)})


def token_suffix(export: ExportConfig) -> str:
    """What follows `{partition}` in the destination (`/` stripped at the front), e.g.
    `parquet/` for `prefix: orders/{partition}/parquet/`; '' when the token ends it."""
    dest = export.destination
    for text in (dest.prefix, dest.path):
        if text and TOKEN in text:
            rest = text.split(TOKEN, 1)[1].lstrip("/")
            return rest if not rest or rest.endswith("/") else rest + "/"
    return ""


def bucket_prefixes(config: RivetConfig, export: ExportConfig) -> list[str]:
    """Every `<col>=<label>/<suffix>` sub-prefix under the export's root that holds a
    `manifest.json` (the buckets some run published), sorted. [] for other exports."""
    from rivet_core.unit.resolve import export_destination

    if not export.partition_by:
        return []
    suffix = token_suffix(export)
    pattern = re.compile(rf"^({re.escape(export.partition_by)}=[^/]+)/{re.escape(suffix)}manifest\.json$")
    found = set()
    for obj in export_destination(config, root_export(export), create=False).list(""):
        match = pattern.match(obj.key)
        if match:
            found.add(f"{match[1]}/{suffix}")
    return sorted(found)


def bucket_targets(export: ExportConfig, prefixes: list[str]) -> list[tuple[str, str, str]]:
    """(sub-prefix, display label, the bucket's sub-export name) for each bucket prefix: the
    manifest under `<col>=<label>/` was written by `<export>__<label>` (`__null` for NULLs),
    so verification expects that name there."""
    out = []
    for prefix in prefixes:
        label = prefix.split("/", 1)[0].split("=", 1)[1]
        suffix = "null" if label == NULL_BUCKET.label else label
        out.append((prefix, f"{export.name} [{prefix.rstrip('/')}]", f"{export.name}__{suffix}"))
    return out


# ---------------------------------------------------------------------------- children
def child_export(export: ExportConfig, bucket: Bucket, query: str) -> ExportConfig:
    """One bucket's sub-export (module docstring): Rivet's name, query and destination."""
    column = export.partition_by or ""
    return export.model_copy(update={
        "name": f"{export.name}__{bucket.name_suffix()}", "query": query, "query_file": None,
        "table": None, "partition_by": None, "destination": child_destination(export, bucket.segment(column))})


def plan_buckets(config: RivetConfig, export: ExportConfig) -> list[Bucket]:
    """Probe the source and return the export's buckets (value buckets in order, then the
    NULL bucket when the column has NULLs); [] when the query returns no row at all."""
    column = export.partition_by
    if not column:
        raise ConfigError(f"export '{export.name}': partition_by must name a column")
    url = config.source.resolve_url(config.config_dir)
    base = export.resolved_query
    with open_source(url, export.resolved_tuning(config.source)) as src:
        min_q, max_q, null_q = probe_queries(src, base, column)
        low, high, has_null = src.scalar(min_q), src.scalar(max_q), src.scalar(null_q) is not None
    buckets: list[Bucket] = []
    if low is not None and high is not None:
        days = []
        for which, raw in (("min", low), ("max", high)):
            day = as_utc_date(raw)
            if day is None:
                raise ConfigError(f"export '{export.name}': could not parse partition {which} '{raw}' from "
                                  f"column '{column}' as a date — partition_by needs a date or timestamp column")
            days.append(day)
        granularity = export.partition_granularity
        count = bucket_count(days[0], days[1], granularity)
        if count > MAX_BUCKETS:
            raise ConfigError(
                f"export '{export.name}': partition_by '{column}' spans {days[0]} … {days[1]}: {count:,} "
                f"{granularity} buckets (at most {MAX_BUCKETS:,}) — use a coarser partition_granularity "
                "or filter the outliers out of the query")
        buckets = generate_buckets(days[0], days[1], granularity)
    if has_null:
        buckets.append(NULL_BUCKET)
    return buckets


def expand(config: RivetConfig, export: ExportConfig) -> list[tuple[Bucket, ExportConfig]]:
    """The export's buckets and their child exports (probing the source once)."""
    dialect = dialect_for(engine_of(config.source.resolve_url(config.config_dir)))
    base = export.resolved_query
    return [(b, child_export(export, b, bucket_query(dialect, base, export.partition_by or "", b)))
            for b in plan_buckets(config, export)]


# ---------------------------------------------------------------------------- run
def _refused(child: ExportConfig, exc: BaseException) -> RunSummary:
    """A bucket refused before it read or wrote anything (a held lock, a lost cursor, a
    planning error): a failed summary of its own, so the other buckets still run."""
    s = RunSummary(run_id=new_run_id(child.name), export_name=child.name, mode=child.mode,
                   format=child.format, compression=child.effective_compression()[0])
    s.status, s.error_message = "failed", redact_secrets(getattr(exc, "message", None) or exc)
    s.exit_code = getattr(exc, "exit_code", 1) or 1
    s.close()
    return s


def aggregate(export: ExportConfig, buckets: list[tuple[Bucket, RunSummary]], dest_uri: str | None) -> RunSummary:
    """The run as a whole: counts summed, the worst exit code, the first failure named."""
    agg = RunSummary(run_id=new_run_id(export.name), export_name=export.name, mode=export.mode,
                     format=export.format, compression=export.effective_compression()[0])
    agg.destination_uri = dest_uri
    parts = [s for _, s in buckets]
    failed = [(b, s) for b, s in buckets if s.status == "failed"]
    agg.status = ("failed" if failed else "skipped" if parts and all(s.status == "skipped" for s in parts)
                  else "success")
    agg.total_rows = sum(s.total_rows for s in parts)
    agg.files_produced = sum(s.files_produced for s in parts)
    agg.files_committed = sum(s.files_committed for s in parts)
    agg.bytes_written = sum(s.bytes_written for s in parts)
    agg.manifest_written = bool(parts) and all(s.manifest_written or s.status == "skipped" for s in parts)
    agg.exit_code = max((s.exit_code for s in parts), default=0)
    agg.retries = max((s.retries for s in parts), default=0)
    agg.warnings = [f"{b.label}: {w}" for b, s in buckets for w in s.warnings]
    agg.destination_kind = next((s.destination_kind for s in parts if s.destination_kind), None)
    if failed:
        bucket, first = failed[0]
        agg.error_message = f"partition {bucket.label}: {first.error_message}"
        agg.error_class = first.error_class
    agg.close()
    return agg


def run_partitioned(config: RivetConfig, export: ExportConfig, options: Any = None, *,
                    state: Any = None, notifications: Any = "config") -> PartitionedResult:
    """Run every bucket of a `partition_by` export as its own sub-export (module docstring).
    Probing or planning errors raise before anything is written, as for any export."""
    from rivet_core.pipeline.gc import adds_rows_each_run
    from rivet_core.pipeline.job import RunOptions
    from rivet_core.pipeline.runner import run_unit
    from rivet_core.unit.resolve import export_destination

    options = options or RunOptions()
    children = expand(config, export)
    root_uri = export_destination(config, root_export(export), create=False).uri
    if not children:
        log.warning("export '%s': partition_by '%s' found no rows (no value span, no NULLs) — nothing to "
                    "export", export.name, export.partition_by)
    else:
        log.info("export '%s': partition_by '%s' expanded into %d partition(s)", export.name,
                 export.partition_by, len(children))
    done: list[tuple[Bucket, RunSummary]] = []
    for bucket, child in children:
        child_options = dataclasses.replace(options, progress=None, run_id=None,
                                            supersede_previous=not adds_rows_each_run(child))
        try:
            summary = run_unit(config, child, child_options, state=state, notifications=notifications)
        except RivetError as exc:  # refused before reading or writing (lock, lost cursor, plan)
            log.error("export '%s': partition %s refused: %s", export.name, bucket.label,
                      redact_secrets(exc))
            summary = _refused(child, exc)
        done.append((bucket, summary))
    agg = aggregate(export, done, root_uri)
    if not children:
        agg.status = "skipped" if export.skip_empty else "success"
        agg.skip_reason = "source returned 0 rows" if export.skip_empty else None
        agg.warnings.append(f"partition_by '{export.partition_by}' found no rows — nothing to export")
    return PartitionedResult(summary=agg, buckets=done)


__all__ = ["MAX_BUCKETS", "PartitionedResult", "aggregate", "bucket_prefixes", "bucket_targets", "bucket_query", "child_export",
           "expand", "plan_buckets", "probe_queries", "root_export", "run_partitioned", "token_suffix"]
