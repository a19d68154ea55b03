"""Chunked exports as Dagster partitions, against real PostgreSQL (issue 4 item 6).

The source is `orders` with ids 0..549 and `chunk_size: 100`, so there are six grid windows
`id_…000-…099` … `id_…500-…599`, the last one half full. `build_sensor_context` does not
apply dynamic-partition requests, so each test applies them to the instance itself, the way
the daemon would, before launching runs. Runs go through `execute_in_process`; ranges of
partitions use Dagster's range tags (insertion order, which the planner keeps ascending).

The oracle re-reads the parts the current `manifest.json` lists (never the tool's counters)
and compares id → amount with the source, asserting each id appears once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from rivet_core.config import load_config
from rivet_core.state import StateStore
from rivet_dagster import build_definitions
from rivet_dagster.partition_keys import chunk_partition_key, chunk_window_key
from tests.dagster.support import (
    Target,
    check_evaluations,
    check_only_job,
    create_orders,
    drop_planned_at,
    export_block,
    id_amounts,
    materialization,
    meta,
    orders_config,
    request_job,
    run_job,
    source_rows,
    with_jobs,
)
from tests.helpers import REPO, db_exec

EXPORT = "orders_chunked"
PARTITIONS = f"{EXPORT}_chunks"
CHUNK_JOB, MANIFEST_JOB = f"{EXPORT}_job", f"{EXPORT}_manifest_job"
PLANNER = "rivet_chunk_planner"  # the config's one planner sensor (rivet.yaml)
PUBLISH_JOB = f"{EXPORT}_publish_job"  # a batch holding every window still to export, and the manifest
INITIAL_ROWS = 550


def key(lo: int) -> str:
    """The readable partition key of the window [lo, lo + 99] (rivet_dagster/partitions.py)."""
    return f"id_{lo}-{lo + 99}"


INITIAL_KEYS = [key(lo) for lo in range(0, 600, 100)]


@pytest.fixture
def orders_550(pg_url: str) -> str:
    create_orders(pg_url, rows=INITIAL_ROWS)
    return pg_url


def chunked_config(target: Target, url: str, **dagster: Any) -> Path:
    block = export_block(EXPORT, "chunked", target.destination(EXPORT), chunk_column="id", chunk_size=100)
    if dagster:
        block["dagster"] = dagster
    return orders_config(target.tmp, url, [block])


#: The planner's cursor per Dagster instance (one instance per test), threaded from tick to
#: tick as the daemon does.
_cursors: dict[int, str | None] = {}


@pytest.fixture(autouse=True)
def _fresh_cursors() -> None:
    _cursors.clear()


def tick(defs: dg.Definitions, instance: dg.DagsterInstance) -> dg.SensorResult:
    """One planner evaluation a full planner interval after the last (the cursor's `planned_at`
    dropped); its cursor and partition requests are applied like the daemon does."""
    sensor = defs.resolve_sensor_def(PLANNER)
    cursor = _cursors.get(id(instance))
    cursor = drop_planned_at(cursor)
    result = sensor(dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor))
    assert isinstance(result, dg.SensorResult)
    _cursors[id(instance)] = result.cursor
    for request in result.dynamic_partitions_requests or []:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(PARTITIONS, list(request.partition_keys))
        else:
            for k in request.partition_keys:
                instance.delete_dynamic_partition(PARTITIONS, k)
    return result


def added_keys(result: dg.SensorResult) -> list[str]:
    return [k for r in result.dynamic_partitions_requests or [] if isinstance(r, dg.AddDynamicPartitionsRequest)
            for k in r.partition_keys]


def requested(result: dg.SensorResult, job: str | None = None) -> list[str | None]:
    """The windows the tick's runs of `job` (default: CHUNK_JOB and PUBLISH_JOB) export, in
    request order (a ranged run names its windows in tag `rivet/windows`)."""
    return [k for r in result.run_requests or [] if request_job(r) in ((job,) if job else (CHUNK_JOB, PUBLISH_JOB))
            for k in (r.tags["rivet/windows"].split(",") if "rivet/windows" in r.tags else [r.partition_key])]


def run_key_prefix(result: dg.SensorResult) -> str:
    return result.run_requests[0].tags["rivet/chunk_run"]


def materialize(defs: dg.Definitions, instance: dg.DagsterInstance, first: str, last: str | None = None) -> Any:
    """One run of the chunk job over the partitions first..last (insertion order)."""
    if last is None or last == first:
        return run_job(defs, CHUNK_JOB, instance, partition_key=first)
    return run_job(defs, CHUNK_JOB, instance, tags={"dagster/asset_partition_range_start": first,
                                                    "dagster/asset_partition_range_end": last})


def checkpoint(config: Path) -> tuple[Any, dict[str, Any]]:
    """(latest chunk run, partition key → task) from the state store."""
    store = StateStore.open(load_config(config).config_path)
    try:
        run = store.get_latest_chunk_run(EXPORT)
        assert run is not None
        return run, {chunk_partition_key(t.window_key): t for t in store.list_chunk_tasks(run.run_id)}
    finally:
        store.close()


def failure_of(result: Any) -> tuple[str, dict[str, Any]]:
    """(description, metadata) of the run's step failure."""
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failures, "the run did not fail a step"
    data = failures[0].step_failure_data.user_failure_data
    return data.description or "", {k: v.value for k, v in data.metadata.items()}


