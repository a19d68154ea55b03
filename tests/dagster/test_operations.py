"""Operating chunked exports through Dagster: runs that die, runs someone terminates, pool
slots they hold (issue 39 findings 1–3), against real PostgreSQL and a persistent Dagster
instance — SQLite files, and dagster-postgres.

A run worker is a real process: a Python subprocess executing the planner's run request on
the instance at DAGSTER_HOME, killed for real at a fault point (`RIVET_TEST_PANIC_AT`:
SIGKILL to itself) or interrupted at a pause point (`RIVET_TEST_PAUSE_AT`, a file barrier)
the way Dagster's terminate interrupts it. The planner sensor is evaluated as the daemon
does (tests/dagster/test_chunk_freshness.py `Planner`: cursor threaded, partition requests
applied). The oracle re-reads the parts the current `manifest.json` lists with pyarrow and
compares them with the source rows, each id once.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from rivet_dagster import build_definitions
from tests.dagster.support import (
    Target,
    create_orders,
    export_block,
    id_amounts,
    job_def,
    orders_config,
    request_job,
    run_job,
    source_rows,
)
from tests.dagster.test_chunk_freshness import (
    KEYS,
    PUBLISH_JOB,
    RECONCILE_JOB,
    Planner,
    assert_quiet,
    chunk_run,
    jobs,
    orders_chunked,
    published,
    requested,
)
from tests.helpers import REPO, db_exec, rivet

#: A run worker: executes one run request (the export job it stands for — tests/dagster/support.py
#: `request_job` —, tags, partition) on the instance at DAGSTER_HOME, in its own process, as
#: Dagster's run launcher does.
RUN_WORKER = """
import json, sys
import dagster as dg
from rivet_dagster import build_definitions
from tests.dagster.support import run_job
job, tags, partition, config = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] or None, sys.argv[4]
defs = build_definitions(config)
with dg.DagsterInstance.get() as instance:
    run_job(defs, job, instance, tags=tags, partition_key=partition)
