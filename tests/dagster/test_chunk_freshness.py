"""Chunked exports stay true to the source (issue 14 item 4), against real PostgreSQL and MariaDB.

Every test exports all windows the way the daemon would: a planner tick (its partition
requests applied to the instance, since `build_sensor_context` does not), then each run
request executed in-process, the sensor cursor threaded from tick to tick. Then the source
changes under the published dataset:

- with `change_column`, an UPDATE of one row of window 0 → the next tick requests exactly
  that window, in one run with the manifest (it is the only window to export);
- keyset windows on uuid keys receive new keys → exactly the windows whose key range got
  them are re-requested, with the `reconcile` check (red until they are re-exported);
- without `change_column`, `dagster.refresh` requests every window on its cron tick.

The oracle re-reads the parts the current `manifest.json` lists with pyarrow and compares
them with the source row set (each key once); it never trusts the tool's counters.
"""

from __future__ import annotations

import random
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from rivet_core import api
from rivet_core.config import load_config
from rivet_core.state import StateStore
from rivet_dagster import build_definitions
from rivet_dagster.chunked import FINGERPRINT_METADATA, recorded_fingerprints
from rivet_dagster.partition_keys import chunk_partition_key, chunk_window_key
from tests.dagster.support import (
    Target,
    check_evaluations,
    create_orders,
    drop_planned_at,
    export_block,
    export_state,
    id_amounts,
    orders_config,
    request_job,
    run_job,
    source_rows,
    with_export_state,
)
from tests.helpers import db_exec

EXPORT = "orders_chunked"
PARTITIONS = f"{EXPORT}_chunks"
CHUNK_JOB, MANIFEST_JOB, RECONCILE_JOB = f"{EXPORT}_job", f"{EXPORT}_manifest_job", f"{EXPORT}_reconcile_job"
#: The windows of a batch that holds every window still to export, and the manifest, in one run.
PUBLISH_JOB = f"{EXPORT}_publish_job"
PLANNER = "rivet_chunk_planner"  # the config's one planner sensor (rivet.yaml)


def key(lo: int) -> str:
    """The readable partition key of the window [lo, lo + 99] (rivet_dagster/partitions.py)."""
    return f"id_{lo}-{lo + 99}"


KEYS = [key(lo) for lo in range(0, 600, 100)]


def by_partition(by_window: dict[str, str]) -> dict[str, str]:
    """`recorded_fingerprints` (window key → fingerprint) by readable partition key."""
    return {chunk_partition_key(k): v for k, v in by_window.items()}


# ------------------------------------------------------------------------------ driving the planner
class Planner:
    """The planner sensor as the daemon drives it: cursor threaded, partition requests applied."""

    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
        self.defs, self.instance, self.cursor = defs, instance, None

    def tick(self, cursor: str | None = None, *, soon: bool = False) -> dg.SensorResult:
        """One evaluation a full planner interval after the last (the cursor's `planned_at`
        dropped), or with `soon=True` a poll within the interval (rivet_dagster.chunked
        `plan_deferral` decides whether it plans)."""
        sensor = self.defs.resolve_sensor_def(PLANNER)
        cursor = cursor if cursor is not None else self.cursor
        if not soon:
            cursor = drop_planned_at(cursor)
        context = dg.build_sensor_context(instance=self.instance, definitions=self.defs, cursor=cursor)
        result = sensor(context)
        assert isinstance(result, dg.SensorResult)
        for request in result.dynamic_partitions_requests or []:
            if isinstance(request, dg.AddDynamicPartitionsRequest):
                self.instance.add_dynamic_partitions(PARTITIONS, list(request.partition_keys))
            else:
                for k in request.partition_keys:
                    self.instance.delete_dynamic_partition(PARTITIONS, k)
        self.cursor = result.cursor
        return result

    def run(self, result: dg.SensorResult, only: str | None = None) -> list[Any]:
        """Execute the tick's run requests (those of job `only`; CHUNK_JOB: every run that
        exports windows, PUBLISH_JOB's included), each as its own run."""
        outcomes = []
        for request in result.run_requests or []:
            if only is not None and request_job(request) not in ((CHUNK_JOB, PUBLISH_JOB) if only == CHUNK_JOB else (only,)):
                continue
            kw: dict[str, Any] = {"tags": dict(request.tags)}
            if request.partition_key is not None:
                kw["partition_key"] = request.partition_key
            outcome = run_job(self.defs, request_job(request), self.instance, **kw)
            assert outcome.success or request_job(request) == RECONCILE_JOB, f"{request_job(request)} {request.partition_key}"
            outcomes.append(outcome)
        return outcomes

    def publish_everything(self) -> dg.SensorResult:
        """Ticks and runs until the manifest is published and a tick finds nothing to do;
        returns the first tick (every window in one batch: one run, the manifest included)."""
        first = self.tick()
        assert requested(first) == sorted(requested(first), key=chunk_window_key) and requested(first)
        assert jobs(first) == [PUBLISH_JOB]
        self.run(first)
        assert_quiet(self.tick())
        return first


