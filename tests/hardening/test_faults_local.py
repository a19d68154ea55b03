"""Faults of the source, the state store and the local disk, against real services.

- the source connection killed mid-stream: `pg_terminate_backend` (PostgreSQL) and `KILL`
  (MariaDB) from another connection while the run is parked in its read loop
  (`RIVET_TEST_PAUSE_AT=during_source_read`, after the first batch: the cursor is open);
- the state store locked by another process, read-only (`chattr +i`, which stops root too),
  and a PostgreSQL state store reached through a role without write privilege;
- the local destination out of space: a real 2 MiB tmpfs mounted over the output directory.

Each ends in a clean failure (exit code, one message naming the problem and the fix, no
`_SUCCESS`, cursor not moved) or a successful retry, and a re-run recovers everything: each
source id exactly once across the success manifests, re-read with pyarrow.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hardening.support import PauseBarrier, cli, finish, rivet_popen
from tests.helpers import (
    cursor_of,
    data_files,
    manifest_ids,
    mysql_exec,
    pg_exec,
    rivet,
    source_block,
    write_config,
)


def _config(tmp: Path, url: str, *, rows_per_batch: int = 2000, max_retries: int = 0,
            path: str = "out", fmt: str = "parquet") -> Path:
    return write_config(tmp, {**source_block(url), "tuning": {
        "batch_size": rows_per_batch, "throttle_ms": 0, "max_retries": max_retries, "retry_backoff_ms": 10}}, [{
        "name": "items", "table": "items", "mode": "incremental", "cursor_column": "id",
        "format": fmt, "destination": {"type": "local", "path": path}}])


def _assert_clean_failure(proc_rc: int, err: str, config: Path, out: Path, *needles: str) -> None:
    assert proc_rc != 0, err
    assert "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    assert not (out / "_SUCCESS").exists() and not (out / "manifest.json").exists()
    assert cursor_of(config, "items") is None


# ------------------------------------------------------------------ source killed mid-stream
PG_ROWS = 50_000  # ~4 MB: more than the socket buffers hold, so the kill lands mid-stream


def test_postgres_backend_terminated_mid_stream_fails_cleanly_then_rerun_recovers(tmp_path, pg_url):
    pg_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, payload TEXT)",
            f"INSERT INTO items SELECT g, repeat(md5(g::text), 2) FROM generate_series(1, {PG_ROWS}) g")
    config = _config(tmp_path, pg_url)
    barrier = PauseBarrier(tmp_path / "barrier", "during_source_read")
    proc = rivet_popen("run", "-c", str(config), env=barrier.env)
    barrier.wait(proc)
    killed = pg_exec(pg_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE datname = current_database() AND application_name = 'rivet'")
    # the source session and, on the ADBC read path, its second connection: all gone
    assert killed and all(row == (True,) for row in killed), killed
    barrier.release()
    rc, _, err = finish(proc)

    out = tmp_path / "out"
    _assert_clean_failure(rc, err, config, out)
    # Depending on timing the client reads the server's FATAL or only sees the socket close.
    assert ("terminating connection due to administrator command" in err
            or "server closed the connection unexpectedly" in err), err
    assert rc == 2  # transient: worth retrying
    assert data_files(out) == []  # nothing was published from the broken stream

    rerun = cli("run", "-c", str(config))
    assert rerun.returncode == 0, rerun.stderr
    assert manifest_ids(out) == list(range(1, PG_ROWS + 1))


def test_mariadb_connection_killed_mid_stream_is_retried_on_a_fresh_connection(tmp_path, mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE items (id INT PRIMARY KEY, payload VARCHAR(80))",
               "INSERT INTO items SELECT seq, REPEAT(MD5(seq), 2) FROM seq_1_to_20000")
    config = _config(tmp_path, mysql_url, rows_per_batch=1000, max_retries=2)
    barrier = PauseBarrier(tmp_path / "barrier", "during_source_read")
    proc = rivet_popen("run", "-c", str(config), "--json", env=barrier.env)
    barrier.wait(proc)
    db = urllib.parse.urlsplit(mysql_url).path.lstrip("/")
    [(conn_id,)] = mysql_exec(mysql_url, "SELECT ID FROM information_schema.PROCESSLIST "
                                         f"WHERE DB = '{db}' AND ID <> CONNECTION_ID()")
    mysql_exec(mysql_url, f"KILL {int(conn_id)}")
    barrier.release()
    rc, out_text, err = finish(proc)

    assert rc == 0, err
    summary = json.loads(out_text)["runs"][0]
    assert summary["retries"] == 1  # the kill was seen and retried, not silently survived
    out = tmp_path / "out"
    assert (out / "_SUCCESS").exists()
    assert manifest_ids(out) == list(range(1, 20_001))  # the retry re-read everything, once


# ------------------------------------------------------------------------------ state store
def _sqlite_items(tmp: Path, first: int, last: int) -> str:
    db = tmp / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, payload TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"p{i}") for i in range(first, last + 1)])
    return f"sqlite:///{db}"


def _hold_exclusive_lock(db: Path) -> subprocess.Popen[str]:
    """Another process holding SQLite's exclusive lock on `db` until its stdin closes."""
    code = ("import sqlite3, sys\n"
            f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True)\n"
            "sys.stdin.read(); c.execute('ROLLBACK')\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def test_a_locked_sqlite_state_store_refuses_the_run_then_a_rerun_recovers(tmp_path):
    config = _config(tmp_path, _sqlite_items(tmp_path, 1, 50))
    first = cli("run", "-c", str(config))  # creates and migrates the store
    assert first.returncode == 0, first.stderr
    _sqlite_items(tmp_path, 51, 60)
    holder = _hold_exclusive_lock(tmp_path / ".rivet_state.db")
    try:
        locked = cli("run", "-c", str(config))
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    out = tmp_path / "out"
    assert locked.returncode == 2, locked.stderr  # transient: retry when the holder is done
    assert "database is locked" in locked.stderr and "another process holds a lock" in locked.stderr
    assert len(data_files(out)) == 1  # the locked run published nothing
    assert cursor_of(config, "items") == "50"

    rerun = cli("run", "-c", str(config))
    assert rerun.returncode == 0, rerun.stderr
    assert manifest_ids(out) == list(range(1, 61))
    assert cursor_of(config, "items") == "60"