"""


@pytest.fixture(params=["sqlite", "postgres"])
def home(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A DAGSTER_HOME whose instance keeps its runs and event log in SQLite files, or in
    PostgreSQL (dagster-postgres, psycopg2 as docs/distributed.md says)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    text = "telemetry:\n  enabled: false\n"
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        text += f'storage:\n  postgres:\n    postgres_url: "postgresql+psycopg2://{url.split("://", 1)[1]}"\n'
    (home / "dagster.yaml").write_text(text)
    return home


def worker(home: Path, config: Path, request: dg.RunRequest, **env: str) -> subprocess.Popen[str]:
    """Start a run worker process for `request`."""
    return subprocess.Popen(
        [sys.executable, "-c", RUN_WORKER, request_job(request), json.dumps(dict(request.tags)),
         request.partition_key or "", str(config)],
        cwd=REPO, env={**os.environ, "DAGSTER_HOME": str(home), **env}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def chunked_orders(pg_url: str, tmp_path: Path) -> tuple[Target, Path, dg.Definitions]:
    """550 source orders, the chunked export of them to a local folder, and its definitions."""
    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)
    config = orders_chunked(target, pg_url)
    return target, config, build_definitions(config)


def assert_published_equals_source(target: Target, url: str) -> dict[str, Any]:
    manifest, table = published(target)
    assert id_amounts(table) == source_rows(url)  # each id exactly once (id_amounts asserts it)
    return manifest


# ------------------------------------------------------------------------------ finding 1
def test_windows_of_a_killed_chunk_run_are_taken_over_by_the_planner_and_the_manifest_publishes(
        pg_url: str, tmp_path: Path, home: Path) -> None:
    """The planner's run of every window is SIGKILLed after window 2's part landed: windows
    0–1 are committed, 2–5 stay `running` for a run Dagster then records as failed. The next
    plan returns them to pending, requests them (with the manifest) under a run key of their
    own, and the published data equals the source — no human action."""
    target, config, defs = chunked_orders(pg_url, tmp_path)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        planner = Planner(defs, instance)
        first = planner.tick()
        assert jobs(first) == [PUBLISH_JOB] and requested(first) == KEYS
        killed = worker(home, config, first.run_requests[0], RIVET_TEST_PANIC_AT="after_chunk_file:2")
        _, err = killed.communicate(timeout=180)
        assert killed.returncode == -signal.SIGKILL, err[-3000:]
        killed_at = time.monotonic()
        dead = instance.get_runs()[0]
        _, tasks = chunk_run(config)
        assert [tasks[k].status for k in KEYS] == ["completed"] * 2 + ["running"] * 4
        assert {tasks[k].worker for k in KEYS[2:]} == {dead.run_id}
        # What Dagster records when a run worker dies (its code server, or run monitoring).
        instance.report_run_failed(dead)

        takeover = planner.tick()
        assert requested(takeover) == KEYS[2:] and jobs(takeover) == [PUBLISH_JOB]
        assert takeover.run_requests[0].run_key != first.run_requests[0].run_key
        _, tasks = chunk_run(config)
        assert [tasks[k].status for k in KEYS[2:]] == ["pending"] * 4  # I5: stale running → pending
        assert all(tasks[k].attempts == 1 for k in KEYS[2:])
        planner.run(takeover)
        published_after = time.monotonic() - killed_at
        assert_quiet(planner.tick())
    manifest = assert_published_equals_source(target, pg_url)
    assert manifest["row_count"] == 550
    storage = "postgres" if "postgres" in (home / "dagster.yaml").read_text() else "sqlite"
    print(f"\n[measure] {storage}: killed chunk run → published manifest (the takeover tick and its run): "
          f"{published_after:.1f} s")


# ------------------------------------------------------------------------------ finding 2
SHIPPED_INSTANCE = REPO / "dagster_home" / "dagster.yaml"


def test_the_pool_slot_of_a_killed_run_is_freed_by_run_monitoring_with_the_shipped_instance_settings(
        pg_url: str, tmp_path: Path, home: Path) -> None:
    """A run worker SIGKILLed while its step holds a slot of the source pool leaves the slot
    claimed (nothing in the process frees it). With the shipped `dagster_home/dagster.yaml`
    settings, the daemon's run-monitoring iteration — evaluated as the daemon does,
    `free_slots_after_run_end_seconds` after the run ended — frees it."""
    from types import SimpleNamespace

    from dagster._core.test_utils import freeze_time
    from dagster._daemon.monitoring.concurrency import execute_concurrency_slots_iteration

    (home / "dagster.yaml").write_text((home / "dagster.yaml").read_text() + SHIPPED_INSTANCE.read_text()
                                       .replace("telemetry:\n  enabled: false\n", ""))
    target, config, defs = chunked_orders(pg_url, tmp_path)
    pool = f"source_{pg_url.rsplit('/', 1)[1]}"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        first = Planner(defs, instance).tick()
        killed = worker(home, config, first.run_requests[0], RIVET_TEST_PANIC_AT="after_chunk_file:2")
        _, err = killed.communicate(timeout=180)
        assert killed.returncode == -signal.SIGKILL, err[-3000:]
        dead = instance.get_runs()[0]
        storage = instance.event_log_storage
        assert [s.run_id for s in storage.get_concurrency_info(pool).claimed_slots] == [dead.run_id]
        instance.report_run_failed(dead)  # what its code server records when the worker dies
        ended = instance.get_run_record_by_id(dead.run_id).end_time
        after = instance.run_monitoring_settings.get("free_slots_after_run_end_seconds") or 0

        with freeze_time(ended + after + 1):  # the daemon's monitoring iteration, that long after the end
            list(execute_concurrency_slots_iteration(SimpleNamespace(instance=instance), logging.getLogger("test")))
        info = storage.get_concurrency_info(pool)
        assert info.claimed_slots == [] and info.active_slot_count == 0, info
    print(f"\n[measure] a killed run's slot is freed {after} s after Dagster records its end, at the next "
          "run-monitoring iteration (poll_interval_seconds: 60 in the shipped instance)")


def test_rivet_doctor_fails_naming_the_setting_when_the_dagster_instance_does_not_free_slots_of_ended_runs(
        pg_url: str, tmp_path: Path) -> None:
    """`rivet doctor` on a config with a `dagster:` block reads $DAGSTER_HOME/dagster.yaml:
    one without `run_monitoring.free_slots_after_run_end_seconds` is a [FAIL] naming the file,
    the setting and the lines to add; the shipped instance passes."""
    create_orders(pg_url, rows=10)
    config = orders_chunked(Target("local", tmp_path), pg_url, dagster={"max_runs_per_tick": 20})
    bare = tmp_path / "bare_home"
    bare.mkdir()
    (bare / "dagster.yaml").write_text("telemetry:\n  enabled: false\nrun_monitoring:\n  enabled: true\n")

    lacking = rivet("doctor", "-c", str(config), env={"DAGSTER_HOME": str(bare)})
    assert lacking.returncode == 1, lacking.stdout + lacking.stderr
    [line] = [ln for ln in lacking.stdout.splitlines() if ln.startswith("[FAIL] dagster instance")]
    assert str(bare / "dagster.yaml") in line and "free_slots_after_run_end_seconds" in line, line
    assert "fix: add to" in line and "free_slots_after_run_end_seconds: 10" in line, line

    shipped = rivet("doctor", "-c", str(config), env={"DAGSTER_HOME": str(SHIPPED_INSTANCE.parent)})
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    assert f"[OK] dagster instance: {SHIPPED_INSTANCE}" in shipped.stdout


# ------------------------------------------------------------------------------ finding 3
def wait_for_barrier(proc: subprocess.Popen[str], reached: Path) -> None:
    """Until the worker parks at its pause point (the file barrier of faults.py), bounded."""
    deadline = time.monotonic() + 120
    while not reached.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"the run worker never reached {reached.name}"
        time.sleep(0.02)


def terminate_at(instance: dg.DagsterInstance, proc: subprocess.Popen[str], barrier: Path) -> set[Any]:
    """Terminate as the UI does — the run marked CANCELING, then SIGINT to its worker (what
    the code server's termination thread sends) — once the worker parked at `barrier`; the run
    must end CANCELED without a STEP_UP_FOR_RETRY. Returns the run's event types."""
    try:
        wait_for_barrier(proc, barrier.with_name(barrier.name + ".reached"))
        run = instance.get_runs()[0]
        instance.report_run_canceling(run)  # the terminate request
        proc.send_signal(signal.SIGINT)  # Dagster's send_interrupt in the run worker
        barrier.with_name(barrier.name + ".release").touch()
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    ended = instance.get_run_by_id(run.run_id)
    assert ended is not None and ended.status == dg.DagsterRunStatus.CANCELED, (ended, err[-3000:])
    kinds = {e.dagster_event.event_type for e in instance.all_logs(run.run_id) if e.dagster_event}
    assert dg.DagsterEventType.STEP_UP_FOR_RETRY not in kinds
    return kinds


def test_a_terminated_chunk_run_ends_canceled_without_a_retry_and_publishes_nothing(
        pg_url: str, tmp_path: Path, home: Path) -> None:
    """Terminate as the UI does it — the run marked CANCELING, then SIGINT to its worker (what
    the code server's termination thread sends) — while the worker stages window 2 with the
    default in-process executor: the step fails once (no STEP_UP_FOR_RETRY although the asset
    has a RetryPolicy), the run ends CANCELED, nothing lands at the destination. The planner's
    next plan then takes the windows over and the published data equals the source."""
    target, config, defs = chunked_orders(pg_url, tmp_path)
    pause = tmp_path / "pause"
    pause.mkdir()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        planner = Planner(defs, instance)
        first = planner.tick()
        kinds = terminate_at(instance, worker(home, config, first.run_requests[0], RIVET_TEST_PAUSE_AT="chunk_export:2",
                                              RIVET_TEST_PAUSE_DIR=str(pause)), pause / "chunk_export:2")
        assert dg.DagsterEventType.ASSET_MATERIALIZATION not in kinds
        view = target.view("orders_chunked")
        assert view.current_manifest() is None and view.data_keys() == []
        _, tasks = chunk_run(config)
        assert "running" not in {t.status for t in tasks.values()}

        takeover = planner.tick()
        assert requested(takeover) == KEYS and jobs(takeover) == [PUBLISH_JOB]
        planner.run(takeover)
        assert_quiet(planner.tick())
    assert_published_equals_source(target, pg_url)


def test_a_window_that_keeps_losing_its_worker_is_taken_over_until_its_attempts_are_used_then_named(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """Each time the window's worker (a Dagster run this instance does not know: gone) leaves
    it running, the next plan returns it to pending and requests it under a new run key
    (`takeover-<attempts>`); once it used the chunk run's max attempts (`chunk_max_attempts`
    here 3) the planner requests nothing and its skip reason names the window to fix."""
    import uuid

    from rivet_core.config import load_config
    from rivet_core.state import StateStore

    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)
    config = orders_chunked(target, pg_url, chunk_max_attempts=3)
    planner = Planner(build_definitions(config), instance)
    planner.tick()
    store = StateStore.open(load_config(config).config_path)
    try:
        run, tasks = chunk_run(config)
        keys = []
        for _ in range(2):
            assert store.claim_chunk_task(run.run_id, tasks[KEYS[3]].chunk_index, str(uuid.uuid4())) is not None
            result = planner.tick()
            keys += [r.run_key for r in result.run_requests if KEYS[3] in r.tags.get("rivet/windows", "")]
            assert store.get_chunk_task(run.run_id, tasks[KEYS[3]].chunk_index).status == "pending", result
        assert [k.rsplit(":", 1)[1] for k in keys] == ["takeover-1", "takeover-2"], keys
        assert store.claim_chunk_task(run.run_id, tasks[KEYS[3]].chunk_index, str(uuid.uuid4())) is not None
        exhausted = planner.tick()
    finally:
        store.close()
    assert KEYS[3] not in requested(exhausted)
    reason = exhausted.skip_reason.skip_message if exhausted.skip_reason else ""
    assert "used every attempt" in reason and KEYS[3] in reason, exhausted


def test_a_terminated_full_export_ends_canceled_without_a_retry_and_publishes_nothing(
        pg_url: str, tmp_path: Path, home: Path) -> None:
    """The same terminate during a plain export's source read (its asset has a RetryPolicy
    too): one step failure, the run CANCELED, no manifest and no part at the destination."""
    from tests.dagster.support import export_block, orders_config

    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)
    config = orders_config(tmp_path, pg_url, [export_block("orders_full", "full", target.destination("orders_full"))])
    pause = tmp_path / "pause"
    pause.mkdir()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        terminate_at(instance, worker(home, config, dg.RunRequest(job_name="orders_full_job"),
                                      RIVET_TEST_PAUSE_AT="during_source_read", RIVET_TEST_PAUSE_DIR=str(pause)),
                     pause / "during_source_read")
    view = target.view("orders_full")
    assert view.current_manifest() is None and view.data_keys() == []


