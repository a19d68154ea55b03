"""Chunked exports end to end through the real CLI (issue 4): crash/resume, failures,
refusals, window edge cases, a property test, and part rotation inside a window.

A run armed with RIVET_TEST_PANIC_AT is the real `rivet` CLI in a subprocess (the fault point
kills it with SIGKILL); every other command is the same CLI in-process (tests/helpers.py
`rivet_quick`: no crash, no pause, no concurrency with the test — only ~2 s of imports saved). The oracle never trusts the tool's counters: it reads the canonical
`manifest.json` of the prefix, re-reads every part it lists with pyarrow, and compares the
rows with the source queried directly — every source row exactly once. The checkpoint is
inspected in the SQLite state DB beside the config.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import tempfile
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import (
    data_files,
    db_exec,
    read_table,
    rivet,
    rivet_quick,
    source_block,
    state_rows,
    write_config,
)

ROWS = 300  # ids 1..300, chunk_size 50 → grid windows 0..6 (window 0 holds 49 ids, window 6 one)
SIZE = 50
FIRST, MIDDLE, LAST = 0, 3, 6
KILLED = -signal.SIGKILL


@pytest.fixture(autouse=True)
def _sqlite_state_beside_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint assertions read .rivet_state.db beside the config."""
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    for var in ("RIVET_TEST_PANIC_AT", "RIVET_TEST_ERROR_AT"):
        monkeypatch.delenv(var, raising=False)


# ----------------------------------------------------------------------------- sources
def _admin(var: str) -> str:
    value = os.environ.get(var)
    if not value:
        pytest.fail(f"{var} is not set — run the suite with `make test` (it starts the servers)",
                    pytrace=False)
    return value


def _with_db(url: str, db: str) -> str:
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path="/" + db))


def _items_values(first: int, last: int) -> str:
    return ", ".join(f"({i}, 'item {i}')" for i in range(first, last + 1))


@pytest.fixture(scope="module")
def pg_items() -> Iterator[str]:
    """One read-only PostgreSQL database with items(id 1..300) shared by the module."""
    import psycopg

    admin = _admin("TEST_PG_DSN")
    db = f"rivet_ck_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    url = _with_db(admin, db)
    db_exec(url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50) NOT NULL)",
            f"INSERT INTO items VALUES {_items_values(1, ROWS)}")
    yield url
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


@pytest.fixture(scope="module")
def mysql_items() -> Iterator[str]:
    """The same items table on MariaDB."""
    admin = _admin("TEST_MYSQL_DSN")
    db = f"rivet_ck_{uuid.uuid4().hex[:10]}"
    db_exec(admin, f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4")
    url = _with_db(admin, db)
    db_exec(url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50) NOT NULL)",
            f"INSERT INTO items VALUES {_items_values(1, ROWS)}")
    yield url
    db_exec(admin, f"DROP DATABASE IF EXISTS `{db}`")


# ------------------------------------------------------------------------------ config
def chunked(**fields: Any) -> dict[str, Any]:
    export = {"name": "items", "table": "items", "mode": "chunked", "chunk_column": "id",
              "chunk_size": SIZE, "format": "parquet", "destination": {"type": "local", "path": "out"}}
    export.update(fields)
    return export


def config_for(tmp: Path, url: str, **fields: Any) -> Path:
    return write_config(tmp, source_block(url), [chunked(**fields)])


def run(config: Path, *args: str, **env: str):  # noqa: ANN201
    """`rivet run`: in a process of its own when a fault point is armed to kill it,
    in-process otherwise (RIVET_TEST_ERROR_AT only raises, rivet_core/pipeline/faults.py)."""
    if "RIVET_TEST_PANIC_AT" in env:
        return rivet("run", "-c", str(config), *args, env=env)
    return rivet_quick("run", "-c", str(config), *args, env=env or None)


# ------------------------------------------------------------------------------ oracle
def canonical_manifest(out: Path) -> dict[str, Any]:
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "success", manifest.get("status")
    return manifest


def listed_parts(out: Path) -> list[str]:
    """Paths of the committed parts the canonical manifest lists (each must appear once)."""
    paths = [p["path"] for p in canonical_manifest(out)["parts"] if p.get("status", "committed") == "committed"]
    assert len(paths) == len(set(paths)), f"a part is listed twice: {Counter(paths).most_common(3)}"
    return paths


def canonical_table(out: Path) -> pa.Table:
    tables = [read_table(out / p) for p in listed_parts(out)]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")


def canonical_rows(out: Path, columns: list[str]) -> list[tuple]:
    table = canonical_table(out)
    if table.num_rows == 0:
        return []
    cols = [table.column(c).to_pylist() for c in columns]
    return sorted(zip(*cols, strict=True), key=repr)


