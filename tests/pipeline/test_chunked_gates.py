"""Gates before publish in chunked runs, and the two finalize ordering rules (issue 15 items 5, 9).

Every run is the real `rivet` CLI against the real PostgreSQL / MariaDB servers. The oracle
never trusts the tool's counters: it lists the destination, re-reads parts with pyarrow and
reads the checkpoint, the cursor and the run report from the state DB / disk.

1. A chunked run whose total quality gate fails (`row_count_min` over the whole export, only
   judged after every window was written) publishes nothing: its windows' parts are moved to
   `_quarantine/<run_id>/` (all rows still there), no manifest / `_SUCCESS`, the chunk run is
   `interrupted` with every task `failed` carrying the gate's reason; the next run starts clean
   and exports every row exactly once. A resume whose gate fails withdraws the windows it
   kept too; a keyset_incremental run keeps its cursor and the last delivery; schema drift
   `fail` is refused on the probe, before any window (nothing to withdraw).
2. A failing manifest write (the destination refuses `manifest.json`: a directory stands in
   its place) fails the run with the cursor unmoved; the re-run exports every row exactly once.
3. Validate comes before the run report and the notification: a part damaged between the
   manifest write and validate (paused at `after_cursor_commit`) is in the verdict the report
   and the webhook body carry.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from rivet_core.manifest.layout import run_token
from tests.hardening.support import PauseBarrier
from tests.helpers import (
    REPO,
    cursor_of,
    data_files,
    db_exec,
    manifest_ids,
    read_table,
    source_block,
    state_rows,
    write_config,
)
from tests.pipeline.test_chunked_cli import (  # noqa: F401 - module fixtures
    ITEMS,
    KILLED,
    ROWS,
    _admin,
    _sqlite_state_beside_the_config,
    _with_db,
    assert_checkpoint_closed,
    assert_no_untracked_parts,
    canonical_rows,
    config_for,
    mysql_items,
    pg_items,
    run,
    source_rows,
)

WINDOWS = 7  # ids 1..300 in windows of 50 on the grid: 0..6, none empty


@pytest.fixture(params=[pytest.param("pg", marks=pytest.mark.postgres),
                        pytest.param("mysql", marks=pytest.mark.mysql)])
def items_url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("pg_items" if request.param == "pg" else "mysql_items")


def published(out: Path) -> dict[str, bytes]:
    """Every object at the prefix outside `_quarantine/` (parts under `data/`, manifests,
    `_SUCCESS`) → its bytes."""
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*")
            if p.is_file() and p.relative_to(out).parts[0] != "_quarantine"}


def quarantined(out: Path) -> list[Path]:
    return sorted(p for p in (out / "_quarantine").rglob("*") if p.is_file()) if (out / "_quarantine").exists() \
        else []


# ===================================================== 1. the total quality gate of a chunked run
@pytest.mark.parametrize("checkpoint", [True, False])
@pytest.mark.parametrize("parallel", [1, 3])
def test_a_failing_total_quality_gate_withdraws_every_window_and_the_next_run_starts_clean(
        tmp_path, items_url, checkpoint, parallel):
    config = config_for(tmp_path, items_url, parallel=parallel, chunk_checkpoint=checkpoint,
                        quality={"row_count_min": ROWS + 1})
    out = tmp_path / "out"
    failed = run(config)
    assert failed.returncode == 3, failed.stderr
    assert f"row_count {ROWS} below minimum {ROWS + 1}" in failed.stderr

    # Nothing published: no data object outside _quarantine, no manifest, no marker.
    assert data_files(out) == []
    assert sorted(p.name for p in out.iterdir()) == ["_quarantine"]
    # … and nothing lost: the withdrawn windows hold every source row exactly once.
    [run_id] = [r for (r,) in state_rows(config, "SELECT run_id FROM export_metrics WHERE status = 'failed'")]
    moved = quarantined(out)
    assert len(moved) == WINDOWS
    assert {p.relative_to(out).parts[:2] for p in moved} == {("_quarantine", run_token(run_id))}
    table = pa.concat_tables([read_table(p) for p in moved])
    assert sorted(zip(table.column("id").to_pylist(), table.column("name").to_pylist(), strict=True)) \
        == sorted(source_rows(items_url, ITEMS))
    metric = state_rows(config, "SELECT status, quality_passed, files_committed FROM export_metrics")
    assert metric == [("failed", 0, 0)]

    if checkpoint:  # the checkpoint says what happened
        assert state_rows(config, "SELECT status FROM chunk_run") == [("interrupted",)]
        tasks = state_rows(config, "SELECT status, last_error FROM chunk_task")
        assert len(tasks) == WINDOWS
        for status, error in tasks:
            assert status == "failed" and f"row_count {ROWS} below minimum" in error and "_quarantine/" in error
        assert state_rows(config, "SELECT * FROM export_progression") == []
    else:
        assert state_rows(config, "SELECT * FROM chunk_run") == []

    # The gate fixed, the next run starts clean (no --resume needed, none possible) and exports
    # every row exactly once.
    fixed = config_for(tmp_path, items_url, parallel=parallel, chunk_checkpoint=checkpoint,
                       quality={"row_count_min": ROWS})
    again = run(fixed, "--validate")
    assert again.returncode == 0, again.stderr
    assert canonical_rows(out, ["id", "name"]) == source_rows(items_url, ITEMS)
    assert_no_untracked_parts(out)
    assert len(quarantined(out)) == WINDOWS  # the withdrawn parts were never touched again
    if checkpoint:
        runs = dict(state_rows(config, "SELECT status, COUNT(*) FROM chunk_run GROUP BY status"))
        assert runs == {"interrupted": 1, "completed": 1}
        completed = state_rows(config, "SELECT t.status FROM chunk_task t JOIN chunk_run r ON t.run_id = r.run_id "
                                       "WHERE r.status = 'completed'")
        assert completed == [("completed",)] * WINDOWS


def test_a_resume_after_a_withdrawn_run_is_refused_and_a_fresh_run_is_not(tmp_path, pg_items):
    config = config_for(tmp_path, pg_items, chunk_checkpoint=True, quality={"row_count_max": ROWS - 1})
    assert run(config).returncode == 3
    resumed = run(config, "--resume")
    assert resumed.returncode != 0 and "no in-progress chunk checkpoint" in resumed.stderr
    assert data_files(tmp_path / "out") == []


# ===================================================== 2. a failing manifest write (I8 amendment)
@pytest.fixture(params=[pytest.param("TEST_PG_DSN", marks=pytest.mark.postgres),
                        pytest.param("TEST_MYSQL_DSN", marks=pytest.mark.mysql)])
def events_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of our own with events(id, name): the tests insert into it."""
    admin = _admin(request.param)
    db = f"rivet_mf_{uuid.uuid4().hex[:10]}"
    pg = request.param == "TEST_PG_DSN"
    db_exec(admin, f'CREATE DATABASE "{db}"' if pg else f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4")
    url = _with_db(admin, db)
    db_exec(url, "CREATE TABLE events (id INT PRIMARY KEY, name VARCHAR(50) NOT NULL)")
    yield url
    db_exec(admin, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)' if pg else f"DROP DATABASE IF EXISTS `{db}`")


def insert_events(url: str, ids: range) -> None:
    db_exec(url, "INSERT INTO events VALUES " + ", ".join(f"({i}, 'event {i}')" for i in ids))


def events_config(tmp_path: Path, url: str, **top) -> Path:  # noqa: ANN003
    export = {"name": "events", "table": "events", "mode": "incremental", "cursor_column": "id",
              "format": "parquet", "destination": {"type": "local", "path": "out"}}
    return write_config(tmp_path, source_block(url), [export], **top)


def test_a_failing_manifest_write_fails_the_run_with_the_cursor_unmoved(tmp_path, events_url):
    insert_events(events_url, range(1, 41))
    config = events_config(tmp_path, events_url)
    out = tmp_path / "out"
    first = run(config)
    assert first.returncode == 0, first.stderr
    assert cursor_of(config, "events") == "40"
    good_manifest, good_marker = (out / "manifest.json").read_bytes(), (out / "_SUCCESS").read_bytes()

    # The destination refuses the next manifest.json: a directory stands where it goes.
    insert_events(events_url, range(41, 71))
    (out / "manifest.json").unlink()
    (out / "manifest.json").mkdir()
    refused = run(config)
    assert refused.returncode != 0, refused.stderr
    assert "manifest write failed" in refused.stderr
    assert cursor_of(config, "events") == "40"  # unmoved
    assert (out / "_SUCCESS").read_bytes() == good_marker  # the old marker, not a new one
    assert state_rows(config, "SELECT status FROM export_metrics ORDER BY id") == [("success",), ("failed",)]
    assert len(list(out.glob("manifest-*.json"))) == 1  # no per-run copy of the refused run either
    # Its part was written (the data is durable) but no manifest lists it.
    assert len(data_files(out)) == 2

    # The destination accepts manifests again; the re-run exports ids 41..70 again, from the
    # unmoved cursor, and every source row is listed exactly once.
    (out / "manifest.json").rmdir()
    insert_events(events_url, range(71, 81))
    again = run(config, "--validate")
    assert again.returncode == 0, again.stderr
    assert cursor_of(config, "events") == "80"
    assert (out / "manifest.json").read_bytes() != good_manifest
    assert manifest_ids(out) == list(range(1, 81))  # every listed part re-read with pyarrow
    latest = json.loads((out / "manifest.json").read_text())
    assert sorted(i for p in latest["parts"] for i in read_table(out / p["path"]).column("id").to_pylist()) \
        == list(range(41, 81))


# ===================================================== 3. validate before report and notification
def test_the_report_and_the_webhook_carry_the_verdict_of_validate(tmp_path, events_url, httpserver):
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    insert_events(events_url, range(1, 21))
    config = events_config(tmp_path, events_url, notifications={
        "webhook": {"url": httpserver.url_for("/hook"), "on": ["failure", "success"], "timeout_s": 5}})
    out = tmp_path / "out"

    # Run 1: validate passes; the report and the webhook say so.
    ok = run(config, "--validate", "--json")
    assert ok.returncode == 0, ok.stderr
    (request, _), = httpserver.log
    body = json.loads(request.get_data())
    assert body["status"] == "success" and body["validated"] is True
    report = _report(config, json.loads(ok.stdout)["runs"][0]["run_id"])
    assert report["validation"]["passed"] is True

    # Run 2: the part is damaged after the manifest (and the cursor) landed, before validate
    # runs. The verdict — failed, naming the part — must be in the report and the webhook.
    insert_events(events_url, range(21, 31))
    barrier = PauseBarrier(tmp_path / "pause", "after_cursor_commit")
    proc = subprocess.Popen([sys.executable, "-m", "rivet_core.cli", "run", "-c", str(config), "--validate",
                             "--json"], cwd=REPO, env={**os.environ, **barrier.env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        barrier.wait(proc)
        latest = json.loads((out / "manifest.json").read_text())
        [part] = latest["parts"]
        with open(out / part["path"], "ab") as f:  # a different size: every depth sees it
            f.write(b"damage")
        barrier.release()
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, stderr
    assert len(httpserver.log) == 2
    body = json.loads(httpserver.log[1][0].get_data())
    assert body["validated"] is False
    report = _report(config, json.loads(stdout)["runs"][0]["run_id"])
    assert report["validation"]["passed"] is False
    assert part["path"] in json.dumps(report["validation"]["manifest"])
    markdown = next((tmp_path / ".rivet" / "runs").glob("*/summary.md"), None)
    assert markdown is not None
    shutil.rmtree(tmp_path / "pause")


def _report(config: Path, run_id: str) -> dict:
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in run_id)
    return json.loads((config.parent / ".rivet" / "runs" / safe / "summary.json").read_text())


@pytest.mark.postgres
def test_a_resume_whose_total_gate_fails_withdraws_the_kept_windows_too(tmp_path, pg_items):
    config = config_for(tmp_path, pg_items, chunk_checkpoint=True, quality={"row_count_min": ROWS + 1})
    out = tmp_path / "out"
    crashed = run(config, RIVET_TEST_PANIC_AT="after_chunk_complete:3")
    assert crashed.returncode == KILLED, crashed.stderr
    kept = {f for (f,) in state_rows(config, "SELECT file_name FROM chunk_task WHERE status = 'completed'")}
    assert kept and data_files(out)

    resumed = run(config, "--resume")
    assert resumed.returncode == 3, resumed.stderr
    assert data_files(out) == [] and not (out / "manifest.json").exists() and not (out / "_SUCCESS").exists()
    names = {p.name for p in quarantined(out)}
    assert {Path(f).name for f in kept} <= names  # the windows the resume kept were withdrawn with the rest
    ids = pa.concat_tables([read_table(p) for p in quarantined(out)]).column("id").to_pylist()
    assert set(ids) == set(range(1, ROWS + 1))  # nothing lost
    assert state_rows(config, "SELECT status FROM chunk_run") == [("interrupted",)]
    assert {s for (s,) in state_rows(config, "SELECT status FROM chunk_task")} == {"failed"}


# ===================================================== schema drift `fail` in a chunked run
@pytest.mark.parametrize("checkpoint", [True, False])
def test_schema_drift_fail_in_a_chunked_run_publishes_nothing_and_leaves_the_last_delivery_whole(
        tmp_path, items_url, checkpoint):
    out = tmp_path / "out"
    base = {"chunk_checkpoint": checkpoint, "on_schema_drift": "fail", "table": None}
    first = run(config_for(tmp_path, items_url, query="SELECT id, name FROM items", **base))
    assert first.returncode == 0, first.stderr
    good = published(out)

    drifted = config_for(tmp_path, items_url, query="SELECT id, name, id * 2 AS doubled FROM items", **base)
    refused = run(drifted)
    assert refused.returncode == 4, refused.stderr  # schema drift's exit code
    assert "schema drift detected" in refused.stderr
    # Nothing of the drifted run reached the prefix (the gate runs on a probe, before any window).
    assert published(out) == good
    assert not (out / "_quarantine").exists()
    assert canonical_rows(out, ["id", "name"]) == source_rows(items_url, ITEMS)
    if checkpoint:  # no chunk run was opened for the refused run
        assert state_rows(drifted, "SELECT status FROM chunk_run") == [("completed",)]


# ===================================================== a keyset_incremental cursor stays put
def test_a_failing_total_gate_of_a_keyset_incremental_run_keeps_the_cursor_and_the_last_delivery(
        tmp_path, events_url):
    def config(minimum: int) -> Path:
        return write_config(tmp_path, source_block(events_url), [{
            "name": "events", "table": "events", "mode": "chunked", "chunk_by_key": "id", "chunk_size": 10,
            "keyset_incremental": True, "chunk_checkpoint": True, "quality": {"row_count_min": minimum},
            "format": "parquet", "destination": {"type": "local", "path": "out"}}])

    out = tmp_path / "out"
    insert_events(events_url, range(1, 41))
    first = run(config(1))
    assert first.returncode == 0, first.stderr
    assert cursor_of(config(1), "events") == "40"
    good = published(out)

    insert_events(events_url, range(41, 46))  # 5 new rows: below the gate's 10
    short = run(config(10))
    assert short.returncode == 3, short.stderr
    assert cursor_of(config(10), "events") == "40"  # unmoved
    assert published(out) == good  # the last delivery, whole
    ids = pa.concat_tables([read_table(p) for p in quarantined(out)]).column("id").to_pylist()
    assert sorted(ids) == list(range(41, 46))  # the withdrawn window, nothing lost

    insert_events(events_url, range(46, 61))
    again = run(config(10), "--validate")
    assert again.returncode == 0, again.stderr
    assert cursor_of(config(10), "events") == "60"
    assert manifest_ids(out) == list(range(1, 61))  # every id exactly once across the deliveries
