"""Partitions of exports: time windows for `time_window` exports, chunk windows for
`chunked` exports.

Time partitions (`dagster.partitions: hourly | daily | weekly | monthly`, default daily)
are Dagster's own Hourly/Daily/Weekly/Monthly partitions with their default keys, in
`dagster.timezone` (default UTC), from `dagster.start_date` (required) to `end_date`
(exclusive), with no end offset: a partition exists once its window is over, so a user's
own `dg.DailyPartitionsDefinition(start_date=…, timezone=…)` is the same definition
(`export_partitions_def` returns it). Partition K exports the rows with the time column in
K's window — converted to UTC instants, so a New York day is [05:00Z, 05:00Z) and a DST
day has 23 or 25 hours; a zone-less column holds UTC wall time (the rule everywhere in
Rivet); a DATE column is compared with the window's local dates — to its own prefix `<time_column>=<segment>/` with its own manifest and
`_SUCCESS`. The segment is the key made path-safe: daily, weekly (the week's first day)
and monthly (the month's first day) keys are `YYYY-MM-DD` already; an hourly key
`2024-01-02-03:00` is written `2024-01-02-0300` (no `:`, which Hadoop/Spark paths and
Windows refuse), the repeated hour of a DST fall-back (`2024-11-03-01:00-0500`) keeps its
offset (`2024-11-03-0100-0500`, a `+` spelled `p`).

A backfill of many time partitions runs as ranges when `dagster.backfill_policy` (or
`max_partitions_per_run`) is set: one source query per range (rivet_core's TimeRangeRun),
still one manifest and `_SUCCESS` per partition.

A chunked export's partitions are dynamic, `<export>_chunks`: one key per chunk window,
registered in ascending window order by the config's chunk planner sensor; all windows share
the export's prefix and one manifest, written by `<export>_manifest`. A partition key is the
window's key made readable (`chunk_partition_key` in partition_keys.py, a module of its own
so that the planner's pure part (planner.py) reads it without Dagster; ADR-0005 "Partition
keys"): a range window
is `<column>_<first>-<last>` with both bounds inclusive and unpadded (`id_0-249999`,
`id_-5-3`), where the core's window key (`api.window_keys`, the `chunk_task` row) pads
every bound to 15 digits so that text order is window order — keys the Dagster UI cut in the
middle. Day windows (`2024-01-29_2024-02-05`, the end exclusive) keep the core's key, already
readable; a keyset window is `p<index>` (`p42`, the core's `p000000042`).
`chunk_window_key` reads both forms, so partitions an instance registered before this
format (the padded keys) still name their windows: the planner keeps them as registered —
with their materialization history — and registers only new windows in the readable form.
The UI lists a dynamic partitions definition in creation order by default (its "Alphabetical
sort" compares text: `id_1000000-…` before `id_250000-…`).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg

from rivet_core import api
from rivet_dagster.config_path import caller_dir, resolve_config_path
from rivet_dagster.naming import derived_name

GRANULARITIES = {
    "hourly": dg.HourlyPartitionsDefinition, "daily": dg.DailyPartitionsDefinition,
    "weekly": dg.WeeklyPartitionsDefinition, "monthly": dg.MonthlyPartitionsDefinition,
}


def granularity(export: api.ExportConfig) -> str:
    return export.dagster.partitions if export.dagster else "daily"


def partition_timezone(export: api.ExportConfig) -> str:
    """`dagster.timezone` of the export (partition boundaries and schedules), default UTC."""
    return (export.dagster.timezone if export.dagster else None) or "UTC"


def export_partitions(config: api.RivetConfig, export: api.ExportConfig) -> dg.TimeWindowPartitionsDefinition | None:
    """The time partitions of a `time_window` export (None for other modes)."""
    if export.mode != "time_window":
        return None
    start = (export.dagster.start_date if export.dagster and export.dagster.start_date else
             config.dagster.start_date if config.dagster and config.dagster.start_date else None)
    if not start:
        raise api.ConfigError(
            f"export '{export.name}': a time_window export is a time-partitioned Dagster asset and "
            "needs dagster.start_date (the first day to export), e.g.\n"
            "    dagster:\n      start_date: \"2026-01-01\"")
    end = export.dagster.end_date if export.dagster else None
    # datetimes, not strings: an hourly definition parses strings with its own format.
    return GRANULARITIES[granularity(export)](
        start_date=datetime.fromisoformat(start), end_date=datetime.fromisoformat(end) if end else None,
        timezone=partition_timezone(export))


def export_partitions_def(config_path: str | os.PathLike[str], export_name: str, *,
                          relative_to: str | os.PathLike[str] | None = None) -> dg.PartitionsDefinition | None:
    """The exact partitions definition of an export's asset, for a user's own partitioned
    asset downstream of it (same definition → one run can materialize both). A relative
    `config_path` resolves as in `build_definitions`: against `relative_to`, else the
    calling module's folder, else the current directory."""
    base = Path(relative_to) if relative_to is not None else caller_dir()
    config = api.load_config(resolve_config_path(config_path, base))
    return export_partitions(config, config.export(export_name))