def source_rows(url: str, sql: str) -> list[tuple]:
    return sorted((tuple(r) for r in db_exec(url, sql)), key=repr)


def assert_no_untracked_parts(out: Path) -> None:
    """Data objects at the prefix are exactly the listed parts (stale attempts quarantined)."""
    on_disk = {p.relative_to(out).as_posix() for p in data_files(out)}
    assert on_disk == set(listed_parts(out))


def assert_checkpoint_closed(config: Path) -> None:
    runs = state_rows(config, "SELECT run_id, status FROM chunk_run")
    assert runs and {s for _, s in runs} == {"completed"}, runs
    tasks = dict(state_rows(config, "SELECT status, COUNT(*) FROM chunk_task GROUP BY status"))
    assert set(tasks) == {"completed"}, tasks
    assert state_rows(config, "SELECT run_id FROM run_status WHERE status = 'running'") == []


def task_status(config: Path, index: int) -> str | None:
    rows = state_rows(config, "SELECT status FROM chunk_task WHERE chunk_index = ?", [index])
    return rows[0][0] if rows else None


ITEMS = "SELECT id, name FROM items"


# =========================================================================== 1. crash matrix
def crash_then_resume(tmp_path: Path, url: str, point: str, index: int, parallel: int) -> None:
    config = config_for(tmp_path, url, parallel=parallel, chunk_checkpoint=True)
    out = tmp_path / "out"
    crashed = run(config, RIVET_TEST_PANIC_AT=f"{point}:{index}")
    assert crashed.returncode == KILLED, crashed.stderr
    assert f"{point}:{index}" in crashed.stderr
    assert not (out / "_SUCCESS").exists() and not (out / "manifest.json").exists()
    # The crash left the task where the fault point says it is.
    assert task_status(config, index) == ("completed" if point == "after_chunk_complete" else "running")
    assert state_rows(config, "SELECT status FROM chunk_run") == [("in_progress",)]
    done_before = {f for (f,) in state_rows(
        config, "SELECT file_name FROM chunk_task WHERE status = 'completed' AND file_name IS NOT NULL")}

    resumed = run(config, "--resume", "--validate")
    assert resumed.returncode == 0, resumed.stderr
    assert canonical_rows(out, ["id", "name"]) == source_rows(url, ITEMS)
    assert (out / "_SUCCESS").exists()
    assert done_before <= set(listed_parts(out))  # completed windows were kept, not re-exported
    assert_no_untracked_parts(out)
    assert_checkpoint_closed(config)
    assert len(state_rows(config, "SELECT run_id FROM chunk_run")) == 1  # resumed, not restarted
    assert state_rows(config, "SELECT COUNT(*) FROM chunk_task") == [(LAST + 1,)]


@pytest.mark.postgres
@pytest.mark.parametrize("parallel", [1, 4])
@pytest.mark.parametrize("index", [FIRST, MIDDLE, LAST])
@pytest.mark.parametrize("point", ["after_chunk_file", "after_chunk_complete"])
def test_a_crash_at_a_chunk_fault_point_then_resume_lists_every_postgres_row_exactly_once(
        tmp_path, pg_items, point, index, parallel):
    crash_then_resume(tmp_path, pg_items, point, index, parallel)


@pytest.mark.mysql
@pytest.mark.parametrize(("point", "index", "parallel"), [
    ("after_chunk_file", FIRST, 4),
    ("after_chunk_complete", MIDDLE, 1),
    ("after_chunk_file", LAST, 1),
    ("after_chunk_complete", LAST, 4),
])
def test_a_crash_at_a_chunk_fault_point_then_resume_lists_every_mariadb_row_exactly_once(
        tmp_path, mysql_items, point, index, parallel):
    crash_then_resume(tmp_path, mysql_items, point, index, parallel)


@pytest.mark.postgres
def test_a_resume_that_crashes_again_can_itself_be_resumed(tmp_path, pg_items):
    config = config_for(tmp_path, pg_items, parallel=3, chunk_checkpoint=True)
    out = tmp_path / "out"
    assert run(config, RIVET_TEST_PANIC_AT="after_chunk_file:2").returncode == KILLED
    again = run(config, "--resume", RIVET_TEST_PANIC_AT="after_chunk_complete:5")
    assert again.returncode == KILLED, again.stderr
    assert not (out / "manifest.json").exists()
    final = run(config, "--resume", "--validate")
    assert final.returncode == 0, final.stderr
    assert canonical_rows(out, ["id", "name"]) == source_rows(pg_items, ITEMS)
    assert_no_untracked_parts(out)
    assert_checkpoint_closed(config)
    assert len(state_rows(config, "SELECT run_id FROM chunk_run")) == 1