def assert_destination_equals_source(target: Target, url: str) -> dict[str, Any]:
    view = target.view(EXPORT)
    manifest = view.current_manifest()
    assert manifest is not None and manifest["status"] == "success"
    assert id_amounts(view.parts_table([manifest])) == source_rows(url)  # each id exactly once
    # Only the listed parts are visible at the prefix: crashed and superseded attempts moved aside.
    assert view.data_keys() == sorted(p["path"] for p in manifest["parts"])
    assert "_SUCCESS" in view.keys()
    return manifest


# ------------------------------------------------------------------------------ definitions
def test_a_chunked_export_is_a_dynamically_partitioned_asset_plus_a_manifest_asset_with_its_checks(
        tmp_path: Path) -> None:
    target = Target("local", tmp_path)
    url = "postgresql://rivet@127.0.0.1:1/shopdb"  # building definitions never touches the source
    defs = build_definitions(chunked_config(target, url))
    dg.Definitions.validate_loadable(defs)
    chunks, manifest = dg.AssetKey(EXPORT), dg.AssetKey(f"{EXPORT}_manifest")
    assert set(defs.resolve_all_asset_keys()) == {chunks, manifest, dg.AssetKey(["postgres", "shopdb", "public", "orders"])}

    chunk_asset = defs.resolve_assets_def(chunks)
    spec = next(iter(chunk_asset.specs))
    assert isinstance(spec.partitions_def, dg.DynamicPartitionsDefinition) and spec.partitions_def.name == PARTITIONS
    assert chunk_asset.backfill_policy == dg.BackfillPolicy.multi_run(max_partitions_per_run=10)
    assert chunk_asset.op.pool == "source_shopdb"
    manifest_spec = next(iter(defs.resolve_assets_def(manifest).specs))
    # In the user's words (issue 34): what a partition is, who adds them, when readers see it —
    # no partitions-definition name and no invariant number.
    assert "one per chunk of the table (up to 100 values of `id`)" in spec.description
    assert f"`{PLANNER}` sensor" in spec.description and f"`{EXPORT}_manifest`" in spec.description
    for description in (spec.description, manifest_spec.description):
        assert PARTITIONS not in description and "(I6)" not in description and "checkpoint" not in description
    assert manifest_spec.partitions_def is None and {d.asset_key for d in manifest_spec.deps} == {chunks}
    checks = {(c.asset_key, c.name) for cd in defs.asset_checks for c in cd.check_specs}
    assert {(manifest, "manifest_verified"), (manifest, "reconcile")} <= checks

    planner = defs.resolve_sensor_def(PLANNER)
    assert planner.default_status == dg.DefaultSensorStatus.RUNNING  # the export needs it (issue 34)
    (tmp_path / "stopped").mkdir()
    stopped = build_definitions(chunked_config(Target("local", tmp_path / "stopped"), url,
                                               planner_status="STOPPED"))
    assert stopped.resolve_sensor_def(PLANNER).default_status == dg.DefaultSensorStatus.STOPPED


