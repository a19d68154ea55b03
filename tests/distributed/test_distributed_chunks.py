"""Issue 7 item 1: the distributed deployment of docs/distributed.md, end to end.

Dagster instance storage on PostgreSQL (dagster.yaml `storage: postgres:`), the Rivet state
store on PostgreSQL (RIVET_STATE_URL), the destination on the real S3 server, and the chunk
partitions of ONE export running at the same time in separate processes:

- the multiprocess executor: four partition runs at once, each step in its own subprocess;
- the Celery executor: four partition runs on two `celery -A dagster_celery.app worker`
  processes with a private Redis broker (or TEST_REDIS_URL).

From the state store (chunk_task: attempts, the Dagster run and the pid/host that claimed
each window) no window ran twice and at least two worker processes did the work; the
destination, re-read with pyarrow's own S3 client, equals the source table exactly. Two
`<export>_manifest` runs released together from a barrier publish ONE manifest that verifies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from rivet_core import api
from rivet_core.state import StateStore
from rivet_dagster.partition_keys import chunk_partition_key
from tests.dagster.support import create_orders, export_block, orders_config, s3_destination
from tests.distributed.conftest import EXAMPLES, stop_process, wait_until
from tests.distributed.location import EXPORT, definitions
from tests.distributed.run_job import execute
from tests.helpers import REPO, db_exec

ROWS = 400  # ids 0..399, chunk_size 100 → four windows
PARTITIONS = f"{EXPORT}_chunks"


@pytest.fixture
def deployment(tmp_path: Path, pg_url: str, extra_pg_db: Callable[[str], str], dagster_home: Path, s3: Any,
               monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Source on PostgreSQL, state on another PostgreSQL database, Dagster on a third, S3
    destination; the environment every process of the deployment shares."""
    create_orders(pg_url, rows=ROWS)
    config = orders_config(tmp_path, pg_url, [export_block(
        EXPORT, "chunked", s3_destination(s3, EXPORT), chunk_column="id", chunk_size=100)])
    env = {"RIVET_CONFIG": str(config), "RIVET_STATE_URL": extra_pg_db("state"), "DAGSTER_HOME": str(dagster_home),
           "DAGSTER_PG_URL": os.environ["DAGSTER_PG_URL"],
           "RIVET_TEST_AK": s3.access_key, "RIVET_TEST_SK": s3.secret_key, "AWS_EC2_METADATA_DISABLED": "true"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def register_windows(instance: dg.DagsterInstance) -> list[str]:
    """One planner evaluation, its partition requests applied as the daemon would."""
    defs = definitions()
    result = defs.resolve_sensor_def("rivet_chunk_planner")(dg.build_sensor_context(instance=instance,
                                                                                  definitions=defs))
    keys = [k for r in result.dynamic_partitions_requests or [] if isinstance(r, dg.AddDynamicPartitionsRequest)
            for k in r.partition_keys]
    instance.add_dynamic_partitions(PARTITIONS, keys)
    return keys


class Launched:
    """Dagster runs started as separate `run_job` processes (each the orchestrator of its run),
    stopped by PID in teardown if a test leaves one behind."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        proc = subprocess.Popen([sys.executable, "-m", "tests.distributed.run_job", *args], cwd=REPO, env=full,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    @staticmethod
    def outcome(proc: subprocess.Popen, timeout: float = 300) -> dict:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err[-3000:]
        return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def launched() -> Iterator[Launched]:
    runs = Launched()
    yield runs
    for proc in runs.procs:
        stop_process(proc)


def run_partitions_at_once(launched: Launched, keys: list[str]) -> list[dict]:
    """One Dagster run per window, all started together, each orchestrated by its own process
    (their steps run wherever the executor puts them)."""
    procs = [launched.start("chunks", k) for k in keys]
    return [launched.outcome(p) for p in procs]


def chunk_tasks(env: dict[str, str]) -> tuple[Any, list[Any]]:
    store = StateStore.open(env["RIVET_CONFIG"], env["RIVET_STATE_URL"])
    try:
        run = store.get_latest_chunk_run(EXPORT)
        assert run is not None
        return run, store.list_chunk_tasks(run.run_id)
    finally:
        store.close()


def assert_each_window_ran_once(tasks: list[Any], runs: list[dict]) -> set[int]:
    """No window ran twice: one attempt each, by the Dagster run of its partition; returns the
    pids of the processes that ran them."""
    assert [t.status for t in tasks] == ["completed"] * len(tasks)
    assert [t.attempts for t in tasks] == [1] * len(tasks), [(t.window_key, t.attempts) for t in tasks]
    assert sorted(t.worker for t in tasks) == sorted(r["run_id"] for r in runs)  # one run per window
    assert all(t.worker_pid and t.worker_host for t in tasks)
    return {t.worker_pid for t in tasks}


def s3_table(s3: Any, keys: list[str]) -> pa.Table:
    """The parts, re-read with pyarrow's own S3 filesystem (not the tool's boto3 client)."""
    fs = pafs.S3FileSystem(endpoint_override=s3.endpoint, scheme="http", access_key=s3.access_key,
                           secret_key=s3.secret_key, region="us-east-1")
    tables = [pq.read_table(f"{s3.bucket}/exports/{EXPORT}/{k}", filesystem=fs) for k in keys]
    return pa.concat_tables(tables, promote_options="permissive")


def assert_destination_equals_source(s3: Any, pg_url: str) -> dict[str, Any]:
    client = s3.client()
    body = client.get_object(Bucket=s3.bucket, Key=f"exports/{EXPORT}/manifest.json")["Body"].read()
    manifest = json.loads(body)
    assert manifest["status"] == "success"
    paths = [p["path"] for p in manifest["parts"]]
    assert len(paths) == len(set(paths)) == 4
    got = s3_table(s3, paths).sort_by("id")
    columns = ["id", "customer", "amount", "note", "created_at", "updated_at"]
    source = db_exec(pg_url, f"SELECT {', '.join(columns)} FROM orders ORDER BY id")
    assert got.num_rows == len(source) == ROWS
    assert [tuple(r[c] for c in columns) for r in got.select(columns).to_pylist()] == source
    _, verdict = api.verify_export(api.load_config(os.environ["RIVET_CONFIG"]), EXPORT)  # depth full
    assert verdict.passed, verdict.to_dict()
    return manifest


def assert_file_log_matches(env: dict[str, str], run_id: str, manifest: dict[str, Any]) -> None:
    """file_log: one row per published part, nothing else recorded for the run; one terminal
    metrics row and one ledger row for the chunk run."""
    store = StateStore.open(env["RIVET_CONFIG"], env["RIVET_STATE_URL"])
    try:
        files = store.list_files_for_run(run_id)
        assert sorted(f.file_name for f in files) == sorted(p["path"] for p in manifest["parts"])
        assert sum(f.row_count for f in files) == ROWS
        metrics = [m for m in store.list_metrics(EXPORT) if m["run_id"] == run_id]
        assert [m["status"] for m in metrics] == ["success"] and metrics[0]["total_rows"] == ROWS
        assert (store.get_run_status(run_id) or {}).get("status") == "success"
        assert store.list_export_locks(EXPORT) == []  # every worker released its shared lock
    finally:
        store.close()


# ------------------------------------------------------------------------------ multiprocess
def _race_env(env: dict[str, str], barrier: Path) -> dict[str, str]:
    barrier.mkdir()
    return {**env, "RIVET_DAGSTER_EXECUTOR": "in_process", "RIVET_TEST_PAUSE_AT": "before_chunk_finalize",
            "RIVET_TEST_PAUSE_DIR": str(barrier), "RIVET_TEST_PAUSE_TIMEOUT_S": "120"}


def test_multiprocess_partitions_in_parallel_and_two_racing_manifests_publish_one(
        deployment: dict[str, str], pg_url: str, s3: Any, tmp_path: Path, launched: Launched,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIVET_DAGSTER_EXECUTOR", "multiprocess")
    with dg.DagsterInstance.get() as instance:
        keys = register_windows(instance)
    assert len(keys) == 4

    runs = run_partitions_at_once(launched, keys)
    assert all(r["success"] for r in runs), runs
    chunk_run, tasks = chunk_tasks(deployment)
    pids = assert_each_window_ran_once(tasks, runs)
    orchestrators = {p.pid for p in launched.procs}
    assert len(pids) == 4 and not pids & (orchestrators | {os.getpid()})  # each step in its own subprocess

    # Two finalizations at once: both pass the I6 pre-check, then wait at the barrier
    # (before_chunk_finalize) and are released together.
    barriers = [tmp_path / "race_a", tmp_path / "race_b"]
    racers = [launched.start("manifest", env=_race_env(deployment, b)) for b in barriers]

    def held() -> str | None:
        dead = [p for p in racers if p.poll() is not None]
        return f"a racer exited early: {dead[0].communicate()[1][-2000:]}" if dead else None

    wait_until("both manifest runs at the barrier",
               lambda: all((b / "before_chunk_finalize.reached").exists() for b in barriers), timeout=120, alive=held)
    for b in barriers:
        (b / "before_chunk_finalize.release").write_text("go")
    outcomes = [launched.outcome(proc) for proc in racers]
    assert sorted(o["success"] for o in outcomes) == [False, True], outcomes
    [loser] = [o for o in outcomes if not o["success"]]
    assert any("finalized it" in e for e in loser["errors"]), loser

    manifest = assert_destination_equals_source(s3, pg_url)
    assert manifest["run_id"] == chunk_run.run_id
    copies = [o for o in s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=f"exports/{EXPORT}/manifest-")
              .get("Contents", [])]
    assert len(copies) == 1  # one per-run manifest copy: the loser wrote nothing
    assert_file_log_matches(deployment, chunk_run.run_id, manifest)


# ------------------------------------------------------------------------------ celery
@pytest.fixture
def celery_workers(deployment: dict[str, str], redis_url: str, tmp_path: Path) -> Iterator[list[subprocess.Popen]]:
    """Two `celery -A dagster_celery.app worker` processes (solo pool: a task runs in the
    worker process itself), stopped by PID afterwards. Window 0 is held at `chunk_export:0`
    until the test releases it, so its worker cannot take every window: both must work."""
    barrier = tmp_path / "celery_barrier"
    barrier.mkdir()
    # examples/distributed/dagster_celery_config.py on PYTHONPATH: the settings as documented.
    env = {**os.environ, **deployment, "PYTHONPATH": f"{EXAMPLES}{os.pathsep}{REPO}",
           "RIVET_DAGSTER_EXECUTOR": "celery", "DAGSTER_CELERY_BROKER_URL": redis_url,
           "DAGSTER_CELERY_BACKEND_URL": redis_url, "RIVET_TEST_PAUSE_AT": "chunk_export:0",
           "RIVET_TEST_PAUSE_DIR": str(barrier), "RIVET_TEST_PAUSE_TIMEOUT_S": "180"}
    workers: list[subprocess.Popen] = []
    logs = []
    try:
        for name in ("w1", "w2"):
            log = open(tmp_path / f"celery_{name}.log", "w")  # noqa: SIM115 - closed below
            logs.append(log)
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "dagster_celery.app", "worker", "--pool", "solo",
                 "--concurrency", "1", "--hostname", f"{name}@%h", "--loglevel", "INFO", "--without-gossip",
                 "--without-mingle", "--without-heartbeat"],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT))
        from celery import Celery

        app = Celery(broker=redis_url, backend=redis_url)

        def dead() -> str | None:
            gone = [(w, log) for w, log in zip(workers, logs, strict=True) if w.poll() is not None]
            return (f"celery worker exited: {Path(gone[0][1].name).read_text()[-2000:]}" if gone else None)

        wait_until("two celery workers answering ping", lambda: len(app.control.ping(timeout=1.0)) >= 2,
                   timeout=120, alive=dead)
        app.close()
        yield workers
    finally:
        for w in workers:
            stop_process(w)
        for log in logs:
            log.close()


def test_celery_workers_run_the_partitions_of_one_export(
        deployment: dict[str, str], redis_url: str, pg_url: str, s3: Any, tmp_path: Path,
        celery_workers: list[subprocess.Popen], launched: Launched, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in {"RIVET_DAGSTER_EXECUTOR": "celery", "DAGSTER_CELERY_BROKER_URL": redis_url,
                 "DAGSTER_CELERY_BACKEND_URL": redis_url}.items():
        monkeypatch.setenv(k, v)
    with dg.DagsterInstance.get() as instance:
        keys = register_windows(instance)
    assert len(keys) == 4

    # Window 0 first: its worker is held at chunk_export:0 (mid-run, task claimed), then the
    # three others are launched together — the held worker cannot take them, so they run on
    # the other worker while window 0 is still in flight; then window 0 is released.
    barrier = tmp_path / "celery_barrier"
    procs = [launched.start("chunks", keys[0])]
    try:
        wait_until("window 0 held on a worker", lambda: (barrier / "chunk_export:0.reached").exists(), timeout=180)
        held_by = int((barrier / "chunk_export:0.reached").read_text())
        procs += [launched.start("chunks", k) for k in keys[1:]]

        def others_done() -> bool:
            _, tasks = chunk_tasks(deployment)
            return sum(t.status == "completed" for t in tasks) == 3

        wait_until("the other three windows completed", others_done, timeout=180)
        _, tasks = chunk_tasks(deployment)
        assert tasks[0].status == "running"  # window 0 was in flight all along
    finally:
        (barrier / "chunk_export:0.release").write_text("go")
    runs = [launched.outcome(p) for p in procs]
    assert all(r["success"] for r in runs), runs

    chunk_run, tasks = chunk_tasks(deployment)
    pids = assert_each_window_ran_once(tasks, runs)
    worker_pids = {w.pid for w in celery_workers}
    # the chunk_task rows keep the core's window keys; Dagster's are their readable form
    by_pid = {pid: sorted(chunk_partition_key(t.window_key) for t in tasks if t.worker_pid == pid) for pid in pids}
    assert pids == worker_pids, by_pid  # both workers did work, nothing ran in this process
    assert by_pid[held_by] == [keys[0]] and by_pid[(worker_pids - {held_by}).pop()] == sorted(keys[1:])

    final = execute("manifest")  # orchestrated here (main thread); the step runs on a worker too
    assert final["success"], final
    manifest = assert_destination_equals_source(s3, pg_url)
    assert_file_log_matches(deployment, chunk_run.run_id, manifest)
