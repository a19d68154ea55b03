"""Issue 7 item 2: two runs of one export at once never race their cursors.

The second `rivet run` of an export whose first run is still going is REFUSED (exit 2) with a
message naming the export, the holder (pid, host, run id, start time) and the fix; the first
run finishes and moves the cursor exactly once. A lock left by a SIGKILLed run is recovered.
Both on SQLite state (beside the config) and PostgreSQL state (RIVET_STATE_URL).

Runs are held mid-flight with the `RIVET_TEST_PAUSE_AT` file barrier (faults.py), never sleeps;
the held run is a process of its own, the runs and commands beside it run in-process (tests/helpers.py
`rivet_quick`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rivet_core.config import load_config
from rivet_core.pipeline.runner import run_unit
from rivet_core.state import ExportLocked, ExportLockLost, StateStore
from rivet_core.state.schema import export_lock, insert_sql
from tests.helpers import (
    REPO,
    db_exec,
    manifest_ids,
    rivet_quick,
    source_block,
    success_manifests,
    write_config,
)

ROWS = 60


@pytest.fixture(params=["sqlite", "postgres"])
def state_env(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The state backend of the runs: SQLite beside the config, or PostgreSQL by URL."""
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        monkeypatch.setenv("RIVET_STATE_URL", url)
        return {"RIVET_STATE_URL": url}
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    return {"RIVET_STATE_URL": ""}


@pytest.fixture
def source(pg_url: str) -> str:
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT, updated_at TIMESTAMP)")
    _seed(pg_url, 1, ROWS)
    return pg_url


def _seed(url: str, first: int, last: int) -> None:
    db_exec(url, "INSERT INTO items SELECT i, 'item ' || i, TIMESTAMP '2026-01-01' + i * INTERVAL '1 minute' "
                 f"FROM generate_series({first}, {last}) AS i")


def _config(tmp_path: Path, url: str) -> Path:
    return write_config(tmp_path, source_block(url), [{
        "name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
        "format": "parquet", "destination": {"type": "local", "path": "out"}}])


class Held:
    """A `rivet run` subprocess held at a pause point until `release()`; killed in teardown."""

    def __init__(self, config: Path, env: dict[str, str], point: str, folder: Path) -> None:
        self.folder, self.point = folder, point
        folder.mkdir(exist_ok=True)
        full = {**os.environ, **env, "RIVET_TEST_PAUSE_AT": point, "RIVET_TEST_PAUSE_DIR": str(folder),
                "RIVET_TEST_PAUSE_TIMEOUT_S": "60"}
        self.proc = subprocess.Popen([sys.executable, "-m", "rivet_core.cli", "run", "-c", str(config), "--json"],
                                     cwd=REPO, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_reached(self, timeout: float = 60) -> None:
        reached = self.folder / f"{self.point}.reached"
        deadline = time.monotonic() + timeout
        while not reached.exists():
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                pytest.fail(f"the held run exited ({self.proc.returncode}) before {self.point}: {err[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"the held run never reached {self.point}")
            time.sleep(0.02)  # polling the barrier file with a deadline

    def release(self) -> tuple[int, str, str]:
        (self.folder / f"{self.point}.release").write_text("go")
        out, err = self.proc.communicate(timeout=120)
        return self.proc.returncode, out, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def held(tmp_path: Path) -> Iterator[list[Held]]:
    started: list[Held] = []
    yield started
    for h in started:
        h.kill()


def _store(config: Path) -> StateStore:
    return StateStore.open(config)


def _cursor(config: Path) -> str | None:
    store = _store(config)
    try:
        return store.get_cursor("items")
    finally:
        store.close()


def _locks(config: Path) -> list:
    store = _store(config)
    try:
        return store.list_export_locks("items")
    finally:
        store.close()


def test_a_second_run_of_a_running_incremental_export_is_refused_naming_the_holder(
        tmp_path: Path, source: str, state_env: dict[str, str], held: list[Held]) -> None:
    config = _config(tmp_path, source)
    first = Held(config, state_env, "after_source_read", tmp_path / "barrier")
    held.append(first)
    first.wait_reached()  # holds the lock, has read the cursor and the rows, published nothing

    [holder] = _locks(config)
    assert (holder.pid, holder.mode, holder.host) == (first.proc.pid, "exclusive", socket.gethostname())
    assert holder.run_id and holder.run_id.startswith("items_")

    second = rivet_quick("run", "-c", str(config), "--json", env=state_env)
    assert second.returncode == 2, second.stderr
    message = second.stderr
    for needle in ("export 'items'", "is locked", f"pid {first.proc.pid}", f"host {socket.gethostname()}",
                   f"run {holder.run_id}", f"started at {holder.started_at}", "rivet state unlock",
                   "-e items", "Wait for that run"):
        assert needle in message, (needle, message)
    refused = json.loads(second.stdout)
    assert refused["runs"] == [] and refused["refused"][0]["status"] == "locked"
    assert _cursor(config) is None  # the refused run read and wrote nothing

    rc, out, err = first.release()
    assert rc == 0, err
    assert json.loads(out)["runs"][0]["rows"] == ROWS
    assert _cursor(config) == "2026-01-01T01:00:00.000000"  # advanced once, to the last row
    assert _locks(config) == []  # released at the end of the run

    exported = [m for m in success_manifests(tmp_path / "out") if m["parts"]]
    assert len(exported) == 1
    assert manifest_ids(tmp_path / "out") == list(range(1, ROWS + 1))  # no row twice

    _seed(source, ROWS + 1, ROWS + 5)  # the next run continues from the one committed cursor
    third = rivet_quick("run", "-c", str(config), "--json", env=state_env)
    assert third.returncode == 0, third.stderr
    assert json.loads(third.stdout)["runs"][0]["rows"] == 5
    assert manifest_ids(tmp_path / "out") == list(range(1, ROWS + 6))


def test_a_lock_left_by_a_sigkilled_run_is_recovered(tmp_path: Path, source: str, state_env: dict[str, str],
                                                      held: list[Held]) -> None:
    config = _config(tmp_path, source)
    victim = Held(config, state_env, "after_source_read", tmp_path / "barrier")
    held.append(victim)
    victim.wait_reached()
    victim.kill()  # SIGKILL: no finally, the lock row stays behind
    [stale] = _locks(config)
    assert stale.pid == victim.proc.pid and "is gone" in (stale.stale_reason() or "")
    shown = rivet_quick("state", "locks", "-c", str(config), env=state_env)
    assert shown.returncode == 0 and "STALE" in shown.stdout and str(victim.proc.pid) in shown.stdout

    rerun = rivet_quick("run", "-c", str(config), "--json", env={**state_env, "RIVET_LOG": "WARNING"})
    assert rerun.returncode == 0, rerun.stderr
    assert "recovering a stale lock" in rerun.stderr
    assert json.loads(rerun.stdout)["runs"][0]["rows"] == ROWS
    assert _cursor(config) == "2026-01-01T01:00:00.000000"
    assert _locks(config) == []
    assert manifest_ids(tmp_path / "out") == list(range(1, ROWS + 1))


# ------------------------------------------------------------------ store-level semantics
def _sqlite_source(tmp_path: Path) -> Path:
    import sqlite3

    src = tmp_path / "src.db"
    with sqlite3.connect(src) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, updated_at DATETIME)")
        conn.executemany("INSERT INTO items VALUES (?,?,?)", [(i, f"n{i}", f"2026-01-01 00:{i:02d}:00")
                                                            for i in range(1, 11)])
    return write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{src}"}, [{
        "name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
        "format": "parquet", "destination": {"type": "local", "path": "out"}}])