def test_windows_of_a_run_cancelled_while_queued_are_requested_again_and_the_manifest_publishes(
        pg_url: str, tmp_path: Path, home: Path) -> None:
    """The planner's run is terminated while QUEUED (Dagster ends it CANCELED without
    starting it): its windows were never claimed. The next plan, finding no run of the chunk
    run queued or running, requests them again under a new run key; the published data
    equals the source."""
    target, config, defs = chunked_orders(pg_url, tmp_path)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        planner = Planner(defs, instance)
        first = planner.tick()
        request = first.run_requests[0]
        queued = instance.create_run_for_job(job_def(defs, request_job(request)), tags=dict(request.tags),
                                             status=dg.DagsterRunStatus.NOT_STARTED)
        instance.report_run_canceled(queued)  # what terminate does to a run that has not started
        _, tasks = chunk_run(config)
        assert {(t.status, t.worker) for t in tasks.values()} == {("pending", None)}

        again = planner.tick()
        assert requested(again) == KEYS and jobs(again) == [PUBLISH_JOB]
        assert again.run_requests[0].run_key != request.run_key
        planner.run(again)
        assert_quiet(planner.tick())
    assert_published_equals_source(target, pg_url)


# ------------------------------------------------------------------------------ finding 6
def latest_reconcile(instance: dg.DagsterInstance) -> Any:
    """The `reconcile` execution the UI shows: the newest Dagster recorded."""
    key = dg.AssetCheckKey(dg.AssetKey("orders_chunked_manifest"), "reconcile")
    return instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]


