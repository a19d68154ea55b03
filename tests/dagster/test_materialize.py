"""Materialize full, incremental and daily exports against real PostgreSQL, through
`execute_in_process` on a throwaway instance — once to local disk, once to the real S3
server — and compare what landed (re-read with pyarrow / boto3) with the source.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import dagster as dg
import xxhash

from rivet_dagster import build_definitions
from tests.dagster.support import (
    ROWS,
    Target,
    day_where,
    export_block,
    id_amounts,
    materialization,
    meta,
    orders_config,
    run_job,
    source_rows,
)
from tests.helpers import db_exec


def defs_for(target: Target, url: str, name: str, mode: str, **extra: Any) -> dg.Definitions:
    return build_definitions(orders_config(target.tmp, url, [export_block(name, mode, target.destination(name),
                                                                          **extra)]))


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_a_full_export_publishes_every_source_row_and_reports_it_in_the_materialization(
        orders_pg: str, target: Target, instance: dg.DagsterInstance) -> None:
    defs = defs_for(target, orders_pg, "orders_full", "full")
    result = run_job(defs, "orders_full_job", instance)
    assert result.success

    view = target.view("orders_full")
    manifest = view.current_manifest()
    assert manifest is not None and manifest["status"] == "success"
    table = view.parts_table([manifest])
    assert id_amounts(table) == source_rows(orders_pg)
    assert "_SUCCESS" in view.keys()

    mat = materialization(result)
    m = meta(mat)
    assert m["dagster/row_count"] == m["rows"] == table.num_rows == ROWS
    assert [c.name for c in m["dagster/column_schema"].columns] == table.column_names
    assert m["destination"] == view.uri
    assert m["rivet_run_id"] == manifest["run_id"]
    assert manifest["orchestrator_run_id"] == result.run_id
    # the deprecated key, still written for one release (docs/manifest.md "Deprecated keys")
    assert (manifest["orchestrator"], manifest["dagster_run_id"]) == ("Dagster", result.run_id)
    sizes = view.keys()
    assert m["parts"] == len(manifest["parts"]) >= 1
    assert m["bytes"] == sum(sizes[p["path"]] for p in manifest["parts"])
    # Typed numbers, so the asset's Plots tab charts them across materializations.
    for key in ("dagster/row_count", "rows", "bytes", "parts"):
        assert isinstance(mat.metadata[key], dg.IntMetadataValue), key
    for key in ("duration_s", "rows_per_s"):
        assert isinstance(mat.metadata[key], dg.FloatMetadataValue), key
    report = json.loads(Path(m["run_report_path"]).with_name("summary.json").read_text())
    assert m["duration_s"] == report["duration_ms"] / 1000 > 0
    assert m["rows_per_s"] == round(ROWS / m["duration_s"], 1)

    # The parts table: one row per part the manifest lists, each checked against the re-read file.
    assert isinstance(mat.metadata["parts_table"], dg.TableMetadataValue)
    records = [r.data for r in m["parts_table"].records]
    assert [r["file"] for r in records] == [p["path"] for p in manifest["parts"]]
    for r in records:
        data = view.read(r["file"])
        assert r["bytes"] == len(data) == sizes[r["file"]]
        assert r["rows"] == view.read_part(r["file"]).num_rows
        assert r["checksum"] == "xxh3:" + xxhash.xxh3_64(data).hexdigest()
    assert sum(r["rows"] for r in records) == ROWS

    # The run report, as markdown, is the one the engine wrote for this run.
    assert isinstance(mat.metadata["run_report"], dg.MarkdownMetadataValue)
    assert m["run_report"] == Path(m["run_report_path"]).read_text()
    assert f"# Rivet run: `{manifest['run_id']}`" in m["run_report"] and "**SUCCESS**" in m["run_report"]
    assert (report["run_id"], report["orchestrator_run_id"]) == (manifest["run_id"], result.run_id)
    assert report["dagster_run_id"] == result.run_id


def test_an_incremental_export_materialized_twice_publishes_only_the_new_rows_the_second_time(
        orders_pg: str, target: Target, instance: dg.DagsterInstance) -> None:
    defs = defs_for(target, orders_pg, "orders_inc", "incremental")
    view = target.view("orders_inc")

    first = run_job(defs, "orders_inc_job", instance)
    assert first.success
    m1 = meta(materialization(first))
    high1 = db_exec(orders_pg, "SELECT max(updated_at) FROM orders")[0][0]
    assert ts(m1["cursor_high"]) == high1
    assert m1["dagster/row_count"] == ROWS

    db_exec(orders_pg,
            """INSERT INTO orders SELECT g, 'new', g + 0.5, NULL, timestamp '2026-04-01' + g * interval '1 minute',
                                         timestamp '2026-04-01' + g * interval '1 minute'
               FROM generate_series(1000, 1024) g""",
            "UPDATE orders SET amount = 4242.42, updated_at = timestamp '2026-04-02' WHERE id = 7")
    second = run_job(defs, "orders_inc_job", instance)
    assert second.success
    m2 = meta(materialization(second))

    current = view.current_manifest()
    assert current["orchestrator_run_id"] == second.run_id and current["run_id"] == m2["rivet_run_id"]
    new_part_rows = id_amounts(view.parts_table([current]))
    assert new_part_rows == source_rows(orders_pg, f"updated_at > '{high1.isoformat()}'")
    assert set(new_part_rows) == set(range(1000, 1025)) | {7}
    assert m2["rows"] == len(new_part_rows)
    assert m2["dagster/row_count"] == ROWS + len(new_part_rows)  # the dataset: every run's rows (id 7 twice)
    assert ts(m2["cursor_low"]) == high1
    assert ts(m2["cursor_high"]) == db_exec(orders_pg, "SELECT max(updated_at) FROM orders")[0][0]

    manifests = view.success_manifests()
    assert {m["orchestrator_run_id"] for m in manifests} == {first.run_id, second.run_id}
    everything = view.parts_table(manifests)
    assert set(everything.column("id").to_pylist()) == set(source_rows(orders_pg))
    assert everything.num_rows == ROWS + 25 + 1  # id 7 was delivered again after its update


def test_a_daily_export_writes_each_partition_to_its_own_prefix_and_a_rerun_replaces_that_day(
        orders_pg: str, target: Target, instance: dg.DagsterInstance) -> None:
    defs = defs_for(target, orders_pg, "orders_daily", "time_window")
    view = target.view("orders_daily")
    days = ["2026-03-01", "2026-03-02", "2026-03-04"]
    results = {}
    for day in days:
        results[day] = run_job(defs, "orders_daily_job", instance, partition_key=day)
        assert results[day].success, day
    replaced_parts = view.data_keys("created_at=2026-03-02/")
    assert len(replaced_parts) == 1

    # The day changes at the source (a late row, a deleted row), then it is re-materialized.
    db_exec(orders_pg, "INSERT INTO orders VALUES (5000, 'late', 1.23, 'late', '2026-03-02 23:59:59', now())",
            "DELETE FROM orders WHERE id = 150")
    results["2026-03-02"] = run_job(defs, "orders_daily_job", instance, partition_key="2026-03-02")
    assert results["2026-03-02"].success

    assert {k.split("/")[0] for k in view.keys()} == {f"created_at={d}" for d in days}
    for day in days:
        sub = f"created_at={day}/"
        manifest = view.current_manifest(sub)
        assert manifest["status"] == "success" and manifest["orchestrator_run_id"] == results[day].run_id, day
        expected = source_rows(orders_pg, day_where(day))
        assert id_amounts(view.parts_table([manifest], sub)) == expected, day
        # Only the current parts are visible at the prefix: superseded ones were moved aside.
        assert view.data_keys(sub) == sorted(p["path"] for p in manifest["parts"]), day
        # Every success manifest left at the prefix describes the current day (none claims old data).
        assert id_amounts(view.parts_table(view.success_manifests(sub), sub)) == expected, day
        m = meta(materialization(results[day]))
        assert m["dagster/partition_row_count"] == m["rows"] == len(expected), day
        assert "dagster/row_count" not in m, "a partition's rows are not the asset's size"
        assert materialization(results[day]).partition == day
        assert m["destination"] == view.uri + sub
        report = json.loads(Path(m["run_report_path"]).with_name("summary.json").read_text())
        assert (report["orchestrator_run_id"], report["partition_key"]) == (results[day].run_id, day)

    ids = {d: set(source_rows(orders_pg, day_where(d))) for d in days}
    assert 144 in ids["2026-03-02"] and 143 in ids["2026-03-01"]  # the midnight row belongs to its day
    assert 5000 in ids["2026-03-02"] and 150 not in ids["2026-03-02"]
    keys = view.keys()
    quarantined = [k for k in keys if "/_quarantine/" in k and k.endswith("/" + replaced_parts[0])]
    assert quarantined and quarantined[0].startswith("created_at=2026-03-02/"), sorted(keys)

    asset = dg.AssetKey("orders_daily")
    assert instance.get_materialized_partitions(asset) == set(days)
