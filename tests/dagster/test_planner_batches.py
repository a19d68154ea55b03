"""The planner requests chunk windows in ranged runs, with a cap of runs per tick (issue 16 item 5).

A Dagster run costs seconds of start-up; a chunk window often less. So the planner asks for
up to `dagster.max_partitions_per_run` consecutive windows per run (`window_batches`), and for
at most `dagster.max_runs_per_tick` runs per tick — the rest wait in the sensor's cursor, and
the manifest waits for them (it goes in the last batch's run when that batch holds every
window still to export: tests/dagster/test_chunked_fold.py). The end state is checked against the source table re-read with
pyarrow, never against the planner's own counts.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from hypothesis import given
from hypothesis import strategies as st

from rivet_core.config import load_config
from rivet_dagster import build_definitions
from rivet_dagster.chunked import windows_per_run
from rivet_dagster.partition_keys import chunk_partition_key
from rivet_dagster.planner import window_batches
from tests.dagster.support import (
    Target,
    create_orders,
    export_block,
    export_state,
    id_amounts,
    orders_config,
)
from tests.dagster.test_chunk_freshness import (
    KEYS,
    PUBLISH_JOB,
    Planner,
    amounts,
    assert_quiet,
    jobs,
    orders_chunked,
    published,
    requested,
)


@given(st.lists(st.booleans(), max_size=60), st.integers(min_value=1, max_value=12))
def test_batches_are_consecutive_wanted_windows_inside_fixed_cells(flags: list[bool], size: int) -> None:
    order = [f"w{i:03d}" for i in range(len(flags))]
    wanted = {k for k, f in zip(order, flags, strict=True) if f}
    batches = window_batches(order, wanted, size)
    flat = [k for b in batches for k in b]
    assert flat == [k for k in order if k in wanted]  # every wanted window once, in order; nothing else
    for batch in batches:
        positions = [order.index(k) for k in batch]
        assert positions == list(range(positions[0], positions[0] + len(batch)))  # a range skips nothing
        assert len(batch) <= size and positions[0] // size == positions[-1] // size  # inside one cell
    # Maximal: two batches in one cell are separated by an unwanted window.
    for a, b in zip(batches, batches[1:], strict=False):
        if order.index(a[-1]) // size == order.index(b[0]) // size:
            assert order.index(b[0]) > order.index(a[-1]) + 1


def test_the_same_wanted_windows_give_the_same_batches_when_windows_are_appended() -> None:
    order = [f"w{i}" for i in range(8)]
    before = window_batches(order, {"w1", "w2", "w5"}, 4)
    after = window_batches([*order, "w8", "w9"], {"w1", "w2", "w5", "w8", "w9"}, 4)
    assert before == [["w1", "w2"], ["w5"]] and after[:2] == before and after[2:] == [["w8", "w9"]]


def test_windows_go_in_ranged_runs_capped_per_tick_and_the_manifest_waits_for_the_backlog(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)
    config = orders_chunked(target, pg_url, dagster={"max_partitions_per_run": 4, "max_runs_per_tick": 1})
    planner = Planner(build_definitions(config), instance)

    first = planner.tick()
    [run] = first.run_requests
    assert requested(first) == KEYS[:4] and run.partition_key is None
    assert (run.tags["dagster/asset_partition_range_start"], run.tags["dagster/asset_partition_range_end"]) == (
        KEYS[0], KEYS[3])
    # waiting for the next tick (the cursor holds window keys, the same whatever a partition is called)
    assert [chunk_partition_key(k) for k in export_state(planner.cursor)["backlog"]] == KEYS[4:]
    planner.run(first)

    second = planner.tick()  # the backlog: the last batch, which publishes in the same run
    assert requested(second) == KEYS[4:] and jobs(second) == [PUBLISH_JOB]
    assert export_state(planner.cursor)["backlog"] == []
    planner.run(second)
    manifest, table = published(target)
    assert id_amounts(table) == amounts(pg_url) and manifest["row_count"] == 550  # each id once
    assert_quiet(planner.tick())


def test_between_plans_the_planner_polls_the_instance_and_plans_as_soon_as_the_runs_end(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """The sensor is evaluated every PLANNER_POLL_SECONDS; it plans against the source only
    every PLANNER_INTERVAL_SECONDS, or — while a chunk run is exported — once that chunk run's
    Dagster runs have all ended (the next batch, with the manifest, follows at once)."""
    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)
    config = orders_chunked(target, pg_url, dagster={"max_partitions_per_run": 4, "max_runs_per_tick": 1})
    planner = Planner(build_definitions(config), instance)

    first = planner.tick()
    assert requested(first) == KEYS[:4]
    planned_at = export_state(planner.cursor)["planned_at"]
    waiting = planner.tick(soon=True)  # its run has not even started: nothing to plan for
    assert not waiting.run_requests and not waiting.dynamic_partitions_requests
    assert "next plan against the source" in waiting.skip_reason.skip_message
    assert export_state(planner.cursor)["planned_at"] == planned_at

    chunk_run_id = export_state(planner.cursor)["run"]
    other = dg.DagsterRun(job_name="orders_chunked_manifest_job", run_id="0" * 8 + "-0000-0000-0000-" + "0" * 12,
                          status=dg.DagsterRunStatus.STARTED, tags={"rivet/chunk_run": chunk_run_id})
    instance.add_run(other)
    planner.run(first)
    busy = planner.tick(soon=True)  # a run ended, but another of the chunk run is still running
    assert not busy.run_requests and "1 run(s) queued or running" in busy.skip_reason.skip_message
    instance.delete_run(other.run_id)

    second = planner.tick(soon=True)  # the first run ended and none is in flight: plan now
    assert requested(second) == KEYS[4:] and export_state(planner.cursor)["planned_at"] > planned_at
    assert jobs(second) == [PUBLISH_JOB]  # the last batch and the manifest
    planner.run(second)
    assert_quiet(planner.tick(soon=True))  # the last run ended: one plan, published
    assert export_state(planner.cursor)["in_progress"] is False
    idle = planner.tick(soon=True)  # published: the next plan waits for the interval
    assert not idle.run_requests and "next plan against the source" in idle.skip_reason.skip_message
    manifest, table = published(target)
    assert id_amounts(table) == amounts(pg_url) and manifest["row_count"] == 550


def test_small_id_windows_share_a_run_unless_max_partitions_per_run_is_set(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """Unset, `max_partitions_per_run` puts every window in one run (`parallel: 1`: a run's
    start-up is paid once for them; tests/dagster/test_planner_run_sizing.py); set, it is
    obeyed as before."""
    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)

    def config(chunk_size: int, **dagster: int) -> Path:
        block = export_block("orders_chunked", "chunked", target.destination("orders_chunked"), chunk_column="id",
                             chunk_size=chunk_size)
        if dagster:
            block["dagster"] = dagster
        return orders_config(tmp_path, pg_url, [block])

    assert windows_per_run(load_config(config(10)).export("orders_chunked"), 55) == 55
    first = Planner(build_definitions(config(10)), instance).tick()
    [run] = first.run_requests  # 55 windows of 10 ids: one run (the default of 10 would make 6)
    assert len(requested(first)) == 55
    assert run.tags["dagster/asset_partition_range_start"] == "id_0-9"
    assert run.tags["dagster/asset_partition_range_end"] == "id_540-549"

    pinned = load_config(config(10, max_partitions_per_run=10)).export("orders_chunked")
    assert windows_per_run(pinned, 55) == 10
    assert windows_per_run(load_config(config(500_000)).export("orders_chunked"), 3) == 3  # big windows too
