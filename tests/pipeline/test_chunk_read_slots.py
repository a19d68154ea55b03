"""Chunked drains run `parallel + 1` workers but at most `parallel` source queries: the
extra worker encodes and publishes a finished window while the next window reads
(rivet_core/pipeline/chunked/run.py `_run_workers`, chunk_commit `WindowContext.read_slots`)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from rivet_core.api import load_config
from rivet_core.pipeline.chunked.run import chunked_run_for
from rivet_core.pipeline.facade import chunk_commit
from tests.helpers import write_config


def sqlite_config(tmp_path: Path, parallel: int) -> Path:
    db = tmp_path / "s.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(1, 401)])
    return write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{db}"}, [{
        "name": "t", "table": "t", "mode": "chunked", "chunk_column": "id", "chunk_count": 8,
        "parallel": parallel, "format": "parquet",
        "destination": {"type": "local", "path": str(tmp_path / "out")}}])


@pytest.mark.parametrize("parallel", [1, 2])
def test_reads_stay_within_parallel_while_a_finished_window_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: int
) -> None:
    cond = threading.Condition()
    state: dict[str, Any] = {"active": 0, "max_active": 0, "opened": 0, "overlap": None}
    real_open = chunk_commit.WindowContext.source  # a window's read (its worker's session)
    real_finish = chunk_commit.PartRotator.finish

    @contextlib.contextmanager
    def counting_open(ctx: Any) -> Iterator[Any]:
        with cond:
            state["active"] += 1
            state["opened"] += 1
            state["max_active"] = max(state["max_active"], state["active"])
            cond.notify_all()
            # A window gives its slot back as soon as its rows are read, and these reads are
            # tiny: hold the first ones until `parallel` run at once, to see the slots allow it.
            cond.wait_for(lambda: state["max_active"] >= parallel, timeout=20)
        try:
            with real_open(ctx) as source:
                yield source
        finally:
            with cond:
                state["active"] -= 1

    def finish(self: Any) -> Any:
        with cond:
            if state["overlap"] is None:  # the first window to finish waits for one more query
                state["overlap"] = False
                state["overlap"] = cond.wait_for(lambda: state["opened"] > parallel, timeout=20)
        return real_finish(self)

    monkeypatch.setattr(chunk_commit.WindowContext, "source", counting_open)
    monkeypatch.setattr(chunk_commit.PartRotator, "finish", finish)
    config = load_config(sqlite_config(tmp_path, parallel))
    summary = chunked_run_for(config, config.export("t")).run()

    assert summary.status == "success", summary
    assert state["overlap"] is True  # the next window's query ran while one was finishing
    assert state["max_active"] == parallel  # never more source queries than `parallel`
    ids = sorted(i for f in (tmp_path / "out" / "data").glob("*.parquet")
                 for i in pq.read_table(f).column("id").to_pylist())
    assert ids == list(range(1, 401))
