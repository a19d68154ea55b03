"""`StateStore.withdraw_chunk_run` on SQLite and PostgreSQL (issue 15 item 5): a withdrawn run
is interrupted (never resumed nor continued), its completed tasks failed with the reason and
their budget spent; tasks that were not completed keep their state."""

from __future__ import annotations

from tests.state.test_chunk_store import backend, create, store, task_rows  # noqa: F401 - fixtures


def test_a_withdrawn_chunk_run_is_interrupted_and_its_completed_tasks_failed_with_the_reason(store, backend):
    create(store, n=3, max_attempts=4)
    for index in (0, 1):
        assert store.claim_chunk_task("orders_r1", index, worker="w") is not None
        store.complete_chunk_task("orders_r1", index, 10, f"part{index}.parquet", worker="w")

    assert store.withdraw_chunk_run("orders_r1", "withdrawn: row_count 20 below minimum 30") == 2

    assert backend.query("SELECT status FROM chunk_run WHERE run_id = 'orders_r1'") == [("interrupted",)]
    rows = task_rows(backend)
    assert [(r[0], r[1], r[2], r[3]) for r in rows[:2]] == [
        (i, "failed", 4, "withdrawn: row_count 20 below minimum 30") for i in (0, 1)]
    assert rows[2][1] == "pending" and rows[2][3] is None
    assert store.find_in_progress_chunk_run("orders") is None  # a fresh run may start
    assert store.claim_next_chunk_task("orders_r1", worker="w") is None  # nothing of it runs again


def test_a_completed_chunk_run_can_be_withdrawn_too(store, backend):
    create(store, n=1)
    assert store.claim_chunk_task("orders_r1", 0, worker="w") is not None
    store.complete_chunk_task("orders_r1", 0, 10, "part0.parquet", worker="w")
    assert store.finalize_chunk_run_completed("orders_r1")
    assert store.withdraw_chunk_run("orders_r1", "withdrawn") == 1
    assert backend.query("SELECT status FROM chunk_run") == [("interrupted",)]