def backfill_policy(export: api.ExportConfig) -> dg.BackfillPolicy | None:
    """A time_window export's `dagster.backfill_policy` when configured (`single_run`: one
    run per backfill; `multi_run`: ranges of `max_partitions_per_run`); unset = Dagster's
    default, one run per partition."""
    d = export.dagster
    if d is None or not {"backfill_policy", "max_partitions_per_run"} & d.model_fields_set:
        return None
    if d.backfill_policy == "single_run":
        return dg.BackfillPolicy.single_run()
    return dg.BackfillPolicy.multi_run(max_partitions_per_run=d.max_partitions_per_run)


def chunk_partitions(config: api.RivetConfig, export: api.ExportConfig) -> dg.DynamicPartitionsDefinition:
    return dg.DynamicPartitionsDefinition(name=derived_name(config, export, "chunks"))


def path_segment(partition_key: str) -> str:
    """The path-safe form of a time partition key (module docstring)."""
    return partition_key.replace(":", "").replace("+", "p")


def window_for_key(partitions: dg.TimeWindowPartitionsDefinition, partition_key: str) -> api.TimeWindow:
    """The partition's [start, end) (zone-aware, in the partitions' time zone)."""
    window = partitions.time_window_for_partition_key(partition_key)
    return api.TimeWindow(start=window.start, end=window.end, key=path_segment(partition_key))


def range_metadata(run: object, staged: object, keys: list[str]) -> dict[str, dict[str, dg.MetadataValue]]:
    """Per partition of a ranged run (else {}): its own rows, parts, bytes, rivet run and
    prefix — they win over the range's totals the IO manager adds to every partition."""
    if not isinstance(run, api.TimeRangeRun) or not isinstance(staged, api.RangeStaged):
        return {}
    by_label = {path_segment(k): k for k in keys}
    out: dict[str, dict[str, dg.MetadataValue]] = {}
    for unit, part in zip(run.runs, staged.windows, strict=True):
        label = unit.plan.window.label if unit.plan.window else ""
        out[by_label[label]] = {
            "dagster/partition_row_count": dg.MetadataValue.int(part.rows),
            "rows": dg.MetadataValue.int(part.rows), "parts": dg.MetadataValue.int(len(part.parts)),
            "bytes": dg.MetadataValue.int(sum(p.size_bytes for p in part.parts)),
            "rivet_run_id": dg.MetadataValue.text(unit.summary.run_id),
            "destination": dg.MetadataValue.url(unit.dest.uri),
            "run_report_path": dg.MetadataValue.path(str(run.report_path(unit)))}
    return out


def run_partition_keys(partitions: dg.PartitionsDefinition | None, tags: dict[str, str]) -> list[str] | None:
    """The time partitions a run covered, from its tags: one (`dagster/partition`), a range
    (`dagster/asset_partition_range_start`/`_end`), or None (not a partitioned run)."""
    if "dagster/partition" in tags:
        return [tags["dagster/partition"]]
    first, last = tags.get("dagster/asset_partition_range_start"), tags.get("dagster/asset_partition_range_end")
    if partitions is None or not first or not last:
        return None
    return list(partitions.get_partition_keys_in_range(dg.PartitionKeyRange(first, last)))


def sub_prefix_for_key(export: api.ExportConfig, partition_key: str) -> str:
    return f"{export.time_column}={path_segment(partition_key)}/"


def recent_partition_keys(count: int, now: datetime,
                          within: dg.TimeWindowPartitionsDefinition | None = None) -> list[str]:
    """The last `count` partitions of `within` whose window is over at `now` (oldest first;
    fewer near the start date; none past the end date). Without `within`: UTC days."""
    partitions = within or dg.DailyPartitionsDefinition(start_date=(now - timedelta(days=count + 1)).date().isoformat())
    keys: list[str] = []
    if partitions.end is not None and now > partitions.end:
        now = partitions.end
    ongoing = partitions.time_window_for_partition_key(partitions.get_partition_key_for_timestamp(now.timestamp()))
    window = partitions.get_prev_partition_window(ongoing.start)
    while window is not None and len(keys) < count:
        key = partitions.get_partition_key_for_timestamp(window.start.timestamp())
        keys.append(key)
        window = partitions.get_prev_partition_window(window.start)
    return keys[::-1]
