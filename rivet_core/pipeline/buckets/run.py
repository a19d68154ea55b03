"""`partition_by`: an export split into date buckets, each bucket its own sub-export.

Rivet's design (docs/modes.md, "partition_by"), with two departures written down there:
the run asks the source (one session, one snapshot) for the partition column's MIN, then
for the first value at or after each bucket it found — only the day / month / year
buckets that hold rows (ranges.py), so a bucket with no row costs nothing and gets
no folder (Rivet made every bucket between MIN and MAX, empty ones included) — and
whether it has NULLs. It replaces the export by one *child export per bucket*:

- name `<export>__<label>` (`<export>__null` for the NULL bucket) — so each bucket has its
  own state: its own cursor (incremental), chunk checkpoint, schema baseline, lock, run
  ids, metrics rows and reports;
- query `SELECT * FROM (<base>) AS _rivet_part WHERE <col> >= 'lo' AND <col> < 'hi'`
  (`… WHERE <col> IS NULL` for the NULL bucket, no upper bound for the calendar's last
  bucket). The column is quoted by the source's dialect; the bounds are ISO dates
  rendered from `datetime.date` values (digits and `-` only), never text from the config
  or the source — so nothing user-controlled reaches the SQL text; and a query with no
  parameters keeps the base's `%` untouched;
- destination: the `{partition}` token of `path` / `prefix` rendered to the Hive segment
  `<col>=<label>` (`<col>=__HIVE_DEFAULT_PARTITION__` for NULLs).

Every child then runs through the ordinary runner (`ExportRun` / `ChunkedRun`: the same
facades, parts → manifest → `_SUCCESS` → cursor), so each bucket prefix holds its own
manifest and `_SUCCESS`. A bucket that replaces its data (full, chunked) supersedes its
previous manifest's parts — they move to `_quarantine/` once the new manifest landed —
so a bucket folder always reads as exactly its current rows. A failed bucket does not stop
the others (each is independent, as Rivet's run loop treats them); the run's exit code is
the worst bucket's.

Above the buckets, the bucket-set facade (facade/bucket_set.py) keeps the second
departure: `_partitions.json` at the root records the buckets the export stands behind,
and a replacing run withdraws the buckets the source no longer has rows for (the old MIN,
the emptied NULL bucket, a row's old day) to `_quarantine/` before its buckets run — so
the folders under the root read as the source's rows, and `verify_bucket_set` (what
`rivet validate` and an orchestrator's check run) fails when the folders present are not
the recorded set.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

from rivet_core.config import ExportConfig, RivetConfig
from rivet_core.errors import ConfigError, RivetError
from rivet_core.manifest.bucket_index import INDEX_KEY, BucketIndexError, read_bucket_index
from rivet_core.manifest.verify import Verification, VerifyFailure
from rivet_core.pipeline.buckets.ranges import (
    NULL_BUCKET,
    Bucket,
    as_utc_date,
    bucket_containing,
)
from rivet_core.pipeline.facade.bucket_set import BucketSetFacade, BucketSlot
from rivet_core.pipeline.retention.bucket_layout import (
    TOKEN,
    bucket_prefixes,
    bucket_targets,
    root_export,
    token_suffix,
)
from rivet_core.redact import redact_secrets
from rivet_core.runrecord.summary import RunSummary, new_run_id
from rivet_core.source import engine_of, open_source
from rivet_core.source.query import SupportsQuoteIdent, dialect_for

log = logging.getLogger("rivet.run")

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
    assert bucket.lo is not None
    where = f"{q} >= '{bucket.lo.isoformat()}'"
    if bucket.hi is not None:  # None: the calendar's last bucket, open-ended (ranges.py)
        where += f" AND {q} < '{bucket.hi.isoformat()}'"
    return f"SELECT * FROM ({base_sql}) AS {PART_ALIAS} WHERE {where}"


def probe_queries(dialect: SupportsQuoteIdent, base_sql: str, column: str) -> tuple[str, str]:
    """MIN and "has a NULL" of the partition column over the base query."""
    q = dialect.quote_ident(column)
    inner = f"FROM ({base_sql}) AS {PART_ALIAS}"
    return f"SELECT MIN({q}) {inner}", f"SELECT 1 {inner} WHERE {q} IS NULL LIMIT 1"


def next_value_query(dialect: SupportsQuoteIdent, base_sql: str, column: str, start: dt.date) -> str:
    """The smallest value at or after `start` (a bucket's `hi`): the first row of the next
    bucket that holds any. The same `col >= 'date'` comparison as the bucket's own query, so
    a bucket found here is a bucket whose query selects that row."""
    q = dialect.quote_ident(column)
    return f"SELECT MIN({q}) FROM ({base_sql}) AS {PART_ALIAS} WHERE {q} >= '{start.isoformat()}'"


# ---------------------------------------------------------------------------- destination
def _render_token(text: str | None, segment: str) -> str | None:
    return text.replace(TOKEN, segment) if text else text


def child_destination(export: ExportConfig, segment: str) -> Any:
    """The export's destination with `{partition}` rendered to `segment` (path and prefix)."""
    dest = export.destination
    return dest.model_copy(update={"path": _render_token(dest.path, segment),
                                   "prefix": _render_token(dest.prefix, segment)})


# ---------------------------------------------------------------------------- children
def child_export(export: ExportConfig, bucket: Bucket, query: str) -> ExportConfig:
    """One bucket's sub-export (module docstring): Rivet's name, query and destination."""
    column = export.partition_by or ""
    return export.model_copy(update={
        "name": f"{export.name}__{bucket.name_suffix()}", "query": query, "query_file": None,
        "table": None, "partition_by": None, "destination": child_destination(export, bucket.segment(column))})


def _as_day(export: ExportConfig, raw: Any, which: str) -> dt.date:
    day = as_utc_date(raw)
    if day is None:
        raise ConfigError(f"export '{export.name}': could not parse partition {which} '{raw}' from column "
                          f"'{export.partition_by}' as a date — partition_by needs a date or timestamp column")
    return day


def occupied_buckets(src: Any, export: ExportConfig, column: str) -> list[Bucket]:
    """The value buckets that hold at least one row, in order: MIN, then for each bucket
    found the smallest value at or after its end (`next_value_query`) — one query per
    occupied bucket plus one, so an empty bucket costs nothing, however wide the span (an
    index on the column makes each query a seek). More than MAX_BUCKETS occupied buckets is
    refused before any bucket runs."""
    base, granularity = export.resolved_query, export.partition_granularity
    found: list[Bucket] = []
    raw = src.scalar(probe_queries(src, base, column)[0])
    which = "min"
    while raw is not None:
        day = _as_day(export, raw, which)
        if found and found[-1].hi is not None and day < found[-1].hi:
            day = found[-1].hi  # a source that compares otherwise than UTC dates: never loop
        found.append(bucket_containing(day, granularity))
        if len(found) > MAX_BUCKETS:
            raise ConfigError(
                f"export '{export.name}': partition_by '{column}' has rows in more than {MAX_BUCKETS:,} "
                f"{granularity} buckets (from {found[0].label}) — use a coarser partition_granularity or "
                "filter the outliers out of the query")
        if found[-1].hi is None:
            break
        raw, which = src.scalar(next_value_query(src, base, column, found[-1].hi)), "value"
    return found


def plan_buckets(config: RivetConfig, export: ExportConfig) -> list[Bucket]:
    """Probe the source (one session, one snapshot) and return the export's buckets that
    hold rows: value buckets in order, then the NULL bucket when the column has NULLs; []
    when the query returns no row at all."""
    column = export.partition_by
    if not column:
        raise ConfigError(f"export '{export.name}': partition_by must name a column")
    url = config.source.resolve_url(config.config_dir)
    with open_source(url, export.resolved_tuning(config.source)) as src:
        buckets = occupied_buckets(src, export, column)
        if src.scalar(probe_queries(src, export.resolved_query, column)[1]) is not None:
            buckets.append(NULL_BUCKET)
    return buckets


def expand(config: RivetConfig, export: ExportConfig) -> list[tuple[Bucket, ExportConfig]]:
    """The export's buckets and their child exports (probing the source once)."""
    dialect = dialect_for(engine_of(config.source.resolve_url(config.config_dir)))
    base = export.resolved_query
    return [(b, child_export(export, b, bucket_query(dialect, base, export.partition_by or "", b)))
            for b in plan_buckets(config, export)]


# ---------------------------------------------------------------------------- summaries
def _refused(child: ExportConfig, exc: BaseException) -> RunSummary:
    """A bucket refused before it read or wrote anything (a held lock, a lost cursor, a
    planning error): a failed summary of its own, so the other buckets still run."""
    s = RunSummary(run_id=new_run_id(child.name), export_name=child.name, mode=child.mode,
                   format=child.format, compression=child.effective_compression()[0])
    s.status, s.error_message = "failed", redact_secrets(getattr(exc, "message", None) or exc)
    s.exit_code = getattr(exc, "exit_code", 1) or 1
    s.close()
    return s


def aggregate(export: ExportConfig, buckets: list[tuple[Bucket, RunSummary]], dest_uri: str | None,
              run_id: str | None = None) -> RunSummary:
    """The run as a whole: counts summed, the worst exit code, the first failure named."""
    agg = RunSummary(run_id=run_id or new_run_id(export.name), export_name=export.name, mode=export.mode,
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


# ---------------------------------------------------------------------------- the bucket set
def bucket_slot(export: ExportConfig, bucket: Bucket) -> BucketSlot:
    """Where a bucket publishes under the root, and the sub-export that publishes there."""
    return BucketSlot(f"{bucket.segment(export.partition_by or '')}/{token_suffix(export)}",
                      f"{export.name}__{bucket.name_suffix()}")


def present_slots(config: RivetConfig, export: ExportConfig) -> list[BucketSlot]:
    """The bucket folders at the destination that hold a `manifest.json`."""
    return [BucketSlot(prefix, name) for prefix, _label, name in bucket_targets(export, bucket_prefixes(config, export))]


def verify_bucket_set(config: RivetConfig, export: ExportConfig,
                      present_prefixes: list[str] | None = None) -> tuple[str, Verification]:
    """The root's uri and the verdict on its bucket set: the bucket folders that hold a
    manifest must be exactly those `_partitions.json` records (facade/bucket_set.py). A
    recorded bucket that is gone (a deleted folder, a manifest moved away) is
    `bucket_missing`; a bucket an append log (incremental) lost that way stays
    `bucket_lost` after the next run, until a full refresh exports its rows again; a
    bucket no run recorded is `bucket_unrecorded` — also FAILED: no
    published run explains its rows (a crash between a bucket's manifest and the record
    is the benign case, and the next run records or withdraws it). No record and no
    bucket: the legacy verdict, as for any prefix without a manifest; buckets but no
    record (published before the record existed): legacy too, with the advice to run it.
    `present_prefixes`: `bucket_prefixes` when the caller listed them already."""
    from rivet_core.unit.resolve import export_destination

    root = export_destination(config, root_export(export), create=False)
    v = Verification()
    try:
        index = read_bucket_index(root)
        present = set(bucket_prefixes(config, export) if present_prefixes is None else present_prefixes)
    except (RivetError, BucketIndexError) as exc:
        kind = "bucket_index_read_error" if isinstance(exc, RivetError) else "bucket_index_invalid"
        v.failures.append(VerifyFailure(kind, {"key": INDEX_KEY, "detail": redact_secrets(exc),
                                               "transient": bool(getattr(exc, "transient", False))}))
        return root.uri, v
    if index is None:
        v.legacy_run = True
        return root.uri, v
    v.manifest_found = True
    if index.export_name != export.name:
        v.failures.append(VerifyFailure("manifest_export_mismatch", {"expected": export.name,
                                                                     "actual": index.export_name}))
    for prefix in sorted(set(index.buckets) - present):
        v.failures.append(VerifyFailure("bucket_missing", {"bucket": prefix.rstrip("/"),
                                                           "run_id": index.buckets[prefix]}))
    for prefix in sorted(present - set(index.buckets)):
        v.failures.append(VerifyFailure("bucket_unrecorded", {"bucket": prefix.rstrip("/")}))
    for prefix, lost_run in sorted(index.lost.items()):
        v.failures.append(VerifyFailure("bucket_lost", {"bucket": prefix.rstrip("/"), "run_id": lost_run,
                                                        "export": export.name}))
    v.parts_verified = len(present & set(index.buckets))
    v.success_marker_consistent = v.manifest_self_consistent = True
    v.passed = not any(f.fatal for f in v.failures)
    return root.uri, v


# ---------------------------------------------------------------------------- run
def _run_bucket(config: RivetConfig, export: ExportConfig, bucket: Bucket, child: ExportConfig, options: Any,
                state: Any, notifications: Any) -> RunSummary:
    """One bucket through the ordinary runner; a refusal before it read or wrote anything
    becomes its own failed summary, so the other buckets still run."""
    from rivet_core.pipeline.retention.dataset_kind import adds_rows_each_run
    from rivet_core.pipeline.runner import run_unit

    # A table's earlier versions reference the previous run's parts: a table bucket keeps
    # them, as an unpartitioned table export does (retention is refused with table_format).
    supersede = not adds_rows_each_run(child) and child.table_format is None
    child_options = dataclasses.replace(options, progress=None, run_id=None, supersede_previous=supersede)
    try:
        return run_unit(config, child, child_options, state=state, notifications=notifications)
    except RivetError as exc:  # refused before reading or writing (lock, lost cursor, plan)
        log.error("export '%s': partition %s refused: %s", export.name, bucket.label, redact_secrets(exc))
        return _refused(child, exc)


def run_partitioned(config: RivetConfig, export: ExportConfig, options: Any = None, *,
                    state: Any = None, notifications: Any = "config") -> PartitionedResult:
    """Run every bucket that holds rows as its own sub-export (module docstring), between
    the bucket-set facade's `open` (record shrunk, stale buckets withdrawn) and its
    `published` after each bucket. Probing or planning errors raise before anything is
    written, as for any export."""
    from rivet_core.pipeline.retention.dataset_kind import adds_rows_each_run
    from rivet_core.pipeline.single.job import RunOptions
    from rivet_core.unit.resolve import export_destination

    options = options or RunOptions()
    children = expand(config, export)
    run_id = new_run_id(export.name)
    if not children and export.skip_empty:  # a skipped run touches nothing, as an unpartitioned one
        agg = aggregate(export, [], None, run_id)
        agg.status, agg.skip_reason = "skipped", "source returned 0 rows"
        agg.warnings.append(f"partition_by '{export.partition_by}' found no rows — nothing to export")
        return PartitionedResult(summary=agg)
    root = export_destination(config, root_export(export))
    log.info("export '%s': partition_by '%s': %d partition(s) hold rows", export.name, export.partition_by,
             len(children))
    full_refresh = bool(getattr(options, "full_refresh", False))
    # A full refresh of an append log is a new baseline: the buckets the source no longer
    # holds are withdrawn as a replacing run's are — except an Iceberg bucket's, whose files a
    # catalog outside the prefix names (facade/bucket_set.py).
    bucket_set = BucketSetFacade(root, export.name, export.partition_by or "", run_id,
                                 replacing=not adds_rows_each_run(export) or (
                                     full_refresh and export.table_format != "iceberg"),
                                 full_refresh=full_refresh)
    bucket_set.open([bucket_slot(export, b) for b, _ in children], present_slots(config, export))
    done: list[tuple[Bucket, RunSummary]] = []
    for bucket, child in children:
        summary = _run_bucket(config, export, bucket, child, options, state, notifications)
        if summary.manifest_written:
            bucket_set.published(bucket_slot(export, bucket), summary.run_id)
        done.append((bucket, summary))
    agg = aggregate(export, done, root.uri, run_id)
    agg.warnings += bucket_set.warnings
    if not children:
        agg.warnings.append(f"partition_by '{export.partition_by}' found no rows — nothing to export")
    return PartitionedResult(summary=agg, buckets=done)


__all__ = ["MAX_BUCKETS", "PartitionedResult", "aggregate", "bucket_prefixes", "bucket_query",
           "bucket_slot", "bucket_targets", "child_export", "expand", "next_value_query", "occupied_buckets",
           "plan_buckets", "present_slots", "probe_queries", "root_export", "run_partitioned", "token_suffix",
           "verify_bucket_set"]
