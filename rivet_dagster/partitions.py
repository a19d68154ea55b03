"""Partitions of exports: daily time windows for `time_window` exports, chunk windows for
`chunked` exports.

Partition D exports rows with the time column in [D, D+1) (UTC) to its own prefix
`<time_column>=D/`, with its own manifest and `_SUCCESS` (DESIGN.md §6). `dagster.start_date`
is required: a time-partitioned asset needs to know where its history starts.

A chunked export's partitions are dynamic, `<export>_chunks`: one key per chunk window
(`rivet_core.chunks.keys`: stable, sortable, `[A-Za-z0-9_.-]`), registered in ascending order
by the `<export>_planner` sensor; all windows share the export's prefix and one manifest,
written by `<export>_manifest`.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import dagster as dg

from rivet_core import api
from rivet_dagster.naming import safe_name


def export_partitions(config: api.RivetConfig, export: api.ExportConfig) -> dg.PartitionsDefinition | None:
    if export.mode != "time_window":
        return None
    start = (export.dagster.start_date if export.dagster and export.dagster.start_date else
             config.dagster.start_date if config.dagster and config.dagster.start_date else None)
    if not start:
        raise api.ConfigError(
            f"export '{export.name}': a time_window export is a daily-partitioned Dagster asset and "
            "needs dagster.start_date (the first day to export), e.g.\n"
            "    dagster:\n      start_date: \"2026-01-01\"")
    end = export.dagster.end_date if export.dagster else None
    return dg.DailyPartitionsDefinition(start_date=start, end_date=end, timezone="UTC", end_offset=1)


def chunk_partitions(export: api.ExportConfig) -> dg.DynamicPartitionsDefinition:
    return dg.DynamicPartitionsDefinition(name=f"{safe_name(export.name)}_chunks")


def window_for_key(partition_key: str) -> api.DayWindow:
    day = date.fromisoformat(partition_key)
    return api.DayWindow(start=day, end=day + timedelta(days=1))


def sub_prefix_for_key(export: api.ExportConfig, partition_key: str) -> str:
    return f"{export.time_column}={partition_key}/"


def recent_partition_keys(days: int, now: datetime,
                          within: dg.TimeWindowPartitionsDefinition | None = None) -> list[str]:
    """The last `days` day keys up to and including today (UTC); with `within`, only the
    days inside its [start_date, end_date) (a tick near the start asks for fewer days)."""
    today = now.date()
    keys = [today - timedelta(days=i) for i in range(days - 1, -1, -1)]
    if within is not None:
        first, end = within.start.date(), within.end.date() if within.end else None
        keys = [d for d in keys if d >= first and (end is None or d < end)]
    return [d.isoformat() for d in keys]