@pytest.mark.postgres
def test_an_empty_source_completes_a_checkpointed_run_with_no_parts(tmp_path, pg_url):
    _pg_table(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT NOT NULL)", [])
    config = config_for(tmp_path, pg_url, parallel=2, chunk_checkpoint=True)
    done = run(config)
    assert done.returncode == 0, done.stderr
    manifest = canonical_manifest(tmp_path / "out")
    assert (manifest["row_count"], manifest["parts"]) == (0, [])
    assert (tmp_path / "out" / "_SUCCESS").exists()
    assert state_rows(config, "SELECT status FROM chunk_run") == [("completed",)]


# ======================================================================= 2. a failing chunk
@pytest.mark.postgres
@pytest.mark.parametrize("checkpoint", [True, False])
@pytest.mark.parametrize("parallel", [1, 4])
def test_an_erroring_chunk_fails_the_run_without_success_and_a_rerun_completes(
        tmp_path, pg_items, parallel, checkpoint):
    config = config_for(tmp_path, pg_items, parallel=parallel, chunk_checkpoint=checkpoint)
    out = tmp_path / "out"
    failed = run(config, RIVET_TEST_ERROR_AT="chunk_export:1")
    assert failed.returncode != 0, failed.stderr
    assert "chunk_export:1" in failed.stderr
    assert not (out / "_SUCCESS").exists() and not (out / "manifest.json").exists()
    assert state_rows(config, "SELECT run_id FROM run_status WHERE status = 'running'") == []
    if checkpoint:
        assert "1 task(s) not completed" in failed.stderr, failed.stderr
        assert f"rivet run -c {config} -e items --resume" in failed.stderr
        assert task_status(config, 1) == "failed"
        assert state_rows(config, "SELECT status FROM chunk_run") == [("in_progress",)]
        again = run(config, "--resume")
    else:
        assert state_rows(config, "SELECT COUNT(*) FROM chunk_run") in ([], [(0,)])
        again = run(config)
    assert again.returncode == 0, again.stderr
    assert canonical_rows(out, ["id", "name"]) == source_rows(pg_items, ITEMS)
    if checkpoint:
        assert_checkpoint_closed(config)
        assert_no_untracked_parts(out)


# =========================================================================== 3. refusals
@pytest.mark.postgres
def test_resume_without_any_checkpoint_run_is_refused_with_the_plain_command(tmp_path, pg_items):
    config = config_for(tmp_path, pg_items, chunk_checkpoint=True)
    refused = run(config, "--resume")
    assert refused.returncode == 1, refused.stderr
    assert "no in-progress chunk checkpoint" in refused.stderr
    assert f"rivet run -c {config} -e items` without --resume" in refused.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.postgres
def test_resume_after_a_finished_run_is_refused(tmp_path, pg_items):
    config = config_for(tmp_path, pg_items, chunk_checkpoint=True)
    assert run(config).returncode == 0
    before = (tmp_path / "out" / "manifest.json").read_text()
    refused = run(config, "--resume")  # Rivet's order: the _SUCCESS gate first
    assert refused.returncode == 1, refused.stderr
    assert "already has _SUCCESS" in refused.stderr
    forced = run(config, "--resume", "--force")  # then: no checkpoint left to resume
    assert forced.returncode == 1, forced.stderr
    assert "no in-progress chunk checkpoint" in forced.stderr
    assert (tmp_path / "out" / "manifest.json").read_text() == before


@pytest.mark.postgres
def test_a_plain_run_while_a_checkpoint_run_is_in_progress_is_refused_and_reset_chunks_clears_it(
        tmp_path, pg_items):
    config = config_for(tmp_path, pg_items, chunk_checkpoint=True)
    out = tmp_path / "out"
    assert run(config, RIVET_TEST_PANIC_AT="after_chunk_complete:2").returncode == KILLED
    refused = run(config)
    assert refused.returncode == 1, refused.stderr
    assert "still in progress" in refused.stderr
    assert f"rivet run -c {config} -e items --resume" in refused.stderr
    assert f"rivet state reset-chunks -c {config} -e items" in refused.stderr
    assert not (out / "manifest.json").exists()

    listing = rivet_quick("state", "chunks", "-c", str(config), "-e", "items", "--json")
    assert listing.returncode == 0, listing.stderr
    shown = json.loads(listing.stdout)
    assert shown["run"]["status"] == "in_progress"
    assert [t["status"] for t in shown["tasks"]][:3] == ["completed"] * 3

    reset = rivet_quick("state", "reset-chunks", "-c", str(config), "-e", "items")
    assert reset.returncode == 0, reset.stderr
    assert "Removed 1 chunk run(s)" in reset.stdout
    assert state_rows(config, "SELECT COUNT(*) FROM chunk_run") == [(0,)]
    fresh = run(config)
    assert fresh.returncode == 0, fresh.stderr
    assert canonical_rows(out, ["id", "name"]) == source_rows(pg_items, ITEMS)
    assert state_rows(config, "SELECT status FROM chunk_run") == [("completed",)]
    assert state_rows(config, "SELECT DISTINCT status FROM chunk_task") == [("completed",)]
    # The abandoned run's ledger row, left `running` by the kill, is marked `failed` by the
    # fresh run (its chunk run was reset, its process is gone), like the refused run's; the
    # fresh run's row is closed.
    fresh_id = canonical_manifest(out)["run_id"]
    assert state_rows(config, "SELECT status FROM run_status WHERE run_id = ?", [fresh_id]) == [("success",)]
    assert state_rows(config, "SELECT DISTINCT status FROM run_status WHERE run_id != ?", [fresh_id]) == [("failed",)]


