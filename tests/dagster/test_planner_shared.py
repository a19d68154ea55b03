"""The chunked exports of one config share one planner sensor (issue 34).

`rivet_chunk_planner` plans every chunked export of its rivet.yaml in each evaluation; each
export keeps its own state in the sensor's cursor (`{"exports": {<export>: …}}`), its own
run keys, and its runs select its own assets on Dagster's implicit asset job. The sensor is
driven as the daemon drives it (cursor threaded, partition requests applied; each run
request executed in-process as the run it asks for). Oracle: the source table read with
psycopg, and each export's published parts re-read with pyarrow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from rivet_dagster import build_definitions
from tests.dagster.support import (
    DAGSTER_NOISE,
    Target,
    create_orders,
    drop_planned_at,
    export_block,
    export_state,
    id_amounts,
    orders_config,
    request_job,
    run_job,
)
from tests.dagster.test_chunk_freshness import amounts

pytestmark = [pytest.mark.filterwarnings(w) for w in DAGSTER_NOISE]

EXPORTS = ("orders_a", "orders_b")


def tick(defs: dg.Definitions, instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult:
    """One evaluation a full planner interval after the last, partition requests applied."""
    context = dg.build_sensor_context(instance=instance, definitions=defs, cursor=drop_planned_at(cursor))
    result = defs.resolve_sensor_def("rivet_chunk_planner")(context)
    assert isinstance(result, dg.SensorResult)
    for request in result.dynamic_partitions_requests or []:
        assert isinstance(request, dg.AddDynamicPartitionsRequest)
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return result


def run_all(defs: dg.Definitions, instance: dg.DagsterInstance, result: dg.SensorResult) -> None:
    for request in result.run_requests or []:
        kw: dict[str, Any] = {"tags": dict(request.tags)}
        if request.partition_key is not None:
            kw["partition_key"] = request.partition_key
        assert run_job(defs, request_job(request), instance, **kw).success, request


def two_chunked_exports(tmp_path: Path, url: str, tables: tuple[str, str] = ("orders", "orders"),
                        **top: Any) -> tuple[Target, Path]:
    target = Target("local", tmp_path)
    return target, orders_config(tmp_path, url, [
        export_block(name, "chunked", target.destination(name), chunk_column="id", chunk_size=size, table=table)
        for name, size, table in zip(EXPORTS, (100, 250), tables, strict=True)], **top)


def test_two_chunked_exports_of_one_config_share_one_planner_each_with_its_own_state_and_both_publish(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    create_orders(pg_url, rows=550)
    target, config = two_chunked_exports(tmp_path, pg_url)
    defs = build_definitions(config)
    assert [s.name for s in defs.get_repository_def().sensor_defs] == ["rivet_chunk_planner"]

    first = tick(defs, instance, None)
    by_export = {name: [r for r in first.run_requests or [] if r.tags["rivet/export"] == name] for name in EXPORTS}
    # Each export's windows are its own partitions, its runs select only its own assets.
    assert {r.partitions_def_name: len(r.partition_keys) for r in first.dynamic_partitions_requests} == {
        "orders_a_chunks": 6, "orders_b_chunks": 3}
    for name, requests in by_export.items():
        assert requests and all(request_job(r) == f"{name}_publish_job" for r in requests), name
        assert all(set(r.asset_selection) == {dg.AssetKey(name), dg.AssetKey(f"{name}_manifest")} for r in requests)
    states = {name: export_state(first.cursor, name) for name in EXPORTS}
    assert states["orders_a"]["run"].startswith("orders_a_") and states["orders_b"]["run"].startswith("orders_b_")
    assert len({r.run_key for r in first.run_requests}) == len(first.run_requests)  # no key shared

    run_all(defs, instance, first)
    quiet = tick(defs, instance, first.cursor)
    assert not quiet.run_requests and not quiet.dynamic_partitions_requests
    assert "orders_a: nothing changed" in str(quiet.skip_reason) and "orders_b: nothing changed" in str(quiet.skip_reason)
    source = amounts(pg_url)
    for name in EXPORTS:
        view = target.view(name)
        manifest = view.current_manifest()
        assert manifest is not None and manifest["status"] == "success", name
        assert id_amounts(view.parts_table([manifest])) == source, name  # every id once, the source's values


def test_an_export_whose_plan_fails_leaves_the_other_planned_and_keeps_its_own_state(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """`orders_b` reads a table that is gone: its plan raises, is logged, and keeps its
    state; `orders_a` is planned and requested as if alone."""
    create_orders(pg_url, rows=550)
    _, config = two_chunked_exports(tmp_path, pg_url, tables=("orders", "missing_orders"))
    defs = build_definitions(config)
    first = tick(defs, instance, None)
    assert {r.tags["rivet/export"] for r in first.run_requests or []} == {"orders_a"}
    assert export_state(first.cursor, "orders_b") == {}  # untouched: planned again next tick
    assert export_state(first.cursor, "orders_a")["run"].startswith("orders_a_")


def test_with_jobs_per_export_the_shared_planner_requests_each_exports_own_jobs(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    create_orders(pg_url, rows=550)
    target, config = two_chunked_exports(tmp_path, pg_url, dagster={"jobs": "per_export"})
    defs = build_definitions(config)
    first = tick(defs, instance, None)
    assert {r.job_name for r in first.run_requests} == {"orders_a_publish_job", "orders_b_publish_job"}
    assert all(r.asset_selection is None for r in first.run_requests)
    run_all(defs, instance, first)
    for name in EXPORTS:
        manifest = target.view(name).current_manifest()
        assert manifest is not None and manifest["row_count"] == 550, name