def test_a_reconcile_that_evaluated_before_the_fixed_windows_published_is_evaluated_again_and_goes_green(
        pg_url: str, tmp_path: Path, home: Path) -> None:
    """Rows deleted at the source under a published window: the plan requests the `reconcile`
    check and the window's run (with the manifest), the check first. Should the daemon create
    the runs the other way round — the publishing run first, parked while it stages the
    window, the check's run created after it and evaluated meanwhile (red) — the red verdict
    is the newest execution although the data is fixed. The next plan finds every window true
    to the source and evaluates the check again: green, and nothing more after that. (A check
    evaluated while the window is claimed says "could not be compared" and passes; the red
    comes from the seconds before the claim: run start-up, a wait for a source pool slot.)"""
    target, config, defs = chunked_orders(pg_url, tmp_path)
    pause = tmp_path / "pause"
    pause.mkdir()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        planner = Planner(defs, instance)
        planner.publish_everything()
        db_exec(pg_url, "DELETE FROM orders WHERE id IN (210, 211, 212)")
        changed = planner.tick()
        assert [request_job(r) for r in changed.run_requests] == [RECONCILE_JOB, PUBLISH_JOB]
        check_request, publish_request = changed.run_requests
        proc = worker(home, config, publish_request, RIVET_TEST_PAUSE_AT="before_chunk_claim",
                      RIVET_TEST_PAUSE_DIR=str(pause))
        try:
            wait_for_barrier(proc, pause / "before_chunk_claim.reached")
            [red] = planner.run(dg.SensorResult(run_requests=[check_request]))
            assert not red.get_asset_check_evaluations()[0].passed
            (pause / "before_chunk_claim.release").touch()
            _, err = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err[-3000:]
        assert latest_reconcile(instance).status.value == "FAILED"  # the race of issue 39 finding 6

        recheck = planner.tick()
        assert jobs(recheck) == [RECONCILE_JOB]
        planner.run(recheck)
        assert latest_reconcile(instance).status.value == "SUCCEEDED"
        assert_quiet(planner.tick())
    assert_published_equals_source(target, pg_url)