# ------------------------------------------------------------------------------ planner
def test_the_planner_registers_every_window_in_ascending_order_and_requests_them_in_ranged_runs(
        orders_550: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    config = chunked_config(Target("local", tmp_path), orders_550)
    defs = build_definitions(config)

    first = tick(defs, instance)
    assert added_keys(first) == INITIAL_KEYS == sorted(INITIAL_KEYS)
    assert instance.get_dynamic_partitions(PARTITIONS) == INITIAL_KEYS  # insertion order = window order
    assert requested(first) == INITIAL_KEYS and requested(first, MANIFEST_JOB) == []
    # Six consecutive windows, max_partitions_per_run 10: one ranged run, which publishes too.
    [batch] = first.run_requests
    assert request_job(batch) == PUBLISH_JOB
    assert (batch.tags["dagster/asset_partition_range_start"], batch.tags["dagster/asset_partition_range_end"]) == (
        INITIAL_KEYS[0], INITIAL_KEYS[-1]) and batch.partition_key is None
    run, tasks = checkpoint(config)
    assert run.status == "in_progress" and sorted(tasks) == INITIAL_KEYS
    assert {t.status for t in tasks.values()} == {"pending"}
    assert all(r.tags["rivet/chunk_run"] == run.run_id for r in first.run_requests)

    again = tick(defs, instance)  # nothing new: no registration, no request, the same chunk run
    assert not again.dynamic_partitions_requests and not again.run_requests
    assert "6 window(s) still to materialize" in str(again.skip_reason)
    assert checkpoint(config)[0].run_id == run.run_id


# ------------------------------------------------------------------------------ I6
def test_the_manifest_refuses_while_a_window_is_not_materialized_and_says_how_many(
        orders_550: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    target = Target("local", tmp_path)
    defs = build_definitions(chunked_config(target, orders_550))
    tick(defs, instance)
    assert materialize(defs, instance, INITIAL_KEYS[0], INITIAL_KEYS[3]).success

    refused = run_job(defs, MANIFEST_JOB, instance)
    assert not refused.success
    description, failure = failure_of(refused)
    assert "2 of 6 chunk window(s) not materialized" in description
    assert failure["missing_windows"] == 2 and failure["windows"] == 6
    assert INITIAL_KEYS[4] in failure["missing_keys"] and INITIAL_KEYS[5] in failure["missing_keys"]
    keys = target.view(EXPORT).keys()
    assert "manifest.json" not in keys and "_SUCCESS" not in keys  # nothing was published
    assert len(target.view(EXPORT).data_keys()) == 4  # the materialized windows' parts, unlisted yet


def test_the_manifest_refuses_a_window_whose_part_vanished_and_materializing_that_window_again_heals_it(
        orders_550: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    target = Target("local", tmp_path)
    config = chunked_config(target, orders_550)
    defs = build_definitions(config)
    tick(defs, instance)
    assert materialize(defs, instance, INITIAL_KEYS[0], INITIAL_KEYS[-1]).success
    view = target.view(EXPORT)
    view.delete(next(k for k in view.data_keys() if "_chunk4_" in k))

    refused = run_job(defs, MANIFEST_JOB, instance)
    description, failure = failure_of(refused)
    assert "1 of 6 chunk window(s) not materialized" in description and "missing or resized" in description
    assert failure["missing_keys"] == f"- `{INITIAL_KEYS[4]}`"
    assert checkpoint(config)[1][INITIAL_KEYS[4]].status == "pending"  # reset: it must be exported again
    assert materialize(defs, instance, INITIAL_KEYS[4]).success
    assert run_job(defs, MANIFEST_JOB, instance).success
    assert_destination_equals_source(target, orders_550)


# ------------------------------------------------------------------------------ crash + takeover
def test_a_crashed_partition_is_taken_over_by_its_next_materialization_and_the_manifest_lists_each_row_once(
        orders_550: str, tmp_path: Path, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    target = Target("local", tmp_path)
    config = chunked_config(target, orders_550)
    defs = build_definitions(config)
    tick(defs, instance)

    # One run over all six windows dies after window 3's part is recorded, before its task completes.
    monkeypatch.setenv("RIVET_TEST_ERROR_AT", "after_chunk_file:3")
    crashed = materialize(defs, instance, INITIAL_KEYS[0], INITIAL_KEYS[-1])
    assert not crashed.success
    _, tasks = checkpoint(config)
    assert [tasks[k].status for k in INITIAL_KEYS] == ["completed"] * 3 + ["running", "failed", "failed"]
    assert tasks[INITIAL_KEYS[3]].worker == crashed.run_id
    crashed_part = [k for k in target.view(EXPORT).data_keys() if "_chunk3_" in k]
    assert len(crashed_part) == 1  # durable and in file_log, but its window never completed

    # Window 4 fails again at its export (a pinned, non-transient failure) …
    monkeypatch.setenv("RIVET_TEST_ERROR_AT", "chunk_export:4")
    assert not materialize(defs, instance, INITIAL_KEYS[4]).success
    assert checkpoint(config)[1][INITIAL_KEYS[4]].status == "failed"
    monkeypatch.delenv("RIVET_TEST_ERROR_AT")
    # … then windows 3..5 are materialized again: 3 is taken over from the dead run, 4 gets a
    # fresh budget. Window 1, already done, is re-materialized on purpose (its old part is superseded).
    assert materialize(defs, instance, INITIAL_KEYS[3], INITIAL_KEYS[5]).success
    window1 = materialize(defs, instance, INITIAL_KEYS[1])
    assert window1.success
    run, tasks = checkpoint(config)
    assert {t.status for t in tasks.values()} == {"completed"}

    ready = tick(defs, instance)
    assert requested(ready) == [] and len(ready.run_requests) == 1
    assert request_job(ready.run_requests[0]) == MANIFEST_JOB

    finalized = run_job(defs, MANIFEST_JOB, instance)
    assert finalized.success
    checks = check_evaluations(finalized)
    assert checks["manifest_verified"].passed and checks["reconcile"].passed
    assert checks["reconcile"].metadata["matches"].value == 6

    manifest = assert_destination_equals_source(target, orders_550)
    assert manifest["row_count"] == INITIAL_ROWS and manifest["run_id"] == run.run_id
    assert manifest["orchestrator_run_id"] == finalized.run_id
    quarantined = [k for k in target.view(EXPORT).keys() if k.startswith(f"_quarantine/{run.run_id}/")]
    assert f"_quarantine/{run.run_id}/{crashed_part[0]}" in quarantined  # moved aside, never deleted
    assert len(quarantined) == 2  # the crashed attempt of window 3 and window 1's first attempt
    m = meta(materialization(finalized))
    assert m["dagster/row_count"] == INITIAL_ROWS and m["chunk_windows"] == 6
    # The window's own materialization: its part (the one the manifest lists), re-read.
    chunk_mat = materialization(window1)
    cm = meta(chunk_mat)
    [part] = [r.data for r in cm["parts_table"].records]
    view = target.view(EXPORT)
    assert part["file"] in [p["path"] for p in manifest["parts"]]
    assert part["rows"] == cm["rows"] == cm["dagster/partition_row_count"] == view.read_part(part["file"]).num_rows > 0
    assert part["bytes"] == cm["bytes"] == len(view.read(part["file"]))
    assert isinstance(chunk_mat.metadata["duration_s"], dg.FloatMetadataValue) and cm["duration_s"] > 0
    assert cm["rows_per_s"] == round(cm["rows"] / cm["duration_s"], 1)

    store = StateStore.open(load_config(config).config_path)
    try:
        assert store.get_chunk_run(run.run_id).status == "completed"
        assert store.get_run_status(run.run_id)["status"] == "success"
    finally:
        store.close()
    assert tick(defs, instance).skip_reason is not None  # finalized and nothing new: no request


# ------------------------------------------------------------------------------ growth
def test_when_the_table_grows_the_planner_requests_only_the_new_windows_and_the_partly_filled_last_one(
        orders_550: str, target: Target, instance: dg.DagsterInstance) -> None:
    config = chunked_config(target, orders_550)
    defs = build_definitions(config)
    tick(defs, instance)
    assert materialize(defs, instance, INITIAL_KEYS[0], INITIAL_KEYS[-1]).success
    assert run_job(defs, MANIFEST_JOB, instance).success
    first = target.view(EXPORT).current_manifest()
    last_part = next(p["path"] for p in first["parts"] if "_chunk5_" in p["path"])

    db_exec(orders_550, """INSERT INTO orders SELECT g, 'new', g + 0.25, NULL,
                               timestamp '2026-04-01' + g * interval '1 minute',
                               timestamp '2026-04-01' + g * interval '1 minute'
                           FROM generate_series(550, 779) g""")
    grown = tick(defs, instance)
    new = [key(600), key(700)]
    assert added_keys(grown) == new
    assert instance.get_dynamic_partitions(PARTITIONS) == INITIAL_KEYS + new
    assert requested(grown) == [key(500), *new]  # the half-full window 500..599 filled up
    [batch] = [r for r in grown.run_requests if request_job(r) == PUBLISH_JOB]  # 500 (refilled), 600, 700: one range
    # Run keys name windows by their core keys (the same whichever form a partition is registered in).
    assert batch.run_key.startswith(f"{run_key_prefix(grown)}:{chunk_window_key(key(500))}..{chunk_window_key(key(700))}:")
    # Requested once: window 500 is still short of the source until the run happens, yet the
    # next tick asks for nothing (the cursor remembers the request and the fill it saw).
    assert requested(tick(defs, instance)) == []
    run, tasks = checkpoint(config)
    assert run.status == "in_progress" and run.run_id != first["run_id"]
    assert [tasks[k].status for k in INITIAL_KEYS] == ["completed"] * 6  # carried: not exported again
    assert [tasks[k].status for k in new] == ["pending", "pending"]

    assert materialize(defs, instance, key(500), key(700)).success  # insertion order: 500, 600, 700
    ready = tick(defs, instance)
    assert [request_job(r) for r in ready.run_requests] == [MANIFEST_JOB]
    result = run_job(defs, MANIFEST_JOB, instance)
    assert result.success
    checks = check_evaluations(result)
    assert checks["manifest_verified"].passed and checks["reconcile"].passed

    manifest = assert_destination_equals_source(target, orders_550)
    assert manifest["row_count"] == 780 and len(manifest["parts"]) == 8
    keys = target.view(EXPORT).keys()
    # The refilled window's first part, listed by the previous manifest, was moved aside after the
    # new manifest landed — with that manifest's per-run copy, which still listed it.
    assert f"_quarantine/{run.run_id}/{last_part}" in keys and last_part not in keys
    assert f"_quarantine/{run.run_id}/manifest-{first['run_id']}.json" in keys
    assert tick(defs, instance).skip_reason is not None


# ------------------------------------------------------------------------------ after the manifest
def finalized(target: Target, url: str, instance: dg.DagsterInstance, *extra_assets: Any) -> dg.Definitions:
    """Every window materialized in one run, then `<export>_manifest`."""
    defs = build_definitions(chunked_config(target, url))
    if extra_assets:
        defs = with_jobs(defs, dg.define_asset_job("downstream", selection=list(extra_assets)),
                         assets=list(extra_assets))
    tick(defs, instance)
    assert materialize(defs, instance, INITIAL_KEYS[0], INITIAL_KEYS[-1]).success
    assert run_job(defs, MANIFEST_JOB, instance).success
    return defs


def test_the_reconcile_check_fails_naming_the_partition_whose_source_rows_changed(
        orders_550: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    defs = with_jobs(finalized(Target("local", tmp_path), orders_550, instance),
                     check_only_job("reconcile_only", dg.AssetKey(f"{EXPORT}_manifest"), "reconcile"))
    db_exec(orders_550, "DELETE FROM orders WHERE id IN (210, 211, 212)")
    result = run_job(defs, "reconcile_only", instance)
    check = check_evaluations(result)["reconcile"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    values = {k: v.value for k, v in check.metadata.items()}
    assert (values["mismatches"], values["matches"]) == (1, 5)
    assert key(200) in check.description and key(200) in values["mismatched_partitions"]
    assert "| 97 | 100 |" in values["mismatched_partitions"]


def test_a_downstream_asset_reads_the_whole_chunked_export_through_its_manifest_asset(
        orders_550: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    @dg.asset(ins={"orders": dg.AssetIn(key=dg.AssetKey(f"{EXPORT}_manifest"))})
    def orders_copy(orders: pa.Table) -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={"rows": orders.num_rows,
                                              "ids": len(set(orders.column("id").to_pylist()))})

    defs = finalized(Target("local", tmp_path), orders_550, instance, orders_copy)
    result = run_job(defs, "downstream", instance)
    assert result.success
    assert meta(materialization(result)) == {"rows": INITIAL_ROWS, "ids": INITIAL_ROWS}


# ------------------------------------------------------------------------------ a real kill
def test_a_partition_run_killed_mid_commit_keeps_its_window_until_dagster_says_the_run_is_over(
        orders_550: str, tmp_path: Path) -> None:
    """`dagster asset materialize --partition` in a subprocess, SIGKILLed by
    RIVET_TEST_PANIC_AT after window 2's part landed: the task stays `running` for that run,
    which Dagster still shows as STARTED, so a new materialization refuses to take it over;
    once the run is marked failed (run monitoring, or "terminate" in the UI) it does."""
    target = Target("local", tmp_path)
    config = chunked_config(target, orders_550)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    defs = build_definitions(config)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        tick(defs, instance)
        env = {**os.environ, "RIVET_CONFIG": str(config), "DAGSTER_HOME": str(home),
               "RIVET_TEST_PANIC_AT": "after_chunk_file:2"}
        killed = subprocess.run(
            [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "rivet_dagster.definitions",
             "--select", EXPORT, "--partition", INITIAL_KEYS[2], "--config-json",
             json.dumps({"execution": {"config": {"in_process": {}}}})],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
        dead = instance.get_runs()[0]
        assert dead.status == dg.DagsterRunStatus.STARTED  # nobody told Dagster the worker died
        task = checkpoint(config)[1][INITIAL_KEYS[2]]
        assert (task.status, task.worker) == ("running", dead.run_id)

        refused = materialize(defs, instance, INITIAL_KEYS[2])
        assert not refused.success
        assert f"is running by {dead.run_id}" in failure_of(refused)[0]

        instance.report_run_failed(dead)  # what run monitoring or "terminate" records
        assert materialize(defs, instance, INITIAL_KEYS[2]).success
        assert materialize(defs, instance, INITIAL_KEYS[0], INITIAL_KEYS[-1]).success
        assert run_job(defs, MANIFEST_JOB, instance).success
    manifest = assert_destination_equals_source(target, orders_550)
    assert sum("_chunk2_" in p["path"] for p in manifest["parts"]) == 1


def test_with_the_single_run_policy_a_cli_partition_range_backfills_every_window_in_one_run(
        orders_550: str, tmp_path: Path) -> None:
    """`dagster asset materialize --partition-range` needs BackfillPolicy.single_run (a
    Dagster 1.13 rule), which `dagster.backfill_policy: single_run` selects; the default
    multi_run policy is for UI backfills (parallel runs of `max_partitions_per_run` windows)."""
    target = Target("local", tmp_path)
    config = chunked_config(target, orders_550, backfill_policy="single_run")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    defs = build_definitions(config)
    assert defs.resolve_assets_def(EXPORT).backfill_policy == dg.BackfillPolicy.single_run()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        tick(defs, instance)
        env = {**os.environ, "RIVET_CONFIG": str(config), "DAGSTER_HOME": str(home)}
        ranged = subprocess.run(
            [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "rivet_dagster.definitions",
             "--select", EXPORT, "--partition-range", f"{INITIAL_KEYS[0]}...{INITIAL_KEYS[-1]}",
             "--config-json", json.dumps({"execution": {"config": {"in_process": {}}}})],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
        assert ranged.returncode == 0, ranged.stderr[-3000:]
        assert len(instance.get_runs()) == 1  # one run for the whole range
        assert {t.status for t in checkpoint(config)[1].values()} == {"completed"}
        assert run_job(defs, MANIFEST_JOB, instance).success
    assert_destination_equals_source(target, orders_550)
