"""A chunk run killed under the real Dagster daemon recovers with nobody at the keyboard.

tests/dagster/test_operations.py drives each recovery step by itself (the planner evaluated as
the daemon would, the dead run reported by the test). Here nothing is stood in for: a real
`dagster-daemon run` serves a code location through its own code server, with the shipped
`dagster_home/dagster.yaml` (queued runs, per-source pools, run monitoring); the planner
sensor starts by itself (`schedule_status: RUNNING`), the daemon launches its run, and the run
worker — a process the code server started — is SIGKILLed while window 2's part is written
(`RIVET_TEST_PAUSE_AT` parks it there, a file barrier; the test reads its pid and kills it).

What must then happen without any human action, each done by Dagster's own machinery and by
rivet's planner:
- the code server notices its run process died and records the run as failed;
- run monitoring frees the pool slot the dead run still held (free_slots_after_run_end_seconds);
- the planner's next tick takes the dead run's windows over (I5: stale `running` → pending),
  launches them with the manifest, and the manifest publishes.
The oracle re-reads the parts the published manifest lists with pyarrow and compares them with
the source rows, each id once. Waits are polls of the world with deadlines, never sleeps.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import dagster as dg
import pytest

from tests.dagster.support import Target, create_orders
from tests.dagster.test_chunk_freshness import EXPORT, chunk_run, orders_chunked
from tests.dagster.test_operations import SHIPPED_INSTANCE, assert_published_equals_source
from tests.helpers import REPO

PAUSE_POINT = "after_chunk_file:2"
RECOVERY_DEADLINE = 300   # killed worker → published manifest (about 20-60 s here)
START_DEADLINE = 180      # daemon start → the planner's run parked at window 2
T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], deadline_s: float,
             daemon: subprocess.Popen[str] | None = None) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` at the deadline
    (and with the daemon's output when the daemon itself has died)."""
    end = time.monotonic() + deadline_s
    while True:
        found = probe()
        if found:
            return found
        if daemon is not None and daemon.poll() is not None:
            out, _ = daemon.communicate()
            pytest.fail(f"dagster-daemon exited ({daemon.returncode}) while waiting for {what}:\n{out[-4000:]}")
        if time.monotonic() > end:
            pytest.fail(f"not within {deadline_s} s: {what}")
        time.sleep(0.2)  # polling the world with a deadline


@pytest.fixture(params=["sqlite", "postgres"])
def shipped_home(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A DAGSTER_HOME holding the shipped instance settings, with the run and event storage in
    SQLite files or in PostgreSQL (dagster-postgres)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    text = SHIPPED_INSTANCE.read_text()
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        text += f'storage:\n  postgres:\n    postgres_url: "postgresql+psycopg2://{url.split("://", 1)[1]}"\n'
    (home / "dagster.yaml").write_text(text)
    return home


@pytest.fixture
def daemon_for() -> Iterator[Callable[[Path, Path, dict[str, str]], subprocess.Popen[str]]]:
    """Start `dagster-daemon run -w <workspace>` in a session of its own; stop the whole group
    (daemon, code server, run workers) on teardown."""
    started: list[subprocess.Popen[str]] = []

    def start(home: Path, workspace: Path, env: dict[str, str]) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", str(workspace)],
            cwd=workspace.parent, env={**os.environ, "DAGSTER_HOME": str(home), **env},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if proc.stdout:
            proc.stdout.close()


def code_location(tmp_path: Path, config: Path) -> Path:
    """A workspace of one python_file code location building the definitions of `config` as the
    shipped `rivet_dagster/definitions.py` does (its executor: steps in the run's process, so
    the process the code server started is the one that dies)."""
    (tmp_path / "ops_defs.py").write_text(
        "from rivet_dagster import build_definitions\n"
        "from rivet_dagster.executors import executor_from_env\n"
        f"defs = build_definitions({str(config)!r}, executor=executor_from_env())\n")
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        "load_from:\n  - python_file:\n      relative_path: ops_defs.py\n"
        f"      working_directory: {REPO}\n      location_name: rivet_ops\n")
    return workspace