@pytest.mark.postgres
def test_a_changed_plan_on_resume_is_refused_with_a_fingerprint_mismatch(tmp_path, pg_items):
    config = config_for(tmp_path, pg_items, chunk_checkpoint=True)
    assert run(config, RIVET_TEST_PANIC_AT="after_chunk_complete:1").returncode == KILLED
    changed = config_for(tmp_path, pg_items, chunk_checkpoint=True, chunk_size=60)
    refused = run(changed, "--resume")
    assert refused.returncode == 1, refused.stderr
    assert "plan fingerprint mismatch" in refused.stderr
    assert f"rivet state reset-chunks -c {config} -e items" in refused.stderr
    assert state_rows(config, "SELECT status FROM chunk_run") == [("in_progress",)]
    # Restoring the old settings makes the same checkpoint resumable.
    config_for(tmp_path, pg_items, chunk_checkpoint=True)
    resumed = run(config, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert canonical_rows(tmp_path / "out", ["id", "name"]) == source_rows(pg_items, ITEMS)
    assert_checkpoint_closed(config)


@pytest.mark.postgres
def test_resume_into_a_prefix_holding_success_needs_force(tmp_path, pg_items):
    config = config_for(tmp_path, pg_items, chunk_checkpoint=True)
    out = tmp_path / "out"
    assert run(config).returncode == 0
    first_run = canonical_manifest(out)["run_id"]
    assert run(config, RIVET_TEST_PANIC_AT="after_chunk_file:3").returncode == KILLED
    refused = run(config, "--resume")
    assert refused.returncode == 1, refused.stderr
    assert "_SUCCESS" in refused.stderr and "--force" in refused.stderr
    assert canonical_manifest(out)["run_id"] == first_run  # untouched

    forced = run(config, "--resume", "--force", "--validate")
    assert forced.returncode == 0, forced.stderr
    assert canonical_manifest(out)["run_id"] != first_run
    assert canonical_rows(out, ["id", "name"]) == source_rows(pg_items, ITEMS)
    assert_checkpoint_closed(config)


# ===================================================================== 4. window edge cases
def _pg_table(url: str, ddl: str, rows: list[str], *, analyze: bool = False) -> None:
    stmts = [ddl]
    if rows:
        table = ddl.split()[2]
        stmts.append(f"INSERT INTO {table} VALUES {', '.join(rows)}")
    if analyze:
        stmts.append(f"ANALYZE {ddl.split()[2]}")
    db_exec(url, *stmts)


def tasks_of(config: Path) -> list[tuple]:
    return state_rows(config, "SELECT chunk_index, start_key, end_key, status, rows_written, file_name "
                              "FROM chunk_task ORDER BY chunk_index")


@pytest.mark.postgres
def test_gappy_ids_export_every_row_and_empty_middle_windows_write_no_part(tmp_path, pg_url):
    ids = [1, 2, 3, 250, 251, 499, 1000]
    _pg_table(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT NOT NULL)",
              [f"({i}, 'n{i}')" for i in ids])
    config = config_for(tmp_path, pg_url, chunk_checkpoint=True, parallel=3)
    done = run(config)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    assert canonical_rows(out, ["id", "name"]) == source_rows(pg_url, ITEMS)
    tasks = tasks_of(config)
    assert len(tasks) == 1000 // SIZE + 1  # one grid window per k, empty or not
    non_empty = {i // SIZE for i in ids}
    for index, _lo, _hi, status, rows, file_name in tasks:
        assert status == "completed"
        expected = sum(1 for i in ids if i // SIZE == index)
        assert rows == expected
        assert (file_name is not None) == (index in non_empty)
    assert len(listed_parts(out)) == len(non_empty)
    assert_no_untracked_parts(out)


@pytest.mark.postgres
def test_a_one_row_table_exports_one_window_with_that_row(tmp_path, pg_url):
    _pg_table(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT NOT NULL)", ["(42, 'only')"])
    config = config_for(tmp_path, pg_url, chunk_checkpoint=True)
    done = run(config)
    assert done.returncode == 0, done.stderr
    assert canonical_rows(tmp_path / "out", ["id", "name"]) == [(42, "only")]
    assert [(t[1], t[2], t[4]) for t in tasks_of(config)] == [("0", "49", 1)]


@pytest.mark.postgres
@pytest.mark.parametrize("strategy", ["range", "dense"])
@pytest.mark.parametrize("rows", [2 * SIZE, 2 * SIZE + 1])
def test_rows_equal_to_k_times_size_and_one_more_fill_exactly_the_expected_windows(
        tmp_path, pg_url, strategy, rows):
    _pg_table(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT NOT NULL)",
              [f"({i}, 'n{i}')" for i in range(rows)])  # ids 0..rows-1: grid-aligned from 0
    extra = {"chunk_dense": True} if strategy == "dense" else {}
    config = config_for(tmp_path, pg_url, chunk_checkpoint=True, parallel=2, **extra)
    done = run(config)
    assert done.returncode == 0, done.stderr
    assert canonical_rows(tmp_path / "out", ["id", "name"]) == source_rows(pg_url, ITEMS)
    written = [t[4] for t in tasks_of(config)]
    assert written == ([SIZE, SIZE] if rows == 2 * SIZE else [SIZE, SIZE, 1])


@pytest.mark.postgres
def test_null_in_the_chunk_column_is_refused_naming_the_fix(tmp_path, pg_url):
    _pg_table(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, grp INT)",
              ["(1, 10)", "(2, NULL)", "(3, 30)"])
    config = config_for(tmp_path, pg_url, chunk_column="grp", chunk_checkpoint=True)
    refused = run(config)
    assert refused.returncode == 1, refused.stderr
    assert "found NULL in chunk_column 'grp'" in refused.stderr
    assert "WHERE grp IS NOT NULL" in refused.stderr
    assert not (tmp_path / "out" / "manifest.json").exists() and data_files(tmp_path / "out") == []
    assert state_rows(config, "SELECT COUNT(*) FROM chunk_run") in ([], [(0,)])