def requested(result: dg.SensorResult, job: str | None = None) -> list[str | None]:
    """The windows the tick's runs of `job` (default: CHUNK_JOB and PUBLISH_JOB) export, in
    request order (a ranged run names its windows in tag `rivet/windows`)."""
    return [k for r in result.run_requests or [] if request_job(r) in ((job,) if job else (CHUNK_JOB, PUBLISH_JOB))
            for k in (r.tags["rivet/windows"].split(",") if "rivet/windows" in r.tags else [r.partition_key])]


def jobs(result: dg.SensorResult) -> list[str]:
    return sorted(request_job(r) for r in result.run_requests or [])


def assert_quiet(result: dg.SensorResult) -> None:
    """A tick with no change: no request of any kind."""
    assert not result.run_requests and not result.dynamic_partitions_requests, result.run_requests
    assert result.skip_reason is not None and "nothing changed" in (result.skip_reason.skip_message or "")


def chunk_run(config: Path) -> tuple[Any, dict[str, Any]]:
    store = StateStore.open(load_config(config).config_path)
    try:
        run = store.get_latest_chunk_run(EXPORT)
        assert run is not None
        return run, {chunk_partition_key(t.window_key): t for t in store.list_chunk_tasks(run.run_id)}
    finally:
        store.close()


def published(target: Target) -> tuple[dict[str, Any], pa.Table]:
    view = target.view(EXPORT)
    manifest = view.current_manifest()
    assert manifest is not None and manifest["status"] == "success"
    table = view.parts_table([manifest])
    # Only the listed parts are visible at the prefix: superseded attempts were moved aside.
    assert view.data_keys() == sorted(p["path"] for p in manifest["parts"])
    return manifest, table


# ------------------------------------------------------------------------------ configs
def orders_chunked(target: Target, url: str, **extra: Any) -> Path:
    dagster = extra.pop("dagster", None)
    block = export_block(EXPORT, "chunked", target.destination(EXPORT), chunk_column="id", chunk_size=100, **extra)
    if dagster:
        block["dagster"] = dagster
    return orders_config(target.tmp, url, [block])


def create_mysql_orders(url: str, rows: int = 550) -> None:
    db_exec(url,
            """CREATE TABLE orders (
                 id bigint PRIMARY KEY, customer varchar(20) NOT NULL, amount decimal(12,2) NOT NULL,
                 note text, created_at datetime(6) NOT NULL, updated_at datetime(6) NOT NULL)""",
            f"""INSERT INTO orders
                WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n < {rows - 1})
                SELECT n, CONCAT('c', n % 17), ROUND(MOD(n * 7.31, 5000), 2),
                       CASE WHEN n % 3 = 0 THEN NULL ELSE CONCAT('note ', n) END,
                       TIMESTAMP('2026-03-01') + INTERVAL n * 10 MINUTE,
                       TIMESTAMP('2026-03-01') + INTERVAL n * 10 + 5 MINUTE
                FROM g""")


