"""Issue 7 item 1: the state facades stay correct when many workers of one export write at once.

Threads released together by a barrier stand in for the processes of a distributed run (each
uses its own pooled connection, exactly as separate processes would). On PostgreSQL these
races used to lose data: two first `record_durable_part` calls of one run both inserted the
`running` metrics row, and the loser's transaction — with its file_log row — was rolled back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rivet_core.state import StateStore

WORKERS = 6


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else ""
    s = StateStore.open(tmp_path / "rivet.yaml", url)
    yield s
    s.close()


def together(n: int, work: Callable[[int], object]) -> list[object]:
    """Run work(0..n-1) on n threads released at once; re-raise the first error."""
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    if errors:
        raise errors[0]
    return results


def test_parallel_parts_of_one_run_are_all_logged_and_projected_once(store: StateStore) -> None:
    def record(i: int) -> None:
        store.record_durable_part(run_id="orders_r1", export_name="orders", file_name=f"part{i}.parquet",
                                  rows=10 + i, size_bytes=100 + i, format="parquet", compression="zstd",
                                  mode="chunked")

    for _ in range(3):  # a few rounds: the race is about the first writers of a run
        together(WORKERS, record)
    files = store.list_files_for_run("orders_r1")
    assert sorted(f.file_name for f in files) == sorted(f"part{i}.parquet" for i in range(WORKERS))
    running = [m for m in store.list_metrics("orders") if m["run_id"] == "orders_r1"]
    assert len(running) == 1 and running[0]["status"] == "running"
    assert running[0]["total_rows"] == sum(10 + i for i in range(WORKERS))  # every part projected
    assert running[0]["files_committed"] == WORKERS


def test_of_racing_finalizers_exactly_one_makes_the_transition(store: StateStore) -> None:
    store.create_chunk_run("orders_r1", "orders", "h", 3, "range", "id", 10,
                           [(i, str(i * 10), str(i * 10 + 10), f"k{i}") for i in range(3)],
                           completed={i: (10, f"p{i}") for i in range(3)})
    outcomes = together(WORKERS, lambda _: store.finalize_chunk_run_completed("orders_r1"))
    assert sorted(outcomes) == [False] * (WORKERS - 1) + [True]
    assert store.get_chunk_run("orders_r1").status == "completed"


def test_parallel_progression_writes_keep_the_highest_boundary(store: StateStore) -> None:
    together(WORKERS, lambda i: store.record_committed_chunked("orders", i, f"orders_r{i}"))
    row = store.get_progression("orders")
    assert row is not None and row["last_committed_chunk_index"] == WORKERS - 1