@pytest.mark.postgres
def test_a_text_range_column_is_refused(tmp_path, pg_url):
    _pg_table(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT NOT NULL)", ["(1, 'a')", "(2, 'b')"])
    config = config_for(tmp_path, pg_url, chunk_column="name", chunk_checkpoint=True)
    refused = run(config)
    assert refused.returncode == 1, refused.stderr
    assert "chunk_column 'name' (type text) is not an integer-family column" in refused.stderr
    assert "chunk_by_key" in refused.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.postgres
def test_a_sparse_range_plan_is_refused(tmp_path, pg_url):
    _pg_table(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT NOT NULL)",
              [f"({i * 10_000}, 'n{i}')" for i in range(100)], analyze=True)
    config = config_for(tmp_path, pg_url)  # ~100 rows > chunk_size: no small-table fallback
    refused = run(config)
    assert refused.returncode == 1, refused.stderr
    assert "refusing to run a sparse range plan" in refused.stderr
    assert "chunk_dense" in refused.stderr
    assert data_files(tmp_path / "out") == []


TIES_ROWS = [f"({i % 3}, 'n{i % 7}')" for i in range(120)]  # 120 rows, 21 distinct: heavy ties + duplicates


@pytest.mark.parametrize("parallel", [1, 4])
@pytest.mark.parametrize("engine", [pytest.param("pg", marks=pytest.mark.postgres),
                                    pytest.param("mysql", marks=pytest.mark.mysql)])