def test_a_foreign_holder_with_an_expired_lease_is_swept_and_a_live_one_refuses(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    config = _sqlite_source(tmp_path)
    store = StateStore.open(config)
    try:
        now = datetime.now(UTC)

        def foreign(expires: datetime) -> None:
            row = dict(lock_key="items", token="t-foreign", mode="exclusive", export_name="items",
                       run_id="items_20260101T000000.000", pid=1, host="another-host", process_start=None,
                       started_at=now.isoformat(), heartbeat_at=now.isoformat(), expires_at=expires.isoformat())
            with store.database.transaction() as tx:
                tx.execute("DELETE FROM export_lock")
                tx.execute(insert_sql(export_lock, tuple(row)), row)

        foreign(now + timedelta(minutes=5))  # another machine, lease running: live
        with pytest.raises(ExportLocked, match="pid 1 on host another-host"):
            run_unit(load_config(config), load_config(config).exports[0], state=store, notifications=None)
        foreign(now - timedelta(seconds=1))  # its lease expired: the machine is gone
        summary = run_unit(load_config(config), load_config(config).exports[0], state=store, notifications=None)
        assert (summary.status, summary.total_rows) == ("success", 10)
        assert store.list_export_locks() == []
    finally:
        store.close()


def test_chunk_workers_share_the_lock_but_exclude_a_cli_run_and_vice_versa(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    config = _sqlite_source(tmp_path)
    store = StateStore.open(config)
    try:
        a = store.acquire_export_lock("items", mode="shared", orchestrator_run_id="dg-1", orchestrator="Dagster")
        with pytest.warns(DeprecationWarning, match="`dagster_run_id=` is deprecated"):  # the old keyword
            b = store.acquire_export_lock("items", mode="shared", dagster_run_id="dg-2")  # workers coexist
        assert {(h.orchestrator, h.orchestrator_run_id) for h in store.list_export_locks()} == {
            ("Dagster", "dg-1"), ("Dagster", "dg-2")}
        refused = rivet_quick("run", "-c", str(config))
        assert refused.returncode == 2
        assert "a chunked run of it by Dagster is in progress" in refused.stderr
        assert "(Dagster run dg-1)" in refused.stderr
        a.release()
        b.release()
        b.release()  # idempotent
        assert store.list_export_locks() == []
        cli = store.acquire_export_lock("items", mode="exclusive")
        with pytest.raises(ExportLocked, match="it is already running"):
            store.acquire_export_lock("items", mode="shared")
        # a time partition is its own lock key: other partitions of the export are not blocked
        store.acquire_export_lock("items", mode="exclusive", window_label="2026-01-02").release()
        # a live holder on this host is not cleared without --force
        cleared = rivet_quick("state", "unlock", "-c", str(config), "-e", "items")
        assert cleared.returncode == 2 and "is locked" in cleared.stderr
        forced = rivet_quick("state", "unlock", "-c", str(config), "-e", "items", "--force")
        assert forced.returncode == 0 and "Removed 1 lock(s)" in forced.stdout
        # the run whose lock was cleared can no longer move the cursor (conditional commit)
        with pytest.raises(ExportLockLost):
            store.set_cursor("items", "2026-01-01T00:10:00")
        assert store.get_cursor("items") is None
        cli.release()
        store.set_cursor("items", "2026-01-01T00:10:00")  # no lock held by this store: plain upsert
        assert store.get_cursor("items") == "2026-01-01T00:10:00"
    finally:
        store.close()

