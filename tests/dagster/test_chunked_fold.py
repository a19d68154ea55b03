"""The last batch of a chunked export publishes in its own run (issue 16 item 5).

A Dagster run's start-up costs seconds (a process, imports, the code location). When the
planner's batch holds every window still to export, it requests ONE run of
`<export>_publish_job`: the chunk partitions, then `<export>_manifest` and its checks
(`manifest_verified`, `reconcile`), instead of a chunk run and, a tick later, a manifest run.
When windows remain for another batch, the manifest still comes on its own after the last.
The oracle re-reads the published parts with pyarrow and compares them with the source.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from rivet_dagster import build_definitions
from tests.dagster.support import (
    Target,
    check_evaluations,
    create_orders,
    export_state,
    id_amounts,
    request_job,
    run_job,
)
from tests.dagster.test_chunk_freshness import (
    CHUNK_JOB,
    EXPORT,
    KEYS,
    MANIFEST_JOB,
    PUBLISH_JOB,
    Planner,
    amounts,
    assert_quiet,
    chunk_run,
    jobs,
    orders_chunked,
    published,
    requested,
)
from tests.helpers import db_exec


def exported_550(pg_url: str, tmp_path: Path, instance: dg.DagsterInstance,
                 **dagster: int) -> tuple[Target, Path, Planner]:
    """550 source rows in six id windows of 100, exported to local disk; the planner to drive."""
    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)
    config = orders_chunked(target, pg_url, **({"dagster": dagster} if dagster else {}))
    return target, config, Planner(build_definitions(config), instance)


def materialized(result: dg.ExecuteInProcessResult) -> list[tuple[str, str | None]]:
    return sorted((e.asset_key.to_user_string(), e.partition) for e in result.get_asset_materialization_events())


def test_one_batch_holding_every_window_publishes_in_the_same_run(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    target, config, planner = exported_550(pg_url, tmp_path, instance)

    first = planner.tick()
    [request] = first.run_requests
    assert request_job(request) == PUBLISH_JOB and requested(first, PUBLISH_JOB) == KEYS
    assert request.run_key.endswith("+manifest")
    [result] = planner.run(first)
    # One run: every window's materialization, the manifest's, and its checks, in step order.
    assert materialized(result) == sorted([(EXPORT, k) for k in KEYS] + [(f"{EXPORT}_manifest", None)])
    checks = check_evaluations(result)
    assert checks["manifest_verified"].passed and checks["reconcile"].passed
    steps = [e.step_key for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_START]
    assert steps.index(EXPORT) < steps.index(f"{EXPORT}_manifest")

    manifest, table = published(target)
    assert id_amounts(table) == amounts(pg_url) and manifest["row_count"] == 550  # each id once
    assert manifest["orchestrator_run_id"] == result.run_id
    [manifest_mat] = [e.materialization for e in result.get_asset_materialization_events() if e.partition is None]
    assert manifest_mat.metadata["dagster/row_count"].value == 550  # the dataset, not a window
    run, _ = chunk_run(config)
    assert run.status == "completed"
    assert_quiet(planner.tick())  # published: no separate manifest run follows


def test_a_multi_batch_export_gets_the_manifest_only_after_its_last_batch(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    target, _, planner = exported_550(pg_url, tmp_path, instance, max_partitions_per_run=4)

    first = planner.tick()  # two batches in one tick: neither may publish
    assert jobs(first) == [CHUNK_JOB, CHUNK_JOB] and requested(first) == KEYS
    planner.run(first)
    ready = planner.tick()
    assert jobs(ready) == [MANIFEST_JOB]
    planner.run(ready)
    manifest, table = published(target)
    assert id_amounts(table) == amounts(pg_url) and manifest["row_count"] == 550
    assert_quiet(planner.tick())


def test_a_failed_chunk_step_runs_no_manifest_step_and_publishes_nothing(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    target, config, planner = exported_550(pg_url, tmp_path, instance)
    first = planner.tick()
    [request] = first.run_requests
    assert request_job(request) == PUBLISH_JOB

    db_exec(pg_url, "ALTER TABLE orders RENAME TO orders_away")  # the source breaks under the run
    failed = run_job(planner.defs, PUBLISH_JOB, instance, tags=dict(request.tags))
    assert not failed.success
    started = {e.step_key for e in failed.all_events if e.event_type == dg.DagsterEventType.STEP_START}
    assert EXPORT in started and f"{EXPORT}_manifest" not in started  # no manifest step after a failed chunk step
    assert not materialized(failed) and target.view(EXPORT).current_manifest() is None
    run, tasks = chunk_run(config)
    assert run.status == "in_progress" and not any(t.status == "completed" for t in tasks.values())

    db_exec(pg_url, "ALTER TABLE orders_away RENAME TO orders")
    again = run_job(planner.defs, PUBLISH_JOB, instance, tags=dict(request.tags))  # the run re-executed
    assert again.success
    manifest, table = published(target)
    assert id_amounts(table) == amounts(pg_url) and manifest["row_count"] == 550


def test_no_manifest_run_is_requested_while_a_run_of_the_chunk_run_is_in_flight(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """A folded run publishes after its windows are committed: a plan in between (the
    interval passed) sees every window completed, yet must not request a second manifest."""
    target, _, planner = exported_550(pg_url, tmp_path, instance)
    first = planner.tick()
    assert jobs(first) == [PUBLISH_JOB]
    # The folded run, between its chunk step and its manifest step: the windows are committed…
    assert run_job(planner.defs, CHUNK_JOB, instance, tags={
        "dagster/asset_partition_range_start": KEYS[0], "dagster/asset_partition_range_end": KEYS[-1]}).success
    chunk_run_id = export_state(planner.cursor)["run"]
    folded = dg.DagsterRun(job_name=PUBLISH_JOB, run_id="0" * 8 + "-0000-0000-0000-" + "0" * 12,
                           status=dg.DagsterRunStatus.STARTED, tags={"rivet/chunk_run": chunk_run_id})
    instance.add_run(folded)  # … and it is still running
    waiting = planner.tick()
    assert not waiting.run_requests and "the manifest waits for 1 run(s)" in str(waiting.skip_reason)

    instance.delete_run(folded.run_id)  # it ended without publishing (say its manifest step failed)
    ready = planner.tick()
    assert jobs(ready) == [MANIFEST_JOB]  # now the manifest on its own
    planner.run(ready)
    manifest, table = published(target)
    assert id_amounts(table) == amounts(pg_url) and manifest["row_count"] == 550
    assert_quiet(planner.tick())