def test_dense_windows_on_a_column_with_heavy_ties_export_each_row_once(
        request, tmp_path, engine, parallel):
    url = request.getfixturevalue("pg_url" if engine == "pg" else "mysql_url")
    db_exec(url, "CREATE TABLE ties (grp INT NOT NULL, name VARCHAR(10) NOT NULL)",
            f"INSERT INTO ties VALUES {', '.join(TIES_ROWS)}")
    config = write_config(tmp_path, source_block(url), [chunked(
        table="ties", chunk_column="grp", chunk_dense=True, chunk_size=13, parallel=parallel)])
    done = run(config)
    assert done.returncode == 0, done.stderr
    got = Counter(canonical_rows(tmp_path / "out", ["grp", "name"]))
    assert got == Counter(source_rows(url, "SELECT grp, name FROM ties"))
    assert len(listed_parts(tmp_path / "out")) == -(-120 // 13)


@pytest.mark.postgres
@pytest.mark.parametrize("column_type", ["TIMESTAMP", "TIMESTAMPTZ", "DATE"])
def test_day_windows_across_a_month_boundary_hold_exactly_their_days(tmp_path, pg_url, column_type):
    import datetime as dt

    start = dt.datetime(2026, 1, 27)
    stamps = [start + dt.timedelta(hours=5 * i) for i in range(45)] + [dt.datetime(2026, 2, 1)]
    _pg_table(pg_url, f"CREATE TABLE ev (id INT PRIMARY KEY, ts {column_type} NOT NULL)",
              [f"({i}, '{s.isoformat(sep=' ')}{'+00' if column_type == 'TIMESTAMPTZ' else ''}')"
               for i, s in enumerate(stamps)])
    if column_type == "TIMESTAMPTZ":  # the source session must still cut days in UTC
        db_exec(pg_url, "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET timezone TO %L', "
                        "current_database(), 'America/New_York'); END $$")
    config = write_config(tmp_path, source_block(pg_url), [chunked(
        table="ev", chunk_column="ts", chunk_by_days=2, chunk_checkpoint=True, parallel=2)])
    done = run(config)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    assert canonical_rows(out, ["id"]) == source_rows(pg_url, "SELECT id FROM ev")
    tasks = tasks_of(config)
    assert tasks[0][1] <= "2026-01-27" and tasks[-1][2] > "2026-02-04"
    assert any(t[1] < "2026-02-01" < t[2] or t[1] == "2026-02-01" for t in tasks)
    for _index, lo, hi, status, _rows, file_name in tasks:
        assert status == "completed"
        if file_name is None:
            continue
        values = read_table(out / file_name).column("ts").to_pylist()
        days = {(v.astimezone(dt.UTC).date() if isinstance(v, dt.datetime) and v.tzinfo else
                 v.date() if isinstance(v, dt.datetime) else v) for v in values}
        assert all(dt.date.fromisoformat(lo) <= d < dt.date.fromisoformat(hi) for d in days), (lo, hi, days)


KEYS = {
    "int": ("INT", [str(i * 7 - 100) for i in range(40)]),
    "text": ("TEXT", [f"'{k}'" for k in ["a", "B", "a%b", "it''s", "z z", "ä", "%", "0", "10", "9", "Zed",
                                          "%%s", "back\\slash", "tab\tx", "aa", "ab", "a_b", "A"]
                      + [f"k{i:03d}" for i in range(22)]]),
    "uuid": ("UUID", [f"'{uuid.UUID(int=i * 0x1F3D5B79 << 64 | i)}'" for i in range(40)]),
}


@pytest.mark.postgres
@pytest.mark.parametrize("kind", sorted(KEYS))
def test_keyset_pages_on_integer_text_and_uuid_keys_export_each_row_once(tmp_path, pg_url, kind):
    sql_type, keys = KEYS[kind]
    _pg_table(pg_url, f"CREATE TABLE kt (k {sql_type} PRIMARY KEY, v INT NOT NULL)",
              [f"({k}, {i})" for i, k in enumerate(keys)])
    config = write_config(tmp_path, source_block(pg_url), [chunked(
        table="kt", chunk_column=None, chunk_by_key="k", chunk_size=7, chunk_checkpoint=True, parallel=2)])
    done = run(config)
    assert done.returncode == 0, done.stderr
    assert canonical_rows(tmp_path / "out", ["v"]) == source_rows(pg_url, "SELECT v FROM kt")
    got_keys = sorted(str(k) for k in canonical_table(tmp_path / "out").column("k").to_pylist())
    assert got_keys == sorted(str(k) for (k,) in db_exec(pg_url, "SELECT k FROM kt"))
    assert len(tasks_of(config)) == len(keys) // 7 + 1


@pytest.mark.postgres
def test_keyset_incremental_on_a_uuid_key_resumes_after_the_highest_uuid(tmp_path, pg_url):
    def key(i: int) -> uuid.UUID:
        return uuid.UUID(int=(i << 96) | 0xABC)

    def insert(first: int, last: int) -> None:
        db_exec(pg_url, "INSERT INTO kt VALUES " + ", ".join(f"('{key(i)}', {i})" for i in range(first, last)))

    db_exec(pg_url, "CREATE TABLE kt (k UUID PRIMARY KEY, v INT NOT NULL)")
    insert(1, 30)
    config = write_config(tmp_path, source_block(pg_url), [chunked(
        table="kt", chunk_column=None, chunk_by_key="k", chunk_size=7, keyset_incremental=True)])
    first = run(config)
    assert first.returncode == 0, first.stderr
    assert state_rows(config, "SELECT last_cursor_value FROM export_state") == [(str(key(29)),)]
    insert(30, 35)
    second = run(config)
    assert second.returncode == 0, second.stderr
    assert sorted(canonical_table(tmp_path / "out").column("v").to_pylist()) == list(range(30, 35))
    assert state_rows(config, "SELECT last_cursor_value FROM export_state") == [(str(key(34)),)]


@pytest.mark.mysql
def test_keyset_pages_on_a_mariadb_text_key_export_each_row_once(tmp_path, mysql_url):
    keys = ["a", "B", "a%b", "it''s", "z z", "é", "%", "0", "10", "9", "Zed", "%%s", "aa", "ab", "a_b"]
    keys += [f"k{i:03d}" for i in range(20)]
    db_exec(mysql_url, "CREATE TABLE kt (k VARCHAR(20) PRIMARY KEY, v INT NOT NULL)",
            "INSERT INTO kt VALUES " + ", ".join(f"('{k}', {i})" for i, k in enumerate(keys)))
    config = write_config(tmp_path, source_block(mysql_url), [chunked(
        table="kt", chunk_column=None, chunk_by_key="k", chunk_size=6, chunk_checkpoint=True, parallel=2)])
    done = run(config)
    assert done.returncode == 0, done.stderr
    assert canonical_rows(tmp_path / "out", ["k", "v"]) == source_rows(mysql_url, "SELECT k, v FROM kt")


@pytest.mark.postgres
def test_a_small_table_without_an_explicit_shape_falls_back_to_one_full_export(tmp_path, pg_url):
    _pg_table(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT NOT NULL)",
              [f"({i}, 'n{i}')" for i in range(1, 21)], analyze=True)
    config = write_config(tmp_path, source_block(pg_url), [chunked(chunk_column=None, chunk_size=100)])
    done = run(config)
    assert done.returncode == 0, done.stderr
    assert canonical_rows(tmp_path / "out", ["id", "name"]) == source_rows(pg_url, ITEMS)
    assert len(listed_parts(tmp_path / "out")) == 1
    assert state_rows(config, "SELECT COUNT(*) FROM chunk_run") in ([], [(0,)])


