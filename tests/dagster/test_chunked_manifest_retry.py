"""A `<export>_manifest` that fails after the chunk run was marked completed is requested again
(issue 15 item 7).

`finalize_chunk_run_completed` (I6) marks the chunk run completed before the finalize
sequence writes anything. When the manifest write then fails, nothing is published, yet the
chunk run is completed: the planner used to read that as "finalized, nothing new" and never
asked for the manifest again. Now the run ledger decides (`_unpublished` in
rivet_core/pipeline/chunked/tasks.py): the next tick carries every window into a new chunk
run and requests the manifest under a new run key; no window is exported twice.

The failure is real, not injected: `manifest.json` at the destination is a directory, so the
manifest write is refused (as a broken destination refuses it); the operator removes it and
the planner's next tick publishes. The oracle re-reads the published parts with pyarrow and
compares them with the source table.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg

from rivet_dagster import build_definitions
from tests.dagster.support import Target, create_orders, id_amounts, request_job, run_job
from tests.dagster.test_chunk_freshness import (
    CHUNK_JOB,
    EXPORT,
    KEYS,
    MANIFEST_JOB,
    PUBLISH_JOB,
    Planner,
    assert_quiet,
    chunk_run,
    jobs,
    orders_chunked,
    published,
    requested,
)
from tests.dagster.test_chunk_freshness import amounts as source_amounts


def test_a_manifest_refused_after_the_run_completed_is_requested_again_and_publishes_each_id_once(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)
    config = orders_chunked(target, pg_url)
    planner = Planner(build_definitions(config), instance)
    first = planner.tick()
    assert requested(first) == KEYS and jobs(first) == [PUBLISH_JOB]  # every window, then the manifest

    prefix = target.view("orders_chunked").root
    (prefix / "manifest.json").mkdir(parents=True)  # the destination refuses the manifest write
    [request] = first.run_requests
    failed = run_job(planner.defs, request_job(request), instance, tags=dict(request.tags))
    assert not failed.success  # the windows were committed; the manifest step failed
    assert {e.partition for e in failed.get_asset_materialization_events()
            if e.asset_key == dg.AssetKey(EXPORT)} == set(KEYS)
    completed_run, _ = chunk_run(config)
    assert completed_run.status == "completed"  # I6 happened; the manifest did not
    assert not (prefix / "_SUCCESS").exists()

    shutil.rmtree(prefix / "manifest.json")  # the operator fixes the destination
    again = planner.tick()
    # No window is exported again: only the manifest, under a new run key.
    assert jobs(again) == [MANIFEST_JOB] and not requested(again, CHUNK_JOB)
    assert again.run_requests[0].run_key != request.run_key
    reopened, tasks = chunk_run(config)
    assert reopened.run_id != completed_run.run_id
    assert all(t.status == "completed" for t in tasks.values()) and sorted(tasks) == KEYS
    planner.run(again)

    manifest, table = published(target)
    assert id_amounts(table) == source_amounts(pg_url)  # every id exactly once, the source's values
    assert manifest["row_count"] == 550
    assert_quiet(planner.tick())  # published: the planner goes quiet again