# ------------------------------------------------------------------------------ finding 7
def test_after_a_chunk_size_change_and_reset_chunks_the_old_windows_are_withdrawn_from_dagster(
        pg_url: str, tmp_path: Path, home: Path) -> None:
    """Published with 100-row windows, then `chunk_size: 200` and `rivet state reset-chunks`:
    the planner registers the three new windows, deletes the six old partition keys and wipes
    their materializations, so Dagster counts as materialized exactly the windows that exist
    (before: the six old keys stayed materialized next to the three new ones)."""
    target, config, defs = chunked_orders(pg_url, tmp_path)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        planner = Planner(defs, instance)
        planner.publish_everything()
        assert sorted(instance.get_materialized_partitions(dg.AssetKey("orders_chunked"))) == KEYS

        config.write_text(config.read_text().replace("chunk_size: 100", "chunk_size: 200"))
        reset = rivet("state", "reset-chunks", "-c", str(config), "-e", "orders_chunked")
        assert reset.returncode == 0, reset.stderr
        planner = Planner(build_definitions(config), instance)
        planner.cursor = None
        first = planner.tick()
        new_keys = sorted(instance.get_dynamic_partitions("orders_chunked_chunks"))
        assert len(new_keys) == 3 and not set(new_keys) & set(KEYS)
        planner.run(first)
        assert_quiet(planner.tick())
        assert sorted(instance.get_materialized_partitions(dg.AssetKey("orders_chunked"))) == new_keys
    assert_published_equals_source(target, pg_url)