@pytest.fixture
def immutable() -> Iterator[list[Path]]:
    """Files made immutable with `chattr +i` (which stops root too); always undone."""
    paths: list[Path] = []
    yield paths
    for p in paths:
        subprocess.run(["chattr", "-i", str(p)], check=False)


def test_a_read_only_sqlite_state_store_refuses_the_run_before_publishing(tmp_path, immutable):
    config = _config(tmp_path, _sqlite_items(tmp_path, 1, 20))
    first = cli("run", "-c", str(config))
    assert first.returncode == 0, first.stderr
    _sqlite_items(tmp_path, 21, 30)
    state = tmp_path / ".rivet_state.db"
    with contextlib.closing(sqlite3.connect(state)) as conn:  # fold the WAL into the main file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    made = subprocess.run(["chattr", "+i", str(state)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.fail(f"cannot make the state file immutable (chattr +i needs root and "
                    f"CAP_LINUX_IMMUTABLE on ext4/xfs/tmpfs): {made.stderr}", pytrace=False)
    immutable.append(state)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):  # really read-only, even for root
        with contextlib.closing(sqlite3.connect(state)) as conn:
            conn.execute("UPDATE export_state SET last_run_at = last_run_at")

    # A process of its own: SQLite shares and reuses a process's descriptors per file, so a
    # descriptor this test process opened before `chattr` could still write; a fresh open cannot.
    refused = rivet("run", "-c", str(config))
    out = tmp_path / "out"
    assert refused.returncode == 1, refused.stderr
    assert "is not writable (attempt to write a readonly database)" in refused.stderr
    assert "make the state file" in refused.stderr and "nothing was exported" in refused.stderr
    assert len(data_files(out)) == 1  # before the fix this run published a part + _SUCCESS
    assert cursor_of(config, "items") == "20"

    subprocess.run(["chattr", "-i", str(state)], check=True)
    rerun = cli("run", "-c", str(config))
    assert rerun.returncode == 0, rerun.stderr
    assert manifest_ids(out) == list(range(1, 31))  # each id once: no run re-exported 21..30