def amounts(url: str) -> dict[int, Decimal]:
    rows = db_exec(url, "SELECT id, amount FROM orders ORDER BY id")
    return {int(i): Decimal(str(a)).quantize(Decimal("0.01")) for i, a in rows}


# ------------------------------------------------------------------------------ change_column
@pytest.mark.parametrize("engine", ["postgres", "mariadb"])
def test_an_updated_row_re_exports_exactly_its_window_then_the_manifest(
        engine: str, request: pytest.FixtureRequest, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    url = request.getfixturevalue("pg_url" if engine == "postgres" else "mysql_url")
    if engine == "postgres":
        create_orders(url, rows=550)
    else:
        create_mysql_orders(url, rows=550)
    target = Target("local", tmp_path)
    config = orders_chunked(target, url, change_column="updated_at")
    defs = build_definitions(config)
    planner = Planner(defs, instance)
    planner.publish_everything()
    first_manifest, table = published(target)
    assert id_amounts(table) == amounts(url)

    # Each window's materialization recorded the fingerprint the planner compares against:
    # its row count and MAX(updated_at). (The windows went in one ranged run, which has one
    # data version for all its partitions; a single-window run's data version is the
    # fingerprint — checked after the re-export below.)
    recorded = by_partition(recorded_fingerprints(instance, dg.AssetKey(EXPORT)))
    assert sorted(recorded, key=chunk_window_key) == KEYS
    assert recorded[KEYS[5]].startswith("50@") and recorded[KEYS[0]].startswith("100@")
    window0 = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(EXPORT), asset_partitions=[KEYS[0]]), limit=1).records[0]
    assert window0.asset_materialization.metadata[FINGERPRINT_METADATA].value == recorded[KEYS[0]]
    old_part = next(p["path"] for p in first_manifest["parts"] if "_chunk0_" in p["path"])

    # An in-place UPDATE (same row count) of a row of window 0; updated_at moves, as it does.
    later = "now()" if engine == "postgres" else "NOW(6)"
    db_exec(url, f"UPDATE orders SET amount = 4321.09, updated_at = {later} WHERE id = 42")
    changed = planner.tick()
    # The only window to export: it goes with the manifest and its checks, in one run.
    assert [(request_job(r), r.partition_key) for r in changed.run_requests] == [(PUBLISH_JOB, KEYS[0])]
    assert not planner.tick().run_requests  # until it runs: not requested again, no manifest of its own
    finalized = planner.run(changed)[0]
    rerun = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(EXPORT), asset_partitions=[KEYS[0]]), limit=1).records[0]
    fingerprint = rerun.asset_materialization.metadata[FINGERPRINT_METADATA].value
    assert rerun.asset_materialization.tags["dagster/data_version"] == fingerprint != recorded[KEYS[0]]

    checks = check_evaluations(finalized)
    assert checks["manifest_verified"].passed and checks["reconcile"].passed
    assert_quiet(planner.tick())

    manifest, table = published(target)
    source = amounts(url)
    assert id_amounts(table) == source and source[42] == Decimal("4321.09")  # each id once, the new amount
    assert manifest["row_count"] == 550 and manifest["run_id"] != first_manifest["run_id"]
    keys = target.view(EXPORT).keys()
    assert old_part not in keys and f"_quarantine/{manifest['run_id']}/{old_part}" in keys  # moved aside
    assert by_partition(recorded_fingerprints(instance, dg.AssetKey(EXPORT)))[KEYS[0]] != recorded[KEYS[0]]


def test_a_change_column_that_is_missing_or_not_orderable_is_refused_naming_it(
        orders_pg: str, tmp_path: Path) -> None:
    target = Target("local", tmp_path)
    db_exec(orders_pg, "ALTER TABLE orders ADD COLUMN flags json")
    for column, says in (("changed_on", "change_column 'changed_on'"), ("flags", "cannot be compared with MAX()")):
        config = load_config(orders_chunked(target, orders_pg, change_column=column))
        with pytest.raises(api.ConfigError, match=says):
            api.plan_chunk_tasks(config, config.export(EXPORT), recorded={})