def claimed_slots(instance: dg.DagsterInstance, run_id: str) -> int:
    """Pool slots `run_id` still holds, over every pool of the instance."""
    storage = instance.event_log_storage
    return sum(1 for pool in storage.get_concurrency_keys()
               for slot in storage.get_concurrency_info(pool).claimed_slots if slot.run_id == run_id)


def test_a_killed_chunk_run_under_the_daemon_is_failed_its_slot_freed_and_its_windows_published_unattended(
        pg_url: str, tmp_path: Path, shipped_home: Path,
        daemon_for: Callable[[Path, Path, dict[str, str]], subprocess.Popen[str]]) -> None:
    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)
    config = orders_chunked(target, pg_url, dagster={"schedule_status": "RUNNING"})
    workspace = code_location(tmp_path, config)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    daemon = daemon_for(shipped_home, workspace, {
        "RIVET_TEST_PAUSE_AT": PAUSE_POINT, "RIVET_TEST_PAUSE_DIR": str(barrier),
        "RIVET_TEST_PAUSE_TIMEOUT_S": str(START_DEADLINE)})

    reached = barrier / f"{PAUSE_POINT}.reached"
    wait_for(f"the planner's run parked at {PAUSE_POINT}", reached.exists, START_DEADLINE, daemon)
    worker_pid = int(reached.read_text())
    with dg.DagsterInstance.from_config(str(shipped_home)) as instance:
        [parked] = [r for r in instance.get_runs() if not r.is_finished]
        assert claimed_slots(instance, parked.run_id) == 1, "the parked run's step holds a slot of the source pool"
        os.kill(worker_pid, signal.SIGKILL)
        killed_at = time.monotonic()
        (barrier / f"{PAUSE_POINT}.release").write_text("")  # the takeover run passes straight through

        dead = wait_for("the code server recording the killed run as failed", lambda: (
            (run := instance.get_run_by_id(parked.run_id)) and run.status == dg.DagsterRunStatus.FAILURE and run),
            RECOVERY_DEADLINE, daemon)
        failed_after = time.monotonic() - killed_at
        crash = [e for e in instance.all_logs(dead.run_id) if e.message and "terminated by signal 9" in e.message]
        assert crash, "the failure is the code server's report of a dead run process, not anything else"

        wait_for("run monitoring freeing the dead run's pool slot",
                 lambda: claimed_slots(instance, dead.run_id) == 0, RECOVERY_DEADLINE, daemon)
        freed_after = time.monotonic() - killed_at

        def published_whole() -> bool:
            manifest = target.view(EXPORT).current_manifest()
            return (bool(manifest) and manifest["status"] == "success"
                    and all(t.status == "completed" for t in chunk_run(config)[1].values()))

        wait_for("the planner taking the windows over and the manifest publishing", published_whole,
                 RECOVERY_DEADLINE, daemon)
        published_after = time.monotonic() - killed_at
        takeovers = [r for r in instance.get_runs() if r.run_id != dead.run_id]
        assert takeovers and all(r.status == dg.DagsterRunStatus.SUCCESS for r in takeovers), \
            [(r.run_id, r.status, r.tags.get("rivet/request"), r.tags.get("rivet/windows")) for r in takeovers]
        _, tasks = chunk_run(config)
        assert {t.worker for t in tasks.values() if t.attempts == 2} <= {r.run_id for r in takeovers}, \
            "the windows the dead run held were exported again by the planner's takeover run"

    manifest = assert_published_equals_source(target, pg_url)
    assert manifest["row_count"] == 550
    storage = "postgres" if "postgres" in (shipped_home / "dagster.yaml").read_text() else "sqlite"
    print(f"\n[measure] {storage} instance, real daemon: killed worker → run failed {failed_after:.1f} s, "
          f"→ slot freed {freed_after:.1f} s, → manifest published {published_after:.1f} s")