# ------------------------------------------------------------------------------ finding 4
def test_a_read_during_which_a_new_publish_moves_its_parts_away_starts_again_from_the_new_manifest(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    """The IO manager's read of a `retention: {keep_runs: 1}` export: while it reads the first
    published run's part, the export publishes again (a real run on the same instance, the
    source changed meanwhile) and retention moves the old part out of the prefix. The read
    starts again from the new manifest and returns exactly the source as it is now — never a
    table mixing the two publishes (before: `DestinationError: … does not exist`)."""
    from rivet_core.config import load_config
    from rivet_dagster import io_manager

    create_orders(pg_url, rows=300)
    target = Target("local", tmp_path)
    config = orders_config(tmp_path, pg_url, [export_block("orders_full", "full", target.destination("orders_full"),
                                                           retention={"keep_runs": 1})])
    defs = build_definitions(config)
    assert run_job(defs, "orders_full_job", instance).success
    real_read, republished = io_manager._read_part, []

    def read_while_a_publish_lands(dest: Any, key: str, fmt: str) -> Any:
        if not republished:  # the first part: the next publish lands before its bytes are read
            db_exec(pg_url, "UPDATE orders SET amount = amount + 1 WHERE id < 100")
            republished.append(run_job(defs, "orders_full_job", instance).success)
        return real_read(dest, key, fmt)

    monkeypatch.setattr(io_manager, "_read_part", read_while_a_publish_lands)
    cfg = load_config(config)
    table = io_manager.read_export(cfg, cfg.export("orders_full"))
    assert republished == [True]
    assert table is not None and id_amounts(table) == source_rows(pg_url)


#: A downstream asset's run in a process of its own: it loads `orders_full` through rivet's IO
#: manager and writes what it received (id → amount) to a JSON file for the oracle.
DOWNSTREAM_READER = """
import json, sys
from pathlib import Path
import dagster as dg
from rivet_dagster import build_definitions
config, out = sys.argv[1], Path(sys.argv[2])

@dg.asset(ins={"orders": dg.AssetIn(key=dg.AssetKey("orders_full"))})
def orders_copy(orders):
    out.write_text(json.dumps(dict(zip(map(str, orders.column("id").to_pylist()),
                                       map(str, orders.column("amount").to_pylist())))))

defs = dg.Definitions.merge(build_definitions(config), dg.Definitions(
    assets=[orders_copy], jobs=[dg.define_asset_job("copy_job", selection=[orders_copy])]))
with dg.DagsterInstance.get() as instance:
    assert defs.resolve_job_def("copy_job").execute_in_process(instance=instance).success
"""


def test_a_downstream_run_whose_read_a_publish_from_another_process_overtakes_reads_the_new_data_whole(
        pg_url: str, tmp_path: Path) -> None:
    """Two processes, as in production: a downstream asset's run reads the `retention:
    {keep_runs: 1}` export through the IO manager and is parked just before its first part's
    bytes (`RIVET_TEST_PAUSE_AT=before_part_read`, a file barrier); meanwhile `rivet run` in
    another process publishes again from a changed source, and retention moves the part the
    reader was about to read out of the prefix. Released, the reader starts again from the new
    manifest: the downstream asset receives exactly the source as it is now (before the
    restart: `DestinationError: … does not exist`, the run failed)."""
    create_orders(pg_url, rows=300)
    target = Target("local", tmp_path)
    config = orders_config(tmp_path, pg_url, [export_block("orders_full", "full", target.destination("orders_full"),
                                                           retention={"keep_runs": 1})])
    first = rivet("run", "-c", str(config), "-e", "orders_full")
    assert first.returncode == 0, first.stderr[-3000:]
    before = target.view("orders_full").current_manifest()
    assert before is not None
    barrier, received = tmp_path / "barrier", tmp_path / "received.json"
    barrier.mkdir()
    home = tmp_path / "reader_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    reader = subprocess.Popen(
        [sys.executable, "-c", DOWNSTREAM_READER, str(config), str(received)], cwd=REPO, text=True,
        env={**os.environ, "DAGSTER_HOME": str(home), "RIVET_TEST_PAUSE_AT": "before_part_read",
             "RIVET_TEST_PAUSE_DIR": str(barrier)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (barrier / "before_part_read.reached").exists():
            assert reader.poll() is None, reader.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the reader never reached its first part"
            time.sleep(0.05)  # polling the barrier file with a deadline
        db_exec(pg_url, "UPDATE orders SET amount = amount + 1 WHERE id < 100")
        again = rivet("run", "-c", str(config), "-e", "orders_full")
        assert again.returncode == 0, again.stderr[-3000:]
        gone = [p["path"] for p in before["parts"] if not (tmp_path / "out" / "orders_full" / p["path"]).exists()]
        assert gone, "retention moved the first publish's parts away while the reader was parked"
        (barrier / "before_part_read.release").write_text("")
        _, err = reader.communicate(timeout=180)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert reader.returncode == 0, err[-3000:]
    got = {int(k): Decimal(v).quantize(Decimal("0.01")) for k, v in json.loads(received.read_text()).items()}
    assert got == source_rows(pg_url)  # the new publish whole: the old parts were gone when it read


def test_a_part_missing_while_the_manifest_stays_current_fails_the_read_naming_the_part(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """No publish landed: a part the current manifest lists is gone (a damaged dataset). The
    read does not loop or return a partial table: it fails naming the part."""
    from rivet_core.config import load_config
    from rivet_dagster import io_manager

    create_orders(pg_url, rows=300)
    target = Target("local", tmp_path)
    config = orders_config(tmp_path, pg_url, [export_block("orders_full", "full", target.destination("orders_full"),
                                                           retention={"keep_runs": 1})])
    assert run_job(build_definitions(config), "orders_full_job", instance).success
    manifest = target.view("orders_full").current_manifest()
    assert manifest is not None
    [part] = [p["path"] for p in manifest["parts"]]
    (tmp_path / "out" / "orders_full" / part).unlink()
    cfg = load_config(config)
    with pytest.raises(Exception, match=f"{part}' does not exist"):
        io_manager.read_export(cfg, cfg.export("orders_full"))