@pytest.mark.postgres
def test_meta_columns_are_present_in_every_chunk_part(tmp_path, pg_items):
    config = config_for(tmp_path, pg_items, parallel=2, chunk_checkpoint=True,
                        meta_columns={"exported_at": True, "row_hash": True})
    done = run(config)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    parts = listed_parts(out)
    assert len(parts) == LAST + 1
    for path in parts:
        table = read_table(out / path)
        assert table.column_names[-2:] == ["_rivet_exported_at", "_rivet_row_hash"], table.column_names
        assert table.column("_rivet_exported_at").null_count == 0
        assert table.column("_rivet_row_hash").null_count == 0
    table = canonical_table(out)
    assert len(set(table.column("_rivet_row_hash").to_pylist())) == ROWS
    assert canonical_rows(out, ["id", "name"]) == source_rows(pg_items, ITEMS)


@pytest.mark.postgres
def test_csv_format_works_chunked(tmp_path, pg_url):
    _pg_table(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT NOT NULL)",
              [f"({i}, 'n, \"{i}\"')" for i in range(1, 131)])
    config = config_for(tmp_path, pg_url, format="csv", parallel=2, chunk_checkpoint=True)
    done = run(config)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    assert all(p.endswith(".csv") for p in listed_parts(out)) and len(listed_parts(out)) == 3
    assert canonical_rows(out, ["id", "name"]) == source_rows(pg_url, ITEMS)


# ==================================================================== 5. property test
def _sqlite_source(tmp: Path, ids: list[int]) -> str:
    src = tmp / "src.db"
    with sqlite3.connect(src) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"item {i}") for i in ids])
    return f"sqlite:///{src}"


SHAPES = {"range": {}, "dense": {"chunk_dense": True},
          "keyset": {"chunk_column": None, "chunk_by_key": "id"}}


