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


import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import dagster as dg
import pyarrow as pa
import pytest

from rivet_core import api
from rivet_dagster import build_definitions
from rivet_dagster.partitions import export_partitions_def, run_partition_keys
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
                                at_tz timestamptz NOT NULL, at_naive timestamp NOT NULL, on_day date NOT NULL)""",
        f"""INSERT INTO events
            SELECT g, 'k' || (g % 5), timestamptz '2024-10-31 00:00+00' + g * interval '15 minutes',
                   (timestamptz '2024-10-31 00:00+00' + g * interval '15 minutes') AT TIME ZONE 'UTC',
                   ((timestamptz '2024-10-31 00:00+00' + g * interval '15 minutes') AT TIME ZONE 'Asia/Tokyo')::date
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


def partition_ids(view: DestView, sub: str, untracked: int = 0) -> list[int]:
    """The ids of the partition at `sub` as its current manifest lists them (after checking
    that `_SUCCESS` is there and the manifest lists the data files present, but for
    `untracked` parts a failed run left behind)."""
    keys = view.keys()
    assert sub + "manifest.json" in keys and sub + "_SUCCESS" in keys, (sub, sorted(keys))
    manifest = view.current_manifest(sub)
    assert manifest is not None and manifest["status"] == "success", sub
    listed = {p["path"] for p in manifest["parts"]}
    assert listed <= set(view.data_keys(sub)) and len(view.data_keys(sub)) == len(listed) + untracked, sub
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
        {**events_export("ev_utc", local), "dagster": {"start_date": "2024-11-01"}},
        {"name": "ev_full", "table": "events", "mode": "full", "format": "parquet",
         "destination": local.destination("ev_full"), "dagster": {"schedule": "0 6 * * *", "timezone": NY}}]))
    assert defs.resolve_schedule_def("ev_full_schedule").execution_timezone == NY
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