# ------------------------------------------------------------------------------ keyset windows
def create_items(url: str, rows: int) -> None:
    db_exec(url,
            "CREATE TABLE items (id uuid PRIMARY KEY, amount numeric(12,2) NOT NULL)",
            f"INSERT INTO items SELECT md5('item' || g)::uuid, g * 1.5 FROM generate_series(1, {rows}) g")


def item_rows(url: str) -> dict[str, Decimal]:
    return {str(i): Decimal(str(a)) for i, a in db_exec(url, "SELECT id, amount FROM items")}


def window_counts(url: str, tasks: dict[str, Any]) -> dict[str, int]:
    """Per keyset window (lo, hi], the source's count — straight from PostgreSQL."""
    out = {}
    for k, t in tasks.items():
        where = " AND ".join([*([f"id > '{t.start_key}'"] if t.start_key else []),
                              *([f"id <= '{t.end_key}'"] if t.end_key else [])]) or "TRUE"
        out[k] = int(db_exec(url, f"SELECT count(*) FROM items WHERE {where}")[0][0])
    return out


def test_new_uuid_keys_inside_old_keyset_windows_re_request_exactly_those_windows_and_reconcile_goes_red(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    create_items(pg_url, 2000)
    target = Target("local", tmp_path)
    block = {"name": EXPORT, "table": "items", "mode": "chunked", "chunk_by_key": "id", "chunk_size": 400,
             "format": "parquet", "destination": target.destination(EXPORT)}
    config = orders_config(tmp_path, pg_url, [block])
    defs = build_definitions(config)
    planner = Planner(defs, instance)
    planner.publish_everything()
    _, tasks = chunk_run(config)
    assert len(tasks) == 6  # five boundaries (every 400th key) → six windows, the last one open
    before = window_counts(pg_url, tasks)

    def no_scan(*args: Any, **kw: Any) -> list[str]:
        raise AssertionError("the keyset boundaries were sampled again")

    # From here on the windows come from the checkpoint: no tick, partition run, reconcile
    # check or manifest scans the whole key again to sample boundaries it would not use.
    monkeypatch.setattr("rivet_core.chunks.layout.sample_boundaries", no_scan)

    # 500 new random keys: they land all over the key space, i.e. inside old windows.
    rng = random.Random(14)
    values = ", ".join(f"('{uuid.UUID(int=rng.getrandbits(128))}', {i})" for i in range(500))
    db_exec(pg_url, f"INSERT INTO items VALUES {values}")
    after = window_counts(pg_url, tasks)
    grown = sorted(k for k in tasks if after[k] != before[k])
    assert len(grown) >= 4 and sum(after.values()) == 2500  # most windows got keys

    changed = planner.tick()
    assert requested(changed) == grown  # exactly the windows that got keys, in window order
    assert jobs(changed).count(RECONCILE_JOB) == 1 and MANIFEST_JOB not in jobs(changed)
    folded = PUBLISH_JOB in jobs(changed)  # the grown windows make one batch when they are consecutive

    # The reconcile check, requested with them, is red while the published data misses rows.
    [check_run] = planner.run(changed, only=RECONCILE_JOB)
    red = check_evaluations(check_run)["reconcile"]
    assert not red.passed and red.metadata["mismatches"].value == len(grown)
    assert all(k in red.metadata["mismatched_partitions"].value for k in grown)
    assert red.metadata["source_rows"].value - red.metadata["exported_rows"].value == 500

    [last] = planner.run(changed, only=CHUNK_JOB)[-1:]
    if not folded:  # several batches: the manifest comes on its own after the last
        ready = planner.tick()
        assert jobs(ready) == [MANIFEST_JOB]
        [last] = planner.run(ready)
    checks = check_evaluations(last)
    assert checks["reconcile"].passed and checks["manifest_verified"].passed
    assert_quiet(planner.tick())

    manifest, table = published(target)
    ids = [str(i) for i in table.column("id").to_pylist()]
    assert len(ids) == len(set(ids)) == manifest["row_count"] == 2500  # each key once
    exported = dict(zip(ids, (Decimal(str(a)) for a in table.column("amount").to_pylist()), strict=True))
    assert exported == item_rows(pg_url)


# ------------------------------------------------------------------------------ without change_column
def test_without_change_column_the_refresh_cron_re_exports_every_window_and_reconcile_catches_missing_rows(
        orders_pg: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    db_exec(orders_pg, "DELETE FROM orders WHERE id IN (210, 211, 212) OR id >= 550")
    target = Target("local", tmp_path)
    config = orders_chunked(target, orders_pg, dagster={"refresh": "0 0 1 1 *"})  # yearly: only when told
    defs = build_definitions(config)
    planner = Planner(defs, instance)
    first_tick_requests = planner.publish_everything().run_requests
    baseline = export_state(planner.cursor)["refresh"]  # the first tick only noted the latest cron tick
    assert baseline > 0

    # Rows missing from the published window 200..299: its count moved, so the planner re-requests
    # it — and the reconcile check, which fails naming the partition.
    db_exec(orders_pg, """INSERT INTO orders VALUES
                          (210, 'c1', 1.00, NULL, '2026-03-02', '2026-03-02'),
                          (211, 'c2', 2.00, NULL, '2026-03-02', '2026-03-02'),
                          (212, 'c3', 3.00, NULL, '2026-03-02', '2026-03-02')""")
    missing = planner.tick()
    assert requested(missing) == [key(200)] and jobs(missing) == sorted([PUBLISH_JOB, RECONCILE_JOB])
    [check_run] = planner.run(missing, only=RECONCILE_JOB)
    red = check_evaluations(check_run)["reconcile"]
    assert not red.passed and red.severity == dg.AssetCheckSeverity.ERROR
    assert key(200) in red.description and "| 100 | 97 |" in red.metadata["mismatched_partitions"].value
    planner.run(missing, only=CHUNK_JOB)  # the window and the manifest
    assert id_amounts(published(target)[1]) == source_rows(orders_pg)
    assert_quiet(planner.tick())

    # An in-place UPDATE keeps every count: without a change_column no tick can see it …
    db_exec(orders_pg, "UPDATE orders SET amount = 777.77 WHERE id = 7")
    assert_quiet(planner.tick())
    assert id_amounts(published(target)[1])[7] != Decimal("777.77")

    # … until the refresh cron ticks: then every window is requested, once.
    stale_cursor = with_export_state(planner.cursor, refresh=baseline - 86400)
    refresh = planner.tick(cursor=stale_cursor)
    assert requested(refresh) == KEYS and jobs(refresh) == [PUBLISH_JOB]  # every window, then the manifest
    fresh_keys = {r.run_key for r in first_tick_requests}
    assert len(refresh.run_requests) == 1 and refresh.run_requests[0].run_key not in fresh_keys
    assert export_state(planner.cursor)["refresh"] == baseline  # this tick is handled
    _, tasks = chunk_run(config)
    assert {tasks[k].status for k in KEYS} == {"pending"}  # the manifest waits for all of them
    still = planner.tick()
    assert not requested(still) and MANIFEST_JOB not in jobs(still)  # not again, and no premature manifest
    planner.run(refresh)
    manifest, table = published(target)
    assert id_amounts(table) == source_rows(orders_pg) and id_amounts(table)[7] == Decimal("777.77")
    assert manifest["row_count"] == 550
    assert_quiet(planner.tick())


def test_windows_materialized_in_one_ranged_run_record_one_fingerprint_each_and_an_emptied_window_is_re_exported(
        orders_pg: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    db_exec(orders_pg, "DELETE FROM orders WHERE id >= 550")
    target = Target("local", tmp_path)
    config = orders_chunked(target, orders_pg, change_column="updated_at")
    defs = build_definitions(config)
    planner = Planner(defs, instance)
    assert requested(planner.tick(), PUBLISH_JOB) == KEYS
    ranged = run_job(defs, CHUNK_JOB, instance, tags={"dagster/asset_partition_range_start": KEYS[0],
                                                      "dagster/asset_partition_range_end": KEYS[-1]})
    assert ranged.success
    recorded = recorded_fingerprints(instance, dg.AssetKey(EXPORT))
    assert [recorded[chunk_window_key(k)].split("@")[0] for k in KEYS] == ["100"] * 5 + ["50"]  # per window
    ready = planner.tick()
    assert jobs(ready) == [MANIFEST_JOB]  # nothing looks changed
    planner.run(ready)
    assert_quiet(planner.tick())

    db_exec(orders_pg, "DELETE FROM orders WHERE id BETWEEN 300 AND 399")  # window 300 is now empty
    emptied = planner.tick()
    assert requested(emptied) == [key(300)] and jobs(emptied) == sorted([PUBLISH_JOB, RECONCILE_JOB])
    planner.run(emptied, only=CHUNK_JOB)  # the window and the manifest
    manifest, table = published(target)
    assert id_amounts(table) == source_rows(orders_pg) and manifest["row_count"] == 450
    assert not any(300 <= i <= 399 for i in table.column("id").to_pylist())
    assert_quiet(planner.tick())


def test_change_column_and_refresh_are_refused_at_load_outside_a_chunked_export_or_with_a_bad_cron(
        tmp_path: Path) -> None:
    url = "postgresql://rivet@127.0.0.1:1/shopdb"  # loading a config never touches the source
    full = export_block("orders_full", "full", {"type": "local", "path": "out"}, change_column="updated_at",
                        dagster={"refresh": "0 2 * * 0"})
    with pytest.raises(api.ConfigError) as info:
        load_config(orders_config(tmp_path, url, [full]))
    assert "`change_column` requires `mode: chunked` (mode is full)" in str(info.value)
    assert "dagster.refresh re-exports the windows of a chunked export (mode is full)" in str(info.value)
    chunked = export_block(EXPORT, "chunked", {"type": "local", "path": "out"}, chunk_column="id",
                           dagster={"refresh": "weekly"})
    with pytest.raises(api.ConfigError, match="refresh 'weekly' is not a cron expression"):
        load_config(orders_config(tmp_path, url, [chunked]))
    chunked["dagster"] = {"refresh": "99 * * * *"}  # five fields, but no minute 99: refused by the code location
    with pytest.raises(api.ConfigError, match="dagster.refresh '99 \\* \\* \\* \\*' is not a valid cron"):
        build_definitions(orders_config(tmp_path, url, [chunked]))
    chunked["dagster"] = {"refresh": "@weekly"}
    chunked["change_column"] = "updated_at"
    loaded = load_config(orders_config(tmp_path, url, [chunked])).export(EXPORT)
    assert (loaded.change_column, loaded.dagster.refresh) == ("updated_at", "@weekly")


def test_day_windows_with_a_change_column_re_export_the_day_whose_row_was_updated(
        orders_pg: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    target = Target("local", tmp_path)
    block = export_block(EXPORT, "chunked", target.destination(EXPORT), chunk_column="created_at", chunk_by_days=1,
                         change_column="updated_at")
    defs = build_definitions(orders_config(tmp_path, orders_pg, [block]))
    planner = Planner(defs, instance)
    planner.publish_everything()
    days = instance.get_dynamic_partitions(PARTITIONS)
    assert days == [f"2026-03-0{d}_2026-03-0{d + 1}" for d in range(1, 6)]  # 600 rows, 144 a day

    db_exec(orders_pg, "UPDATE orders SET amount = 1.23, updated_at = now() WHERE id = 300")  # on March 3rd
    changed = planner.tick()
    assert [(request_job(r), r.partition_key) for r in changed.run_requests] == [(PUBLISH_JOB, "2026-03-03_2026-03-04")]
    planner.run(changed)
    assert_quiet(planner.tick())
    manifest, table = published(target)
    assert id_amounts(table) == source_rows(orders_pg) and id_amounts(table)[300] == Decimal("1.23")
    assert manifest["row_count"] == 600
