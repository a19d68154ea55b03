"""`rivet run --reconcile` on PostgreSQL and MariaDB (issue 15 item 2).

The count is taken in the export's own snapshot: rows committed while the export streams
are in neither the rows nor the count (no mismatch), and a query whose result is not a
function of the snapshot (each execution widens its filter) makes the count differ from
the rows written — the run fails with exit 3 before anything is published, and the
cursor stays where it was. Every verdict is checked against the destination re-read with
pyarrow and the source queried directly, never against the tool's counters alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import (
    REPO,
    cursor_of,
    data_files,
    db_exec,
    manifest_ids,
    rivet_quick,
    source_block,
    state_rows,
    success_manifests,
    write_config,
)


def _ts(url: str, minutes: int) -> str:
    if url.startswith("postgres"):
        return f"TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '{minutes} minutes'"
    return f"TIMESTAMP '2026-01-01 00:00:00' + INTERVAL {minutes} MINUTE"


def _insert(url: str, ids: range) -> None:
    rows = ", ".join(f"({i}, 'n{i}', {_ts(url, i)})" for i in ids)
    db_exec(url, f"INSERT INTO items (id, name, updated_at) VALUES {rows}")


@pytest.fixture(params=["postgres", "mysql"])
def url(request: pytest.FixtureRequest) -> str:
    u = request.getfixturevalue("pg_url" if request.param == "postgres" else "mysql_url")
    db_exec(u, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), updated_at TIMESTAMP NULL)")
    return u


def _config(tmp_path: Path, url: str, **extra) -> Path:  # noqa: ANN003
    export = {"name": "items", "mode": "incremental", "cursor_column": "updated_at", "format": "parquet",
              "destination": {"type": "local", "path": "out"}, **extra}
    if "query" not in export:
        export["table"] = "items"
    return write_config(tmp_path, source_block(url), [export])


def _metrics(config: Path) -> list[tuple]:
    return state_rows(config, "SELECT status, total_rows, source_count, reconciled FROM export_metrics "
                              "WHERE status != 'running' ORDER BY id")


def test_rows_committed_during_the_export_are_in_neither_the_rows_nor_the_count(tmp_path, url):
    _insert(url, range(1, 31))
    config = _config(tmp_path, url, tuning={"batch_size": 5})
    pause = tmp_path / "pause"
    pause.mkdir()
    env = {**os.environ, "RIVET_TEST_PAUSE_AT": "during_source_read", "RIVET_TEST_PAUSE_DIR": str(pause),
           "RIVET_TEST_PAUSE_TIMEOUT_S": "120"}
    proc = subprocess.Popen([sys.executable, "-m", "rivet_core.cli", "run", "-c", str(config), "--reconcile",
                             "--json"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 120
        while not (pause / "during_source_read.reached").exists():  # the barrier file, bounded
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the export never reached during_source_read"
            time.sleep(0.02)
        _insert(url, range(31, 38))  # committed while the export's read is open
        (pause / "during_source_read.release").touch()
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    run = json.loads(out)["runs"][0]
    assert run["reconciled"] is True and run["source_row_count"] == 30
    assert db_exec(url, "SELECT COUNT(*) FROM items")[0][0] == 37  # the insert did land meanwhile
    out_dir = tmp_path / "out"
    assert manifest_ids(out_dir) == list(range(1, 31))  # re-read with pyarrow
    (manifest,) = success_manifests(out_dir)
    assert manifest["source"]["extraction"]["source_row_count"] == 30
    assert manifest["row_count"] == 30
    assert _metrics(config) == [("success", 30, 30, 1)]
    journal = state_rows(config, "SELECT journal_json FROM run_journal")
    entries = json.loads(journal[0][0])["entries"]
    events = [next(iter(e["event"])) for e in entries]
    assert "ReconciliationResult" in events and entries[0]["event"]["PlanResolved"]["reconcile"] is True
    result = next(e["event"]["ReconciliationResult"] for e in entries if "ReconciliationResult" in e["event"])
    assert result == {"source_count": 30, "exported_rows": 30, "matched": True}

    # The next run counts its own slice: the cursor range, not the table.
    second = rivet_quick("run", "-c", str(config), "--reconcile", "--json")
    assert second.returncode == 0, second.stderr
    run2 = json.loads(second.stdout)["runs"][0]
    assert run2["source_row_count"] == 7 and run2["reconciled"] is True
    assert manifest_ids(out_dir) == list(range(1, 38))
    assert _metrics(config)[-1] == ("success", 7, 7, 1)


def _widening_query(url: str) -> str:
    """Each execution in a session sees 10 more ids than the one before (a session variable
    counts the executions): the rows streamed and the COUNT that follows them differ, in one
    snapshot, exactly as a reader that lost rows would make them differ."""
    if url.startswith("postgres"):
        return ("WITH x AS MATERIALIZED (SELECT set_config('rivet_test.n', (coalesce(nullif("
                "current_setting('rivet_test.n', true), ''), '0')::int + 1)::text, false)::int AS k) "
                "SELECT t.id, t.name, t.updated_at FROM items t, x WHERE t.id <= 10 * x.k")
    return ("SELECT t.id, t.name, t.updated_at FROM items t "
            "JOIN (SELECT @rivet_n := COALESCE(@rivet_n, 0) + 1 AS k) AS x ON t.id <= 10 * x.k")


def test_a_count_that_differs_fails_the_run_before_anything_is_published(tmp_path, url):
    _insert(url, range(1, 201))
    config = _config(tmp_path, url, query=_widening_query(url))
    result = rivet_quick("run", "-c", str(config), "--reconcile", "--json")
    assert result.returncode == 3, result.stderr
    run = json.loads(result.stdout)["runs"][0]
    assert run["status"] == "failed" and run["reconciled"] is False
    assert "reconcile mismatch" in run["error"]
    assert run["source_row_count"] is not None and run["source_row_count"] > 0
    out_dir = tmp_path / "out"
    # Nothing at the destination: no part, no manifest (not even the failed run's copy), no _SUCCESS.
    assert not out_dir.exists() or not any(out_dir.iterdir())
    assert data_files(tmp_path) == []
    assert cursor_of(config, "items") is None
    ((status, total_rows, source_count, reconciled),) = _metrics(config)
    assert (status, reconciled) == ("failed", 0) and source_count == run["source_row_count"]
    report = json.loads((tmp_path / ".rivet" / "runs" / run["run_id"] / "summary.json").read_text())
    assert report["reconciliation"] == {"source_count": source_count, "matched": False,
                                        "exported_rows": report["reconciliation"]["exported_rows"]}
    assert report["reconciliation"]["exported_rows"] != source_count

    # Without --reconcile the same export publishes (the gate alone failed the run).
    plain = rivet_quick("run", "-c", str(config), "--json")
    assert plain.returncode == 0, plain.stderr
    (manifest,) = success_manifests(out_dir)
    assert "source_row_count" not in manifest["source"]["extraction"]
    assert len(manifest_ids(out_dir)) == manifest["row_count"] > 0

    # A mismatch on a later run leaves the published prefix and the moved cursor exactly as they were.
    cursor, canonical, marker = cursor_of(config, "items"), (out_dir / "manifest.json").read_bytes(), \
        (out_dir / "_SUCCESS").read_bytes()
    files = data_files(out_dir)
    _insert(url, range(201, 261))
    again = rivet_quick("run", "-c", str(config), "--reconcile", "--json")
    assert again.returncode == 3, again.stderr
    assert cursor_of(config, "items") == cursor is not None
    assert (out_dir / "manifest.json").read_bytes() == canonical and (out_dir / "_SUCCESS").read_bytes() == marker
    assert data_files(out_dir) == files


def test_a_chunked_run_counts_each_window_in_its_own_snapshot(tmp_path, url):
    _insert(url, range(1, 51))
    config = write_config(tmp_path, source_block(url), [
        {"name": "items", "table": "items", "mode": "chunked", "chunk_column": "id", "chunk_size": 20,
         "chunk_checkpoint": True, "format": "parquet", "destination": {"type": "local", "path": "out"}}])
    result = rivet_quick("run", "-c", str(config), "--reconcile", "--json")
    assert result.returncode == 0, result.stderr
    run = json.loads(result.stdout)["runs"][0]
    assert run["source_row_count"] == 50 and run["reconciled"] is True
    (manifest,) = success_manifests(tmp_path / "out")
    assert manifest["source"]["extraction"] == {"strategy": "chunked", "source_row_count": 50}
    assert manifest_ids(tmp_path / "out") == list(range(1, 51))
    assert _metrics(config) == [("success", 50, 50, 1)]


def test_a_chunked_window_whose_count_differs_is_not_published(tmp_path, pg_url):
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), updated_at TIMESTAMP NULL)")
    _insert(pg_url, range(1, 201))
    config = write_config(tmp_path, source_block(pg_url), [
        {"name": "items", "query": _widening_query(pg_url), "mode": "chunked", "chunk_column": "id",
         "chunk_size": 100, "chunk_checkpoint": True, "format": "parquet",
         "destination": {"type": "local", "path": "out"}}])
    result = rivet_quick("run", "-c", str(config), "--reconcile", "--json")
    assert result.returncode == 3, result.stderr
    run = json.loads(result.stdout)["runs"][0]
    assert run["status"] == "failed" and "reconcile mismatch in window" in run["error"]
    out = tmp_path / "out"
    assert not out.exists() or (success_manifests(out) == [] and not (out / "_SUCCESS").exists())
    assert data_files(tmp_path) == []  # the differing window wrote nothing (the other one is empty)
