"""The chunk checkpoint in the state store (chunk_run / chunk_task, schema v2): the task
lifecycle and ADR-0001 I5 (a completed task is never claimed again; failures only while
attempts are left), I6 (finalize only when every task is completed), one in-progress run per
export enforced by the database, and atomic claims when several processes drain one run —
on SQLite (BEGIN IMMEDIATE) and on a real PostgreSQL (FOR UPDATE SKIP LOCKED).

Actions go through the StateStore API; the oracle is the database read directly (the stdlib
`sqlite3`, or psycopg), and for the multi-process tests also what each process reports it
claimed.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rivet_core.state import (
    ChunkRunIncomplete,
    ChunkRunInProgress,
    ChunkTaskNotRunning,
    StateStore,
)
from tests.helpers import pg_exec

BACKENDS = ["sqlite", "postgresql"]


@dataclass
class Backend:
    name: str
    config: Path
    url: str  # "" = the SQLite file beside the config
    query: Callable[[str], list[tuple]]

    def open(self) -> StateStore:
        return StateStore.open(self.config, state_url=self.url)


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path, monkeypatch) -> Backend:
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    config = tmp_path / "rivet.yaml"
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_url")
        return Backend("postgresql", config, url, lambda sql: pg_exec(url, sql))

    def query(sql: str) -> list[tuple]:
        with sqlite3.connect(tmp_path / ".rivet_state.db") as conn:
            return conn.execute(sql).fetchall()

    return Backend("sqlite", config, "", query)


@pytest.fixture
def store(backend) -> Iterator[StateStore]:
    s = backend.open()
    yield s
    s.close()


def tasks(n: int, start: int = 0) -> list[tuple[int, str | None, str | None, str]]:
    return [(i, str(i * 10), str(i * 10 + 9), f"id_{i * 10:06d}-{i * 10 + 9:06d}") for i in range(start, start + n)]


def create(store: StateStore, run_id: str = "orders_r1", export: str = "orders", n: int = 3,
           max_attempts: int = 3) -> None:
    store.create_chunk_run(run_id, export, "0123456789abcdef", max_attempts, "range", "id", 10, tasks(n))


def task_rows(backend: Backend, run_id: str = "orders_r1") -> list[tuple]:
    return backend.query("SELECT chunk_index, status, attempts, last_error, rows_written, file_name, worker "
                         f"FROM chunk_task WHERE run_id = '{run_id}' ORDER BY chunk_index")


def test_a_store_at_schema_v1_gains_the_chunk_tables_on_open_and_keeps_its_rows(backend, monkeypatch):
    from rivet_core.state import migrations

    with monkeypatch.context() as m:  # build a store as the previous release left it
        m.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:1])
        m.setattr(migrations, "SCHEMA_VERSION", 1)
        old = backend.open()
        old.set_cursor("orders", "41")
        old.close()
    assert backend.query("SELECT version FROM rivet_schema_version") == [(1,)]

    store = backend.open()
    try:
        assert store.get_cursor("orders") == "41"
        create(store)
    finally:
        store.close()
    assert backend.query("SELECT version FROM rivet_schema_version ORDER BY version") == [
        (v,) for v in range(1, migrations.SCHEMA_VERSION + 1)]  # every later step ran too
    assert backend.query("SELECT COUNT(*) FROM chunk_task") == [(3,)]


# ------------------------------------------------------------------ lifecycle (I5)
def test_a_task_goes_pending_running_completed_and_a_completed_task_is_never_claimed_again(store, backend):
    create(store, n=3)
    assert backend.query("SELECT run_id, export_name, plan_hash, status, max_chunk_attempts, strategy, "
                         "chunk_column, chunk_size FROM chunk_run") == \
        [("orders_r1", "orders", "0123456789abcdef", "in_progress", 3, "range", "id", 10)]
    assert backend.query("SELECT chunk_index, start_key, end_key, window_key, status, attempts FROM chunk_task "
                         "ORDER BY chunk_index") == \
        [(0, "0", "9", "id_000000-000009", "pending", 0), (1, "10", "19", "id_000010-000019", "pending", 0),
         (2, "20", "29", "id_000020-000029", "pending", 0)]

    first = store.claim_next_chunk_task("orders_r1", worker="w1")
    assert (first.chunk_index, first.start_key, first.end_key, first.status, first.attempts, first.worker) == \
        (0, "0", "9", "running", 1, "w1")
    assert task_rows(backend)[0] == (0, "running", 1, None, None, None, "w1")

    store.complete_chunk_task("orders_r1", 0, 7, "orders_20260101_000000_chunk0_0123456789abcdef.parquet")
    assert task_rows(backend)[0] == \
        (0, "completed", 1, None, 7, "orders_20260101_000000_chunk0_0123456789abcdef.parquet", "w1")

    assert [store.claim_next_chunk_task("orders_r1").chunk_index for _ in range(2)] == [1, 2]
    for i in (1, 2):
        store.complete_chunk_task("orders_r1", i, 10, f"part{i}.parquet")
    assert store.claim_next_chunk_task("orders_r1") is None  # I5: nothing completed comes back
    assert [r[1:3] for r in task_rows(backend)] == [("completed", 1)] * 3
    assert store.count_chunk_tasks_not_completed("orders_r1") == 0
    assert store.count_chunk_tasks("orders_r1") == 3
    assert [t.chunk_index for t in store.list_chunk_tasks("orders_r1")] == [0, 1, 2]
    assert store.completed_chunk_files("orders_r1")[1] == "part1.parquet"
    assert store.find_chunk_task_by_file_name("orders_r1", "part2.parquet").chunk_index == 2
    assert store.max_completed_chunk_index("orders_r1") == 2


def test_a_failed_task_is_claimable_again_only_while_attempts_are_below_the_maximum(store, backend):
    create(store, n=2, max_attempts=2)
    assert store.claim_next_chunk_task("orders_r1").chunk_index == 0
    store.fail_chunk_task("orders_r1", 0, "connection reset", retryable=True)
    assert task_rows(backend)[0][:4] == (0, "failed", 1, "connection reset")

    again = store.claim_next_chunk_task("orders_r1")  # lowest index first: the failed one, attempt 2
    assert (again.chunk_index, again.attempts, again.last_error) == (0, 2, "connection reset")
    store.fail_chunk_task("orders_r1", 0, "connection reset again", retryable=True)

    # attempts (2) reached the maximum (2): the next claim skips it
    assert store.claim_next_chunk_task("orders_r1").chunk_index == 1
    store.complete_chunk_task("orders_r1", 1, 3, "p1.parquet")
    assert store.claim_next_chunk_task("orders_r1") is None
    assert [r[:3] for r in task_rows(backend)] == [(0, "failed", 2), (1, "completed", 1)]
    assert store.count_chunk_tasks_not_completed("orders_r1") == 1


def test_a_permanent_failure_pins_attempts_at_the_maximum_until_a_resume_gives_a_fresh_budget(store, backend):
    create(store, n=2, max_attempts=5)
    store.claim_next_chunk_task("orders_r1")
    store.fail_chunk_task("orders_r1", 0, "permission denied for table orders", retryable=False)
    assert task_rows(backend)[0][:4] == (0, "failed", 5, "permission denied for table orders")
    assert store.claim_next_chunk_task("orders_r1").chunk_index == 1  # the pinned task is skipped
    store.complete_chunk_task("orders_r1", 1, 1, "p1.parquet")
    assert store.claim_next_chunk_task("orders_r1") is None

    assert store.reset_failed_chunk_tasks_for_resume("orders_r1") == 1
    assert [r[:3] for r in task_rows(backend)] == [(0, "pending", 0), (1, "completed", 1)]
    claimed = store.claim_next_chunk_task("orders_r1")
    assert (claimed.chunk_index, claimed.attempts) == (0, 1)


def test_resume_resets_stale_running_tasks_to_pending_and_leaves_completed_ones_alone(store, backend):
    create(store, n=4)
    for _ in range(3):
        store.claim_next_chunk_task("orders_r1", worker="crashed")
    store.complete_chunk_task("orders_r1", 0, 5, "p0.parquet")
    # the process dies here: tasks 1 and 2 stay running, nobody will ever finish them
    assert store.reset_stale_running_chunk_tasks("orders_r1") == 2
    assert [r[:3] + r[6:] for r in task_rows(backend)] == \
        [(0, "completed", 1, "crashed"), (1, "pending", 1, None), (2, "pending", 1, None), (3, "pending", 0, None)]
    assert [store.claim_next_chunk_task("orders_r1").chunk_index for _ in range(3)] == [1, 2, 3]
    assert store.reset_stale_running_chunk_tasks("other_run") == 0


# ---------------------------------------------------------------------- finalize (I6)
def test_finalize_refuses_while_any_task_is_not_completed_and_succeeds_once_all_are(store, backend):
    create(store, n=3)
    store.claim_next_chunk_task("orders_r1")
    store.complete_chunk_task("orders_r1", 0, 1, "p0.parquet")
    store.claim_next_chunk_task("orders_r1")
    store.fail_chunk_task("orders_r1", 1, "boom", retryable=False)

    with pytest.raises(ChunkRunIncomplete) as refused:
        store.finalize_chunk_run_completed("orders_r1")
    assert isinstance(refused.value, RuntimeError) and refused.value.not_completed == 2
    message = str(refused.value)
    assert "2 of 3 chunk tasks not completed (1 pending, 1 failed)" in message
    assert "--resume" in message and "reset-chunks" in message
    assert backend.query("SELECT status FROM chunk_run") == [("in_progress",)]

    store.reset_failed_chunk_tasks_for_resume("orders_r1")
    while (task := store.claim_next_chunk_task("orders_r1")) is not None:
        store.complete_chunk_task("orders_r1", task.chunk_index, 1, f"p{task.chunk_index}.parquet")
    store.finalize_chunk_run_completed("orders_r1")
    store.finalize_chunk_run_completed("orders_r1")  # idempotent

    assert backend.query("SELECT status FROM chunk_run") == [("completed",)]
    assert store.find_in_progress_chunk_run("orders") is None
    assert store.get_latest_chunk_run("orders").status == "completed"
    assert store.claim_next_chunk_task("orders_r1") is None  # a finished run hands out nothing
    with pytest.raises(RuntimeError, match="must be in progress"):
        store.reset_chunk_task_for_re_export("orders_r1", 0, "missing at destination")
    with pytest.raises(LookupError):
        store.finalize_chunk_run_completed("no_such_run")


# ------------------------------------------------------------- one in-progress run per export
def test_one_in_progress_run_per_export_is_enforced_by_the_database(store, backend):
    create(store, run_id="orders_r1")
    with pytest.raises(ChunkRunInProgress) as refused:
        create(store, run_id="orders_r2")
    assert str(refused.value) == (
        "export 'orders': a chunk run (run_id orders_r1) is still in progress — resume it with "
        "`rivet run -c … -e orders --resume`, or clear it with `rivet state reset-chunks -c … -e orders`")
    assert refused.value.exit_code == 1
    assert (refused.value.export_name, refused.value.run_id) == ("orders", "orders_r1")
    assert "-c /etc/rivet.yaml -e orders --resume" in str(ChunkRunInProgress.for_run("orders", "r", "/etc/rivet.yaml"))
    assert backend.query("SELECT run_id FROM chunk_run") == [("orders_r1",)]
    assert backend.query("SELECT COUNT(*) FROM chunk_task") == [(3,)]  # the refused run left no tasks

    # the index itself refuses a second in-progress row, even past the store's pre-check
    raw_insert = ("INSERT INTO chunk_run (run_id, export_name, plan_hash, status, created_at, updated_at) "
                  "VALUES ('sneaky', 'orders', 'h', 'in_progress', 't', 't')")
    with pytest.raises(Exception, match="(?i)unique"):
        backend.query(raw_insert)

    create(store, run_id="items_r1", export="items")  # another export is independent
    store.mark_chunk_run_interrupted("orders_r1")
    create(store, run_id="orders_r2")  # an interrupted run no longer blocks
    assert store.find_in_progress_chunk_run("orders").run_id == "orders_r2"
    assert [r.run_id for r in store.list_chunk_runs("orders")] == ["orders_r2", "orders_r1"]
    assert [r.status for r in store.list_chunk_runs("orders", last=1)] == ["in_progress"]
    assert store.get_chunk_run("orders_r1").status == "interrupted"


def _create_run(barrier, results, config: str, url: str, run_id: str) -> None:  # noqa: ANN001
    """Child process: wait for every sibling, then try to start a chunk run for `orders`."""
    try:
        from rivet_core.state import ChunkRunInProgress, StateStore

        store = StateStore.open(config, state_url=url)
        try:
            barrier.wait(timeout=60)
            try:
                store.create_chunk_run(run_id, "orders", "h", 3, "range", "id", 10, tasks(20))
                results.put((run_id, "created"))
            except ChunkRunInProgress as exc:
                results.put((run_id, f"refused:{exc.run_id}"))
        finally:
            store.close()
    except BaseException as exc:  # noqa: BLE001 - report to the parent, which asserts
        results.put((run_id, f"{type(exc).__name__}: {exc}"))


def test_two_processes_racing_to_create_a_run_for_one_export_only_one_wins(backend):
    backend.open().close()  # migrate first: the race is about the run, not the schema
    ctx = multiprocessing.get_context("spawn")
    n = 4
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_create_run, args=(barrier, results, str(backend.config), backend.url, f"r{i}"))
             for i in range(n)]
    for proc in procs:
        proc.start()
    outcomes = dict(results.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join(timeout=30)

    winners = [run_id for run_id, outcome in outcomes.items() if outcome == "created"]
    assert len(winners) == 1, outcomes
    assert sorted(outcomes.values()) == ["created"] + [f"refused:{winners[0]}"] * (n - 1)
    assert backend.query("SELECT run_id, status FROM chunk_run") == [(winners[0], "in_progress")]
    assert backend.query("SELECT DISTINCT run_id FROM chunk_task") == [(winners[0],)]
    assert backend.query("SELECT COUNT(*) FROM chunk_task") == [(20,)]


# --------------------------------------------------------------- specific-task claims
def test_claim_chunk_task_claims_one_specific_window_and_a_completed_one_only_on_purpose(store, backend):
    create(store, n=3, max_attempts=2)
    t1 = store.claim_chunk_task("orders_r1", 1, worker="dagster-run-a")
    assert (t1.chunk_index, t1.status, t1.attempts, t1.worker) == (1, "running", 1, "dagster-run-a")
    assert store.claim_chunk_task("orders_r1", 1, worker="dagster-run-b") is None  # running elsewhere
    assert store.claim_next_chunk_task("orders_r1").chunk_index == 0  # the sequential claim skips it

    store.complete_chunk_task("orders_r1", 1, 10, "first_attempt.parquet", worker="dagster-run-a")
    again = store.claim_chunk_task("orders_r1", 1, worker="dagster-run-c")  # re-materialization
    assert (again.status, again.attempts, again.file_name) == ("running", 1, "first_attempt.parquet")
    store.complete_chunk_task("orders_r1", 1, 11, "second_attempt.parquet", worker="dagster-run-c")
    assert task_rows(backend)[1] == (1, "completed", 1, None, 11, "second_attempt.parquet", "dagster-run-c")

    store.claim_chunk_task("orders_r1", 2)
    store.fail_chunk_task("orders_r1", 2, "syntax error", retryable=False)
    assert store.claim_chunk_task("orders_r1", 2) is None  # pinned: attempts used up
    assert store.claim_chunk_task("orders_r1", 99) is None  # no such window
    assert store.claim_chunk_task("no_such_run", 0) is None
    store.mark_chunk_run_interrupted("orders_r1")
    assert store.claim_chunk_task("orders_r1", 1) is None  # not an in-progress run


def test_a_stale_worker_cannot_complete_or_fail_a_task_it_no_longer_holds(store, backend):
    create(store, n=2)
    store.claim_next_chunk_task("orders_r1", worker="old")
    store.reset_stale_running_chunk_tasks("orders_r1")  # resume took over
    with pytest.raises(ChunkTaskNotRunning, match="it is pending"):
        store.complete_chunk_task("orders_r1", 0, 1, "late.parquet")
    store.claim_next_chunk_task("orders_r1", worker="new")
    with pytest.raises(ChunkTaskNotRunning, match="running by worker 'new'"):
        store.complete_chunk_task("orders_r1", 0, 1, "late.parquet", worker="old")
    with pytest.raises(ChunkTaskNotRunning):
        store.fail_chunk_task("orders_r1", 0, "late failure", retryable=False, worker="old")
    store.complete_chunk_task("orders_r1", 0, 2, "good.parquet", worker="new")
    with pytest.raises(ChunkTaskNotRunning, match="it is completed"):
        store.fail_chunk_task("orders_r1", 0, "late failure", retryable=True)
    with pytest.raises(ChunkTaskNotRunning, match="no such task"):
        store.complete_chunk_task("orders_r1", 42, 0, None)
    assert task_rows(backend)[0] == (0, "completed", 2, None, 2, "good.parquet", "new")  # 2 claims


def test_a_resume_can_send_a_completed_chunk_back_for_re_export_with_the_reason(store, backend):
    create(store, n=2)
    for i in (0, 1):
        store.claim_next_chunk_task("orders_r1")
        store.complete_chunk_task("orders_r1", i, 5, f"p{i}.parquet")
    store.reset_chunk_task_for_re_export("orders_r1", 1, "part p1.parquet missing at the destination")
    assert task_rows(backend)[1] == (1, "pending", 0, "part p1.parquet missing at the destination", None, None, None)
    store.reset_chunk_task_for_re_export("orders_r1", 1, "again")  # not completed: left alone
    assert task_rows(backend)[1][3] == "part p1.parquet missing at the destination"
    with pytest.raises(LookupError):
        store.reset_chunk_task_for_re_export("orders_r1", 9, "x")
    assert store.completed_chunk_files("orders_r1") == {0: "p0.parquet"}
    with pytest.raises(ChunkRunIncomplete, match="1 of 2"):
        store.finalize_chunk_run_completed("orders_r1")


def test_add_chunk_tasks_appends_only_new_windows_and_is_idempotent(store, backend):
    create(store, n=3)
    store.claim_next_chunk_task("orders_r1")
    store.complete_chunk_task("orders_r1", 0, 10, "p0.parquet")
    assert store.add_chunk_tasks("orders_r1", tasks(5)) == 2  # the table grew by two windows
    assert store.add_chunk_tasks("orders_r1", tasks(5)) == 0
    assert [(r[0], r[1]) for r in task_rows(backend)] == \
        [(0, "completed"), (1, "pending"), (2, "pending"), (3, "pending"), (4, "pending")]
    assert backend.query("SELECT window_key FROM chunk_task WHERE chunk_index = 4") == [("id_000040-000049",)]
    store.mark_chunk_run_interrupted("orders_r1")
    with pytest.raises(RuntimeError, match="must be in progress"):
        store.add_chunk_tasks("orders_r1", tasks(1, start=5))


def test_reset_chunk_checkpoint_deletes_runs_with_their_tasks_all_stuck_only_or_failed_only(store, backend):
    create(store, run_id="done", n=1)
    store.claim_next_chunk_task("done")
    store.complete_chunk_task("done", 0, 1, "p.parquet")
    store.finalize_chunk_run_completed("done")
    create(store, run_id="broke", n=2)
    store.claim_next_chunk_task("broke")
    store.fail_chunk_task("broke", 0, "boom", retryable=False)
    store.mark_chunk_run_interrupted("broke")
    create(store, run_id="stuck", n=2)
    create(store, run_id="other", export="items", n=1)

    assert store.reset_chunk_checkpoint("orders", stuck_only=True) == 1
    assert backend.query("SELECT run_id FROM chunk_run ORDER BY run_id") == [("broke",), ("done",), ("other",)]
    assert store.reset_chunk_checkpoint("orders", failed_only=True) == 1
    assert backend.query("SELECT run_id FROM chunk_run ORDER BY run_id") == [("done",), ("other",)]
    assert store.reset_chunk_checkpoint("orders") == 1
    assert store.reset_chunk_checkpoint("orders") == 0
    assert backend.query("SELECT run_id FROM chunk_run") == [("other",)]
    assert backend.query("SELECT DISTINCT run_id FROM chunk_task") == [("other",)]


def test_record_committed_chunked_only_moves_the_committed_chunk_forward(store, backend):
    store.record_committed_chunked("orders", 3, "r1")
    store.record_committed_chunked("orders", 2, "r2")  # behind: no-op
    store.record_committed_chunked("orders", 3, "r3")  # equal: no-op
    assert backend.query("SELECT last_committed_strategy, last_committed_chunk_index, last_committed_run_id, "
                         "last_committed_cursor FROM export_progression") == [("chunked", 3, "r1", None)]
    store.record_committed_chunked("orders", 7, "r4")
    assert backend.query("SELECT last_committed_chunk_index, last_committed_run_id FROM export_progression") == \
        [(7, "r4")]


def test_on_postgresql_a_claim_skips_a_task_locked_by_another_claimer_instead_of_waiting_or_giving_up(pg_url, tmp_path):
    """A concurrent claimer holds task 0's row lock and a share lock on the run row (what an
    in-flight claim_chunk_task holds): the next claim takes task 1 at once — it neither waits
    nor reports 'nothing left' (which locking the joined chunk_run row would do)."""
    import threading

    import psycopg

    store = StateStore.open(tmp_path / "rivet.yaml", state_url=pg_url)
    try:
        create(store, n=3)
        with psycopg.connect(pg_url) as other:  # one open transaction until the block ends
            other.execute("SELECT 1 FROM chunk_run WHERE run_id = 'orders_r1' FOR SHARE")
            other.execute("SELECT 1 FROM chunk_task WHERE run_id = 'orders_r1' AND chunk_index = 0 FOR UPDATE")
            got: list = []
            claimer = threading.Thread(target=lambda: got.append(store.claim_next_chunk_task("orders_r1")))
            claimer.start()
            claimer.join(timeout=10)
            assert not claimer.is_alive(), "the claim waited on a locked row instead of skipping it"
            other.rollback()
        assert got[0] is not None and got[0].chunk_index == 1
        assert pg_exec(pg_url, "SELECT chunk_index, status FROM chunk_task ORDER BY chunk_index") == \
            [(0, "pending"), (1, "running"), (2, "pending")]
    finally:
        store.close()


# ----------------------------------------------------- several processes draining one run
def _drain(barrier, results, config: str, url: str, worker: str, run_id: str) -> None:  # noqa: ANN001
    """Child process: claim → tiny work → complete until nothing is left; report the claims."""
    try:
        import hashlib

        from rivet_core.state import StateStore

        store = StateStore.open(config, state_url=url)
        claimed: list[tuple[int, int]] = []
        try:
            barrier.wait(timeout=60)
            while (task := store.claim_next_chunk_task(run_id, worker=worker)) is not None:
                claimed.append((task.chunk_index, task.attempts))
                digest = hashlib.sha256(f"{task.start_key}:{task.end_key}".encode()).hexdigest()[:16]
                store.complete_chunk_task(run_id, task.chunk_index, task.chunk_index,
                                          f"part_{task.chunk_index}_{digest}.parquet", worker=worker)
        finally:
            store.close()
        results.put((worker, claimed))
    except BaseException as exc:  # noqa: BLE001 - report to the parent, which asserts
        results.put((worker, f"{type(exc).__name__}: {exc}"))


def test_several_processes_draining_one_run_at_once_claim_every_chunk_exactly_once(backend):
    n_tasks, n_workers = 200, 4
    store = backend.open()
    create(store, run_id="big", n=n_tasks)
    store.close()

    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(n_workers), ctx.Queue()
    procs = [ctx.Process(target=_drain, args=(barrier, results, str(backend.config), backend.url, f"w{i}", "big"))
             for i in range(n_workers)]
    for proc in procs:
        proc.start()
    reports = dict(results.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join(timeout=30)
    assert [proc.exitcode for proc in procs] == [0] * n_workers
    assert all(isinstance(claims, list) for claims in reports.values()), reports

    claimed = Counter(idx for claims in reports.values() for idx, _ in claims)
    assert sorted(claimed) == list(range(n_tasks)) and set(claimed.values()) == {1}  # none twice, none missed
    assert {attempts for claims in reports.values() for _, attempts in claims} == {1}
    assert sum(1 for claims in reports.values() if claims) >= 2, "the run was not drained concurrently"

    owner = {idx: worker for worker, claims in reports.items() for idx, _ in claims}
    rows = backend.query("SELECT chunk_index, status, attempts, rows_written, worker FROM chunk_task "
                         "WHERE run_id = 'big' ORDER BY chunk_index")
    assert rows == [(i, "completed", 1, i, owner[i]) for i in range(n_tasks)]
    finisher = backend.open()
    try:
        finisher.finalize_chunk_run_completed("big")
    finally:
        finisher.close()
    assert backend.query("SELECT status FROM chunk_run WHERE run_id = 'big'") == [("completed",)]


def test_on_postgresql_two_openers_of_the_same_run_id_the_loser_is_told_the_run_is_in_progress(pg_url, tmp_path):
    """Two window batches of one export open its chunk run in the same millisecond, so with
    the same run id (`new_run_id`): both pre-checks see no run in progress, the second
    INSERT waits on the first's primary key, then fails. The loser must hear
    ChunkRunInProgress (its caller then joins the winner's run), not a raw
    `duplicate key value violates unique constraint "chunk_run_pkey"` (issue 39 finding 5)."""
    import threading

    import psycopg

    store = StateStore.open(tmp_path / "rivet.yaml", state_url=pg_url)
    try:
        with psycopg.connect(pg_url) as other:  # the winner's transaction, open until commit below
            other.execute("INSERT INTO chunk_run (run_id, export_name, plan_hash, status, max_chunk_attempts, "
                          "created_at, updated_at) VALUES ('orders_r1', 'orders', '0123456789abcdef', "
                          "'in_progress', 3, '2026-12-07T00:00:00+00:00', '2026-12-07T00:00:00+00:00')")
            outcome: list[BaseException | None] = []

            def open_run() -> None:
                try:
                    create(store)
                    outcome.append(None)
                except BaseException as exc:  # noqa: BLE001 - reported to the test thread
                    outcome.append(exc)

            opener = threading.Thread(target=open_run)
            opener.start()
            deadline = time.monotonic() + 30
            while not pg_exec(pg_url, "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                      "AND query LIKE 'INSERT INTO chunk_run%'"):
                assert opener.is_alive() and time.monotonic() < deadline, outcome
                time.sleep(0.02)  # until the opener waits on the winner's key (bounded)
            other.commit()
            opener.join(timeout=30)
        assert len(outcome) == 1 and isinstance(outcome[0], ChunkRunInProgress), outcome
        assert outcome[0].run_id == "orders_r1"
    finally:
        store.close()