def _window_count(shape: str, ids: list[int], size: int) -> int:
    if shape == "keyset":
        return len(ids) // size + 1  # every size-th key is a boundary; the last window is open
    if shape == "dense":
        return -(-len(ids) // size)
    return (ids[-1] // size - ids[0] // size + 1) if ids else 0


@st.composite
def crash_cases(draw: st.DrawFn) -> tuple[list[int], str, int, int, str | None]:
    ids = sorted(draw(st.sets(st.integers(0, 240), max_size=90)))
    shape = draw(st.sampled_from(sorted(SHAPES)))
    size = draw(st.integers(4, 60))
    parallel = draw(st.sampled_from([1, 3]))
    windows = _window_count(shape, ids, size)
    crash = None
    if windows:
        point = draw(st.sampled_from(["after_chunk_file", "after_chunk_complete", None]))
        if point is not None:
            crash = f"{point}:{draw(st.integers(0, windows - 1))}"
    return ids, shape, size, parallel, crash


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=crash_cases())
def test_property_crash_anywhere_then_resume_gives_the_source_exactly_once(case):
    ids, shape, size, parallel, crash = case
    with tempfile.TemporaryDirectory(prefix="rivet-ck-") as tmp:
        tmp_path = Path(tmp)
        url = _sqlite_source(tmp_path, ids)
        config = config_for(tmp_path, url, chunk_size=size, parallel=parallel, chunk_checkpoint=True,
                            **SHAPES[shape])
        out = tmp_path / "out"
        first = run(config, **({"RIVET_TEST_PANIC_AT": crash} if crash else {}))
        if crash is None:
            assert first.returncode == 0, first.stderr
        else:
            # A window that holds no row writes no part: after_chunk_file still fires for it.
            assert first.returncode == KILLED, first.stderr
            resumed = run(config, "--resume")
            assert resumed.returncode == 0, resumed.stderr
        assert canonical_rows(out, ["id", "name"]) == sorted(((i, f"item {i}") for i in ids), key=repr)
        assert_no_untracked_parts(out)
        assert len(state_rows(config, "SELECT chunk_index FROM chunk_task")) == _window_count(shape, ids, size)
        if ids:
            assert_checkpoint_closed(config)


# ======================================================================= 6. rotation
ROTATE = {"max_file_size": "1B", "tuning": {"batch_size": 10},
          "parquet": {"row_group_strategy": "fixed_rows", "row_group_rows": 10}}


def _siblings(paths: list[str]) -> dict[int, list[str]]:
    by_chunk: dict[int, list[str]] = {}
    for p in paths:
        index = int(p.split("_chunk", 1)[1].split("_", 1)[0])
        by_chunk.setdefault(index, []).append(p)
    return by_chunk


@pytest.mark.postgres
def test_max_file_size_rotates_inside_a_window_and_resume_keeps_the_siblings(tmp_path, pg_items):
    config = config_for(tmp_path, pg_items, chunk_checkpoint=True, **ROTATE)
    out = tmp_path / "out"
    assert run(config, RIVET_TEST_PANIC_AT="after_chunk_complete:3").returncode == KILLED
    before = {p.relative_to(out).as_posix() for p in data_files(out)}  # data/<name>, as the manifest lists it
    # The windows completed when the process died: 3 and those before it whose commit had
    # come first (a window's encode may overlap the next one's read, so 2's commit can
    # trail 3's; an uncompleted window is exported again on resume).
    completed = [i for i in range(4) if task_status(config, i) == "completed"]
    assert 3 in completed
    kept = {p for p in before if any(f"_chunk{i}_" in p for i in completed)}
    # max_file_size 1B: every part holds one row (a part always holds at least one; row
    # groups are sized down to the cap) — 49 rows in window 0, 50 in the others.
    assert len(kept) == sum(49 if i == 0 else 50 for i in completed)

    resumed = run(config, "--resume", "--validate")
    assert resumed.returncode == 0, resumed.stderr
    parts = listed_parts(out)
    assert kept <= set(parts)  # completed windows' siblings were kept, not re-exported
    by_chunk = _siblings(parts)
    assert sorted(by_chunk) == list(range(LAST + 1))
    for index, siblings in by_chunk.items():
        rows = sum(1 for i in range(1, ROWS + 1) if i // SIZE == index)
        expected = rows  # one row per part
        assert len(siblings) == expected, (index, siblings)
        if expected > 1:
            assert sorted((s.rsplit("_p", 1)[1] for s in siblings), key=lambda n: int(n.split(".")[0])) == \
                [f"{n}.parquet" for n in range(expected)]
    assert canonical_rows(out, ["id", "name"]) == source_rows(pg_items, ITEMS)
    assert_no_untracked_parts(out)
    assert_checkpoint_closed(config)


@pytest.mark.postgres
def test_resume_re_exports_a_window_whose_sibling_is_missing_or_resized(tmp_path, pg_items):
    config = config_for(tmp_path, pg_items, chunk_checkpoint=True, **ROTATE)
    out = tmp_path / "out"
    assert run(config, RIVET_TEST_PANIC_AT="after_chunk_complete:3").returncode == KILLED
    crashed = _siblings([p.relative_to(out).as_posix() for p in data_files(out)])
    missing = sorted(crashed[1])[2]
    resized = sorted(crashed[2])[0]
    (out / missing).unlink()
    with (out / resized).open("ab") as f:
        f.write(b"garbage")

    resumed = run(config, "--resume", "--validate")
    assert resumed.returncode == 0, resumed.stderr
    parts = set(listed_parts(out))
    assert set(crashed[0]) | set(crashed[3]) <= parts  # intact windows kept
    assert not (set(crashed[1]) | set(crashed[2])) & parts  # damaged windows re-exported
    # `_quarantine/<run>/<key>` → the key the object had at the prefix
    quarantined = {"/".join(p.relative_to(out).parts[2:]) for p in (out / "_quarantine").rglob("*") if p.is_file()}
    assert resized in quarantined
    assert (set(crashed[1]) - {missing}) <= quarantined and set(crashed[2]) <= quarantined
    assert canonical_rows(out, ["id", "name"]) == source_rows(pg_items, ITEMS)
    assert_no_untracked_parts(out)
    assert_checkpoint_closed(config)