def test_a_postgres_state_store_role_without_write_privilege_is_refused(tmp_path, pg_url):
    role, password = f"rivet_ro_{uuid.uuid4().hex[:8]}", "ro-pass-7d2e"
    owner_state = pg_url
    u = urllib.parse.urlsplit(pg_url)
    ro_state = urllib.parse.urlunsplit(u._replace(netloc=f"{role}:{password}@{u.hostname}:{u.port}"))
    config = _config(tmp_path, _sqlite_items(tmp_path, 1, 20))
    first = cli("run", "-c", str(config), env={"RIVET_STATE_URL": owner_state})
    assert first.returncode == 0, first.stderr
    pg_exec(pg_url, f"CREATE ROLE {role} LOGIN PASSWORD '{password}'",
            f"GRANT CONNECT ON DATABASE {u.path.lstrip('/')} TO {role}",
            f"GRANT USAGE ON SCHEMA public TO {role}",
            f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    try:
        _sqlite_items(tmp_path, 21, 30)
        refused = cli("run", "-c", str(config), env={"RIVET_STATE_URL": ro_state})
        assert refused.returncode == 1, refused.stderr
        assert "is not writable (permission denied for table" in refused.stderr
        assert "grant the RIVET_STATE_URL role" in refused.stderr
        assert password not in refused.stderr and "REDACTED" in refused.stderr
        assert len(data_files(tmp_path / "out")) == 1
    finally:
        pg_exec(pg_url, f"DROP OWNED BY {role}", f"DROP ROLE {role}")
    assert pg_exec(pg_url, "SELECT last_cursor_value FROM export_state") == [("20",)]

    rerun = cli("run", "-c", str(config), env={"RIVET_STATE_URL": owner_state})
    assert rerun.returncode == 0, rerun.stderr
    assert manifest_ids(tmp_path / "out") == list(range(1, 31))


# --------------------------------------------------------------------------- disk full
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """`out/` on a real 2 MiB tmpfs (we run as root); unmounted afterwards."""
    out = tmp_path / "out"
    out.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(out)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs for the disk-full test (needs root): {mounted.stderr}",
                    pytrace=False)
    try:
        yield out
    finally:
        subprocess.run(["umount", "-l", str(out)], check=False)


def test_a_full_local_disk_fails_cleanly_then_a_rerun_with_space_recovers(tmp_path, small_disk):
    # ~4 MB of incompressible text: cannot fit in 2 MiB whatever the codec.
    db = tmp_path / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, payload TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?)",
                         [(i, os.urandom(100).hex()) for i in range(1, 20_001)])
    config = _config(tmp_path, f"sqlite:///{db}", fmt="csv")
    full = cli("run", "-c", str(config))
    _assert_clean_failure(full.returncode, full.stderr, config, small_disk, "No space left on device",
                          "free space")
    leftovers = [p.name for p in small_disk.iterdir()]
    assert leftovers == []  # the failed write removed its own temp: nothing half-written

    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    rerun = cli("run", "-c", str(config), "--validate")
    assert rerun.returncode == 0, rerun.stderr
    assert manifest_ids(small_disk) == list(range(1, 20_001))



@pytest.mark.parametrize("shape", [
    {"mode": "full", "format": "csv"},
    {"mode": "full", "format": "parquet", "compression": "none"},
    {"mode": "incremental", "cursor_column": "id", "format": "parquet", "compression": "none"},
    {"mode": "chunked", "chunk_column": "id", "chunk_size": 5000, "format": "parquet", "compression": "none"},
    {"mode": "chunked", "chunk_column": "id", "chunk_size": 5000, "format": "parquet", "compression": "none",
     "chunk_checkpoint": True},
], ids=["full-csv", "full-parquet", "incremental", "chunked", "chunked-checkpoint"])
def test_a_full_disk_exits_1_in_every_mode(tmp_path, small_disk, shape):
    """One exit-code table (rivet_core/errors.py): ENOSPC is a destination that refuses the
    write — exit 1 with the fix — whatever the mode; a checkpointed chunked run used to
    exit 3 ("checkpoint incomplete") without naming the cause."""
    db = tmp_path / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, payload TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?)",
                         [(i, os.urandom(100).hex()) for i in range(1, 20_001)])  # ~4 MB, 2 MiB disk
    config = write_config(tmp_path, {**source_block(f"sqlite:///{db}"), "tuning": {"max_retries": 0}}, [{
        "name": "items", "table": "items", "destination": {"type": "local", "path": "out"}, **shape}])
    result = cli("run", "-c", str(config))
    assert result.returncode == 1, result.stderr
    assert "No space left on device" in result.stderr and "free space" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not (small_disk / "_SUCCESS").exists() and not (small_disk / "manifest.json").exists()
