"""Time partitions of `time_window` exports against real PostgreSQL: time zones, hourly /
daily / weekly / monthly granularity, ranged backfills, a user's own partitioned asset.

Source `events` (support below): one row every 15 minutes from 2024-10-31 00:00Z for 7
days, with the instant twice — `at_tz timestamptz` and `at_naive timestamp` holding the
same instant's UTC wall time (Rivet reads zone-less values as UTC). 2024-11-03 is the
New York DST fall-back day: 25 hours, [04:00Z, 05:00Z next day), so its partition holds
100 rows. The oracle is PostgreSQL itself (`timestamptz '… America/New_York'`), and the
destination is re-read with pyarrow; the tool's counters are never trusted. Every read of
the source is logged by the source query itself (a one-time filter calling `dblink_exec`,
which writes outside the export's read-only transaction), so "one query per range" is
counted by the database.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from rivet_dagster import build_definitions
from rivet_dagster.partitions import export_partitions_def
from tests.dagster.support import DestView, Target, orders_config, run_job, with_jobs
from tests.helpers import db_exec

ROWS = 7 * 96
NY = "America/New_York"


# ------------------------------------------------------------------------------ source + oracle
@pytest.fixture
def events_pg(pg_url: str) -> str:
    db_exec(
        pg_url,
        "CREATE EXTENSION IF NOT EXISTS dblink",
        "CREATE TABLE read_log (n serial PRIMARY KEY)",
        f"""CREATE FUNCTION log_read() RETURNS boolean LANGUAGE sql VOLATILE AS $$
              SELECT dblink_exec('{pg_url}', 'INSERT INTO read_log DEFAULT VALUES') IS NOT NULL $$""",
        """CREATE TABLE events (id bigint PRIMARY KEY, kind text NOT NULL,
                                at_tz timestamptz NOT NULL, at_naive timestamp NOT NULL)""",
        f"""INSERT INTO events
            SELECT g, 'k' || (g % 5), timestamptz '2024-10-31 00:00+00' + g * interval '15 minutes',
                   (timestamptz '2024-10-31 00:00+00' + g * interval '15 minutes') AT TIME ZONE 'UTC'
            FROM generate_series(0, {ROWS - 1}) g""",
    )
    return pg_url


def reads(url: str) -> int:
    """How many times the export query ran at the source (its one-time filter logged it)."""
    return int(db_exec(url, "SELECT count(*) FROM read_log")[0][0])


def source_ids(url: str, column: str, start: str, end: str, zone: str = NY) -> set[int]:
    """ids with `column` in [start, end) of `zone`'s wall clock; a naive column holds UTC."""
    lo, hi = f"timestamptz '{start} {zone}'", f"timestamptz '{end} {zone}'"
    if column == "at_naive":
        lo, hi = f"({lo} AT TIME ZONE 'UTC')", f"({hi} AT TIME ZONE 'UTC')"
    return {int(r[0]) for r in db_exec(url, f"SELECT id FROM events WHERE {column} >= {lo} AND {column} < {hi}")}


def events_export(name: str, target: Target, column: str = "at_tz", query_log: bool = False,
                  **dagster: Any) -> dict[str, Any]:
    block: dict[str, Any] = {
        "name": name, "mode": "time_window", "time_column": column, "days_window": 3, "format": "parquet",
        "destination": target.destination(name),
        "dagster": {"start_date": "2024-11-01", "timezone": NY, **dagster}}
    if query_log:  # the log is written once per execution of the query, not per row
        block["query"] = "SELECT * FROM events WHERE (SELECT log_read())"
    else:
        block["table"] = "events"
    return block


def partition_ids(view: DestView, sub: str) -> list[int]:
    """The ids of the partition at `sub` as its current manifest lists them (after checking
    that `_SUCCESS` is there and the manifest lists exactly the data files present)."""
    keys = view.keys()
    assert sub + "manifest.json" in keys and sub + "_SUCCESS" in keys, (sub, sorted(keys))
    manifest = view.current_manifest(sub)
    assert manifest is not None and manifest["status"] == "success", sub
    assert view.data_keys(sub) == sorted(p["path"] for p in manifest["parts"]), sub
    table = view.parts_table([manifest], sub)
    ids = table.column("id").to_pylist() if table.num_rows else []
    assert len(ids) == len(set(ids)), f"a row appears twice in {sub}"
    return ids


def prefixes(view: DestView) -> set[str]:
    return {k.split("/")[0] + "/" for k in view.keys() if "/" in k}


# ------------------------------------------------------------------------------ time zones
@pytest.mark.parametrize("column", ["at_tz", "at_naive"])
def test_a_new_york_day_exports_the_rows_of_that_new_york_day_including_a_25_hour_dst_day(
        events_pg: str, target: Target, instance: dg.DagsterInstance, column: str) -> None:
    defs = build_definitions(orders_config(target.tmp, events_pg, [events_export("ev", target, column)]))
    view = target.view("ev")
    for day, nxt in (("2024-11-02", "2024-11-03"), ("2024-11-03", "2024-11-04")):
        result = run_job(defs, "ev_job", instance, partition_key=day)
        assert result.success, day
        expected = source_ids(events_pg, column, day, nxt)
        assert set(partition_ids(view, f"{column}={day}/")) == expected, day
    # The fall-back day is 25 hours of 4 rows; the day before it 24 hours.
    assert len(source_ids(events_pg, column, "2024-11-03", "2024-11-04")) == 100
    assert len(partition_ids(view, f"{column}=2024-11-02/")) == 96
    # 04:00Z on 11-03 is New York midnight: the first row of 11-03, not the last of 11-02.
    first_of_day = int(db_exec(events_pg, "SELECT id FROM events WHERE at_tz = timestamptz '2024-11-03 04:00+00'")[0][0])
    assert first_of_day in partition_ids(view, f"{column}=2024-11-03/")
    assert prefixes(view) == {f"{column}=2024-11-02/", f"{column}=2024-11-03/"}


def test_the_partitions_and_the_schedule_follow_the_time_zone(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    local = Target("local", tmp_path)
    url = "postgresql://rivet@127.0.0.1:1/none"  # nothing here touches the source
    defs = build_definitions(orders_config(tmp_path, url, [
        events_export("ev", local, schedule="15 2 * * *"),
        {**events_export("ev_utc", local), "dagster": {"start_date": "2024-11-01"}}]))
    pdef = defs.resolve_assets_def("ev").partitions_def
    assert isinstance(pdef, dg.DailyPartitionsDefinition) and pdef.timezone == NY
    assert pdef.time_window_for_partition_key("2024-11-03").start == datetime(2024, 11, 3, 4, tzinfo=UTC)
    assert defs.resolve_assets_def("ev_utc").partitions_def.timezone == "UTC"
    schedule = defs.resolve_schedule_def("ev_schedule")
    assert schedule.execution_timezone == NY
    # 02:15 New York on 11-05 is 07:15Z: the last 3 New York days that are over.
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=datetime(2024, 11, 5, 7, 15, tzinfo=UTC),
                                        repository_def=defs.get_repository_def())
    keys = [r.partition_key for r in schedule.evaluate_tick(context).run_requests or []]
    assert keys == ["2024-11-02", "2024-11-03", "2024-11-04"]
    # 03:00Z on 11-05 is still 11-04 in New York: 11-04 is not over yet.
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=datetime(2024, 11, 5, 3, tzinfo=UTC),
                                        repository_def=defs.get_repository_def())
    keys = [r.partition_key for r in schedule.evaluate_tick(context).run_requests or []]
    assert keys == ["2024-11-01", "2024-11-02", "2024-11-03"]