# ------------------------------------------------------------------------------ granularity
def test_hourly_partitions_split_the_repeated_dst_hour_into_two_path_safe_prefixes(
        events_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    defs = build_definitions(orders_config(local.tmp, events_pg, [events_export("ev", local, partitions="hourly")]))
    pdef = defs.resolve_assets_def("ev").partitions_def
    assert isinstance(pdef, dg.HourlyPartitionsDefinition)
    # New York 01:00 happens twice on 2024-11-03 (05:00Z EDT, then 06:00Z EST): two partitions.
    keys = {"2024-11-03-01:00": ("2024-11-03-0100", "2024-11-03 05:00+00"),
            "2024-11-03-01:00-0500": ("2024-11-03-0100-0500", "2024-11-03 06:00+00"),
            "2024-11-03-02:00": ("2024-11-03-0200", "2024-11-03 07:00+00")}
    view = local.view("ev")
    seen: list[int] = []
    for key, (segment, utc_start) in keys.items():
        assert key in pdef.get_partition_keys(current_time=datetime(2024, 11, 4, tzinfo=UTC))
        assert run_job(defs, "ev_job", instance, partition_key=key).success, key
        expected = {int(r[0]) for r in db_exec(
            events_pg, f"SELECT id FROM events WHERE at_tz >= timestamptz '{utc_start}' "
                       f"AND at_tz < timestamptz '{utc_start}' + interval '1 hour'")}
        ids = partition_ids(view, f"at_tz={segment}/")
        assert set(ids) == expected and len(ids) == 4, key
        seen += ids
    assert len(seen) == len(set(seen)) == 12
    assert prefixes(view) == {"at_tz=2024-11-03-0100/", "at_tz=2024-11-03-0100-0500/", "at_tz=2024-11-03-0200/"}
    assert all(":" not in k and "+" not in k for k in view.keys())
    # `rivet validate` and the manifest check find every hourly prefix.
    cfg = api.load_config(str(local.tmp / "rivet.yaml"))
    assert api.partition_prefixes(cfg, cfg.export("ev")) == sorted(prefixes(view))


@pytest.mark.parametrize(("granularity", "windows"), [
    # Weeks start on Sunday (Dagster's weekly partitions), months on the 1st, in New York.
    ("weekly", [("2024-10-27", "2024-11-03"), ("2024-11-03", "2024-11-10")]),
    ("monthly", [("2024-10-01", "2024-11-01"), ("2024-11-01", "2024-12-01")]),
])
def test_weekly_and_monthly_partitions_cover_every_row_once(
        events_pg: str, local: Target, instance: dg.DagsterInstance, granularity: str,
        windows: list[tuple[str, str]]) -> None:
    block = events_export("ev", local, partitions=granularity)
    block["dagster"]["start_date"] = "2024-10-01"
    defs = build_definitions(orders_config(local.tmp, events_pg, [block]))
    view = local.view("ev")
    every: list[int] = []
    for start, end in windows:
        assert run_job(defs, "ev_job", instance, partition_key=start).success, start
        ids = partition_ids(view, f"at_tz={start}/")
        assert set(ids) == source_ids(events_pg, "at_tz", start, end), start
        every += ids
    # The New York month/week boundary falls inside the table: rows on both sides of it.
    assert all(len(source_ids(events_pg, "at_tz", s, e)) > 0 for s, e in windows)
    assert sorted(every) == list(range(ROWS))


# ------------------------------------------------------------------------------ ranged backfills
RANGE = ("2024-11-01", "2024-11-05")
RANGE_DAYS = ["2024-11-01", "2024-11-02", "2024-11-03", "2024-11-04", "2024-11-05"]


def range_tags(first: str, last: str) -> dict[str, str]:
    return {"dagster/asset_partition_range_start": first, "dagster/asset_partition_range_end": last}


@pytest.mark.parametrize("column", ["at_tz", "at_naive"])
def test_a_single_run_backfill_reads_the_source_once_and_publishes_each_partition_on_its_own(
        events_pg: str, target: Target, instance: dg.DagsterInstance, column: str) -> None:
    block = events_export("ev", target, column, query_log=True, backfill_policy="single_run")
    defs = build_definitions(orders_config(target.tmp, events_pg, [block]))
    assert defs.resolve_assets_def("ev").backfill_policy == dg.BackfillPolicy.single_run()
    view = target.view("ev")

    # Baseline: one partition, one run → how many executions of the query one read costs.
    assert run_job(defs, "ev_job", instance, partition_key="2024-11-06").success
    one_read = reads(events_pg)
    assert one_read == 1

    result = run_job(defs, "ev_job", instance, tags=range_tags(*RANGE))
    assert result.success
    assert reads(events_pg) - one_read == 1  # five partitions, one source query
    mats = result.get_asset_materialization_events()
    assert sorted(e.materialization.partition for e in mats) == RANGE_DAYS

    every: list[int] = []
    runs = set()
    for day, nxt in zip(RANGE_DAYS, [*RANGE_DAYS[1:], "2024-11-06"], strict=True):
        sub = f"{column}={day}/"
        ids = partition_ids(view, sub)
        assert set(ids) == source_ids(events_pg, column, day, nxt), day
        manifest = view.current_manifest(sub)
        assert manifest["orchestrator_run_id"] == result.run_id
        runs.add(manifest["run_id"])
        # Each partition's materialization carries its own numbers, not the range's total.
        mat = next(e.materialization for e in mats if e.materialization.partition == day)
        m = {k: v.value for k, v in mat.metadata.items()}
        assert m["dagster/partition_row_count"] == m["rows"] == len(ids), day
        assert m["rivet_run_id"] == manifest["run_id"] and m["destination"] == view.uri + sub, day
        assert m["parts"] == len(manifest["parts"]), day
        report = json.loads(Path(m["run_report_path"]).with_name("summary.json").read_text())
        assert (report["run_id"], report["partition_key"], report["orchestrator_run_id"]) == (
            manifest["run_id"], day, result.run_id), day
        every += ids
    assert len(runs) == len(RANGE_DAYS)  # one rivet run (report, metrics row) per partition
    lo, hi = "2024-11-01", "2024-11-06"
    assert sorted(every) == sorted(source_ids(events_pg, column, lo, hi))  # no row lost, none twice
    assert len(partition_ids(view, f"{column}=2024-11-03/")) == 100
    if target.kind == "local":  # parts, then the manifest, then _SUCCESS — in every partition
        root = target.tmp / "out" / "ev"
        for day in RANGE_DAYS:
            sub = root / f"{column}={day}"
            parts = [sub / p for p in view.data_keys(f"{column}={day}/")]
            assert max(p.stat().st_mtime_ns for p in parts) <= (sub / "manifest.json").stat().st_mtime_ns \
                <= (sub / "_SUCCESS").stat().st_mtime_ns, day


def test_a_multi_run_backfill_runs_ranges_of_max_partitions_per_run(
        events_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    block = events_export("ev", local, query_log=True, backfill_policy="multi_run", max_partitions_per_run=2)
    defs = build_definitions(orders_config(local.tmp, events_pg, [block]))
    assert defs.resolve_assets_def("ev").backfill_policy == dg.BackfillPolicy.multi_run(max_partitions_per_run=2)
    for first, last in (("2024-11-01", "2024-11-02"), ("2024-11-03", "2024-11-04")):
        before = reads(events_pg)
        assert run_job(defs, "ev_job", instance, tags=range_tags(first, last)).success
        assert reads(events_pg) - before == 1  # one source query per range
    view = local.view("ev")
    for day, nxt in (("2024-11-02", "2024-11-03"), ("2024-11-04", "2024-11-05")):
        assert set(partition_ids(view, f"at_tz={day}/")) == source_ids(events_pg, "at_tz", day, nxt)
    # The schedule asks for its recent partitions in ranges of the same size.
    block["dagster"]["schedule"] = "0 3 * * *"
    defs = build_definitions(orders_config(local.tmp, events_pg, [block]))
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=datetime(2024, 11, 6, 8, tzinfo=UTC),
                                        repository_def=defs.get_repository_def())
    requests = list(defs.resolve_schedule_def("ev_schedule").evaluate_tick(context).run_requests or [])
    assert [(r.tags.get("dagster/asset_partition_range_start"), r.tags.get("dagster/asset_partition_range_end"),
             r.partition_key) for r in requests] == [("2024-11-03", "2024-11-04", None), (None, None, "2024-11-05")]


def test_a_quality_failure_in_one_partition_of_a_range_publishes_no_partition(
        events_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    db_exec(events_pg, "DELETE FROM events WHERE at_tz >= timestamptz '2024-11-02 12:00 America/New_York' "
                       "AND at_tz < timestamptz '2024-11-03 00:00 America/New_York'")
    block = events_export("ev", local, backfill_policy="single_run")
    block["quality"] = {"row_count_min": 90}  # 11-02 now has 48 rows
    defs = build_definitions(orders_config(local.tmp, events_pg, [block]))
    result = run_job(defs, "ev_job", instance, tags=range_tags("2024-11-01", "2024-11-03"))
    assert not result.success
    assert local.view("ev").keys() == {}
    failed = [e for e in result.get_asset_check_evaluations() if not e.passed]
    assert failed and "2024-11-02" in (failed[0].description or "")


# ------------------------------------------------------------------------------ user's own assets
def test_a_users_daily_asset_shares_the_partitions_and_materializes_with_the_export(
        events_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    config = orders_config(local.tmp, events_pg, [events_export("ev", local)])
    users_def = dg.DailyPartitionsDefinition(start_date="2024-11-01", timezone=NY)
    assert export_partitions_def(config, "ev") == users_def  # no end offset, same zone: the same
    assert export_partitions_def("rivet.yaml", "ev", relative_to=local.tmp) == users_def

    @dg.asset(partitions_def=users_def, ins={"ev": dg.AssetIn(dg.AssetKey("ev"))})
    def ev_kinds(context: dg.AssetExecutionContext, ev: pa.Table) -> dict[str, int]:
        counts: dict[str, int] = {}
        for kind in ev.column("kind").to_pylist():
            counts[kind] = counts.get(kind, 0) + 1
        context.add_output_metadata({"rows": ev.num_rows})
        return counts

    defs = with_jobs(build_definitions(config), dg.define_asset_job("both", selection=["ev", "ev_kinds"]),
                     assets=[ev_kinds])
    result = run_job(defs, "both", instance, partition_key="2024-11-03")
    assert result.success
    by_asset = {e.asset_key.to_user_string(): e.materialization for e in result.get_asset_materialization_events()}
    assert by_asset["ev_kinds"].partition == by_asset["ev"].partition == "2024-11-03"
    counts = result.output_for_node("ev_kinds")
    assert sum(counts.values()) == by_asset["ev_kinds"].metadata["rows"].value == 100
    expected = db_exec(events_pg, "SELECT kind, count(*) FROM events WHERE at_tz >= timestamptz '2024-11-03 "
                                  "America/New_York' AND at_tz < timestamptz '2024-11-04 America/New_York' GROUP BY kind")
    assert counts == {k: int(n) for k, n in expected}


@pytest.mark.parametrize("column", ["at_ts", "at_dt"])
def test_a_mysql_range_of_new_york_days_is_split_like_the_one_day_queries(
        mysql_url: str, local: Target, instance: dg.DagsterInstance, column: str) -> None:
    """MySQL/MariaDB: `TIMESTAMP` (an instant) and `DATETIME` (zone-less: UTC wall time),
    three New York days around the DST fall-back in one ranged run; the oracle is computed
    here from each row's known instant."""
    base = datetime(2024, 11, 1, tzinfo=UTC)
    instants = {g: base + timedelta(minutes=15 * g) for g in range(4 * 96)}
    values = ", ".join(f"({g}, '{t:%Y-%m-%d %H:%M:%S}', '{t:%Y-%m-%d %H:%M:%S}')" for g, t in instants.items())
    db_exec(mysql_url, "CREATE TABLE events (id BIGINT PRIMARY KEY, at_ts TIMESTAMP NOT NULL, at_dt DATETIME NOT NULL)",
            f"INSERT INTO events VALUES {values}")
    block = {"name": "ev", "table": "events", "mode": "time_window", "time_column": column, "days_window": 3,
             "format": "parquet", "destination": local.destination("ev"),
             "dagster": {"start_date": "2024-11-01", "timezone": NY, "backfill_policy": "single_run"}}
    defs = build_definitions(orders_config(local.tmp, mysql_url, [block]))
    assert run_job(defs, "ev_job", instance, tags=range_tags("2024-11-01", "2024-11-03")).success
    zone = ZoneInfo(NY)
    view = local.view("ev")
    for day in ("2024-11-01", "2024-11-02", "2024-11-03"):
        start = datetime.fromisoformat(day).replace(tzinfo=zone)
        end = (start + timedelta(days=1)).replace(tzinfo=zone)  # wall-clock midnight, DST-aware
        expected = {g for g, t in instants.items() if start <= t < end}
        assert set(partition_ids(view, f"{column}={day}/")) == expected, day
    assert len(partition_ids(view, f"{column}=2024-11-03/")) == 100


def test_a_range_overlapping_a_partition_in_progress_elsewhere_is_refused_and_writes_nothing(
        events_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    config = orders_config(local.tmp, events_pg, [events_export("ev", local, backfill_policy="single_run")])
    defs = build_definitions(config)
    state = api.open_state(api.load_config(str(config)))
    try:
        held = state.acquire_export_lock("ev", window_label="2024-11-03")  # another run exports 11-03
        result = run_job(defs, "ev_job", instance, tags=range_tags("2024-11-01", "2024-11-05"))
        assert not result.success
        assert local.view("ev").keys() == {}
        held.release()
    finally:
        state.close()
    # The partitions the refused range had locked before it met 11-03 are free again.
    assert run_job(defs, "ev_job", instance, partition_key="2024-11-01").success
    assert set(partition_ids(local.view("ev"), "at_tz=2024-11-01/")) == source_ids(
        events_pg, "at_tz", "2024-11-01", "2024-11-02")


# ------------------------------------------------------------------------------ the ranged query
@pytest.mark.parametrize(("column", "step_s"), [("at_tz", 300), ("at_naive", 300), ("at_tz", 30)])
def test_the_ranged_query_tags_every_row_with_its_window_even_for_thousands_of_windows(
        events_pg: str, local: Target, column: str, step_s: int) -> None:
    """The server-side window index (a nested CASE on the inner bounds) against the index
    computed here from each row's known instant: 2,016 and 20,160 windows in one query."""
    from rivet_core.source import open_source
    from rivet_core.source.query import PARTITION_INDEX, build_time_partitions_query

    cfg = api.load_config(str(orders_config(local.tmp, events_pg, [events_export("ev", local)])))
    start = datetime(2024, 10, 31, 2, 30, tzinfo=UTC)  # windows do not start on a row
    bounds = [start + timedelta(seconds=step_s * i) for i in range(7 * 86400 // step_s + 1)]
    sql, params = build_time_partitions_query("postgres", "SELECT * FROM events", column, bounds)
    with open_source(cfg.source.resolve_url(cfg.config_dir), cfg.export("ev").resolved_tuning(cfg.source)) as src:
        schema = src.describe(sql, params)
        table = pa.Table.from_batches(list(src.stream(sql, params, schema, 100_000)), schema=schema)
    got = dict(zip(table.column("id").to_pylist(), table.column(PARTITION_INDEX).to_pylist(), strict=True))
    first = datetime(2024, 10, 31, tzinfo=UTC)
    expected = {}
    for g in range(ROWS):
        at = first + timedelta(minutes=15 * g)
        if bounds[0] <= at < bounds[-1]:
            expected[g] = int((at - bounds[0]).total_seconds() // step_s)
    assert got == expected
    assert len(bounds) - 1 in (2016, 20160)


@pytest.mark.parametrize("zone", ["Europe/Berlin", NY])
def test_a_date_column_partition_holds_the_rows_of_that_calendar_day_in_any_time_zone(
        events_pg: str, local: Target, instance: dg.DagsterInstance, zone: str) -> None:
    """A DATE holds calendar days, not instants: day D of any zone takes the rows dated D —
    one partition at a time and in a ranged run."""
    single = events_export("ev", local, "on_day")
    single["dagster"]["timezone"] = zone
    ranged = events_export("ev_range", local, "on_day", backfill_policy="single_run")
    ranged["dagster"]["timezone"] = zone
    defs = build_definitions(orders_config(local.tmp, events_pg, [single, ranged]))
    assert run_job(defs, "ev_job", instance, partition_key="2024-11-02").success
    assert run_job(defs, "ev_range_job", instance, tags=range_tags("2024-11-01", "2024-11-05")).success
    dated = {}
    for day, n in ((d, int(i)) for d, i in db_exec(events_pg, "SELECT on_day::text, id FROM events")):
        dated.setdefault(day, set()).add(n)
    assert set(partition_ids(local.view("ev"), "on_day=2024-11-02/")) == dated["2024-11-02"]
    for day in RANGE_DAYS:
        assert set(partition_ids(local.view("ev_range"), f"on_day={day}/")) == dated[day], day


def test_a_publish_failing_mid_range_keeps_the_published_partitions_whole_and_a_rerun_loses_and_repeats_nothing(
        events_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    block = events_export("ev", local, backfill_policy="single_run")
    defs = build_definitions(orders_config(local.tmp, events_pg, [block]))
    blocker = local.tmp / "out" / "ev" / "at_tz=2024-11-03" / "manifest.json"
    blocker.mkdir(parents=True)  # 11-03's manifest cannot be written: its publish fails
    first = run_job(defs, "ev_job", instance, tags=range_tags(*RANGE))
    assert not first.success
    view = local.view("ev")
    nxt = dict(zip(RANGE_DAYS, [*RANGE_DAYS[1:], "2024-11-06"], strict=True))
    for day in ("2024-11-01", "2024-11-02"):  # published before the failure: whole
        assert set(partition_ids(view, f"at_tz={day}/")) == source_ids(events_pg, "at_tz", day, nxt[day]), day
    assert not any(k.startswith(("at_tz=2024-11-04/", "at_tz=2024-11-05/")) for k in view.keys())

    # 11-03's parts were written before its manifest failed: present, listed by no manifest.
    assert len(view.data_keys("at_tz=2024-11-03/")) == 1 and view.current_manifest("at_tz=2024-11-03/") is None
    blocker.rmdir()
    assert run_job(defs, "ev_job", instance, tags=range_tags(*RANGE)).success
    every: list[int] = []
    for day in RANGE_DAYS:  # readers go by the manifest: the failed run's 11-03 part stays untracked
        ids = partition_ids(view, f"at_tz={day}/", untracked=1 if day == "2024-11-03" else 0)
        assert set(ids) == source_ids(events_pg, "at_tz", day, nxt[day]), day
        every += ids
    assert sorted(every) == sorted(source_ids(events_pg, "at_tz", "2024-11-01", "2024-11-06"))


def test_the_dagster_cli_materializes_a_partition_range_in_one_run(events_pg: str, local: Target) -> None:
    """`dagster asset materialize --partition-range` (needs `backfill_policy: single_run`),
    as the guide shows it, through the real CLI in a process of its own."""
    config = orders_config(local.tmp, events_pg, [events_export("ev", local, query_log=True,
                                                                backfill_policy="single_run")])
    home = local.tmp / "dagster_home"
    home.mkdir()
    env = {**os.environ, "RIVET_CONFIG": str(config), "DAGSTER_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "dagster", "asset", "materialize", "-m", "rivet_dagster.definitions",
                           "--select", "ev", "--partition-range", "2024-11-02...2024-11-04"],
                          cwd=local.tmp, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert reads(events_pg) == 1
    view = local.view("ev")
    for day, nxt in (("2024-11-02", "2024-11-03"), ("2024-11-03", "2024-11-04"), ("2024-11-04", "2024-11-05")):
        assert set(partition_ids(view, f"at_tz={day}/")) == source_ids(events_pg, "at_tz", day, nxt), day
    assert prefixes(view) == {"at_tz=2024-11-02/", "at_tz=2024-11-03/", "at_tz=2024-11-04/"}


def test_a_sqlite_range_of_text_timestamps_is_split_by_day(local: Target, instance: dg.DagsterInstance) -> None:
    """SQLite keeps timestamps as text (the demo's `YYYY-MM-DD HH:MM:SS.ffffff`): the ranged
    query compares the same text bounds as the one-day queries."""
    import sqlite3

    db = local.tmp / "events.db"
    base = datetime(2024, 11, 1, tzinfo=UTC)
    instants = {g: base + timedelta(minutes=15 * g) for g in range(4 * 96)}
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, at TIMESTAMP NOT NULL)")
        conn.executemany("INSERT INTO events VALUES (?, ?)",
                         [(g, t.strftime("%Y-%m-%d %H:%M:%S.%f")) for g, t in instants.items()])
    block = {"name": "ev", "table": "events", "mode": "time_window", "time_column": "at", "days_window": 3,
             "format": "parquet", "destination": local.destination("ev"),
             "dagster": {"start_date": "2024-11-01", "timezone": NY, "backfill_policy": "single_run"}}
    defs = build_definitions(orders_config(local.tmp, f"sqlite:///{db}", [block]))
    assert run_job(defs, "ev_job", instance, tags=range_tags("2024-11-01", "2024-11-03")).success
    zone = ZoneInfo(NY)
    for day in ("2024-11-01", "2024-11-02", "2024-11-03"):
        start = datetime.fromisoformat(day).replace(tzinfo=zone)
        end = start + timedelta(days=1)
        assert set(partition_ids(local.view("ev"), f"at={day}/")) == {
            g for g, t in instants.items() if start <= t < end}, day


def test_an_hourly_schedule_in_new_york_asks_for_both_repeated_hours_of_the_dst_fall_back(
        tmp_path: Path, instance: dg.DagsterInstance) -> None:
    local = Target("local", tmp_path)
    block = events_export("ev", local, partitions="hourly", schedule="5 * * * *")
    block["days_window"] = 4  # the last 4 hourly partitions per tick
    defs = build_definitions(orders_config(tmp_path, "postgresql://rivet@127.0.0.1:1/none", [block]))
    schedule = defs.resolve_schedule_def("ev_schedule")
    assert schedule.execution_timezone == NY
    # 02:05 EST on 11-03 is 07:05Z: hours 23:00, 00:00, 01:00 EDT and 01:00 EST are over.
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=datetime(2024, 11, 3, 7, 5, tzinfo=UTC),
                                        repository_def=defs.get_repository_def())
    keys = [r.partition_key for r in schedule.evaluate_tick(context).run_requests or []]
    assert keys == ["2024-11-02-23:00", "2024-11-03-00:00", "2024-11-03-01:00", "2024-11-03-01:00-0500"]


def test_an_unknown_granularity_is_refused_with_the_documented_message(tmp_path: Path) -> None:
    block = events_export("ev", Target("local", tmp_path), partitions="minutely")
    config = orders_config(tmp_path, "postgresql://rivet@127.0.0.1:1/none", [block])
    with pytest.raises(api.ConfigError) as info:
        api.load_config(str(config))
    assert ("unknown variant `minutely` for `partitions` at exports[0].dagster — expected one of: "
            "hourly, daily, weekly, monthly") in str(info.value)


def test_a_transient_error_mid_read_publishes_nothing_is_retried_and_a_rerun_completes(
        events_pg: str, local: Target, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    block = events_export("ev", local, backfill_policy="single_run")
    block["tuning"] = {"max_retries": 1, "retry_backoff_ms": 10}
    defs = build_definitions(orders_config(local.tmp, events_pg, [block]))
    monkeypatch.setenv("RIVET_TEST_TRANSIENT_AT", "during_source_read")  # every read attempt fails mid-stream
    result = run_job(defs, "ev_job", instance, tags=range_tags(*RANGE))
    assert not result.success
    retried = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert len(retried) == 1  # transient: the step's RetryPolicy retried the whole range once
    assert local.view("ev").keys() == {}
    monkeypatch.delenv("RIVET_TEST_TRANSIENT_AT")
    assert run_job(defs, "ev_job", instance, tags=range_tags(*RANGE)).success  # no lock was left behind
    every: list[int] = []
    for day in RANGE_DAYS:
        every += partition_ids(local.view("ev"), f"at_tz={day}/")
    assert sorted(every) == sorted(source_ids(events_pg, "at_tz", "2024-11-01", "2024-11-06"))


def test_the_partitions_of_a_run_are_read_from_its_tags(tmp_path: Path) -> None:
    """What the manifest check needs to verify only the prefixes a run wrote."""
    pdef = dg.HourlyPartitionsDefinition(start_date=datetime(2024, 11, 3), timezone=NY)
    assert run_partition_keys(pdef, {"dagster/partition": "2024-11-03-01:00"}) == ["2024-11-03-01:00"]
    assert run_partition_keys(pdef, range_tags("2024-11-03-00:00", "2024-11-03-02:00")) == [
        "2024-11-03-00:00", "2024-11-03-01:00", "2024-11-03-01:00-0500", "2024-11-03-02:00"]
    assert run_partition_keys(pdef, {}) is None
