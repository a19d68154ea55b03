"""Recovery without human action under a real `dagster-daemon run` (issue 39, the closing
measurement): how long after its run worker is SIGKILLed a chunked export publishes, and
how long until the dead run's pool slot is free.

    python -m benchmarks.dagster_recovery sqlite|postgres [--rows 550]

Needs TEST_PG_DSN (`bash scripts/services.sh start DIR pg`). A fresh database holds `orders`
(ids 0..rows-1, windows of 100 ids); the DAGSTER_HOME is the project's dagster_home/dagster.yaml
(plus dagster-postgres storage on the same server for `postgres`); the planner sensor starts
RUNNING. The daemon's first chunk run parks at window 2 (`RIVET_TEST_PAUSE_AT=chunk_export:2`,
rivet_core/pipeline/faults.py) and is SIGKILLed there; the clock starts at the kill. It
stops when manifest.json says success (the planner took the windows over and its run
published) and when the run's slot of pool `source_<db>` is no longer claimed (run
monitoring, `free_slots_after_run_end_seconds`). Results are printed; the published rows are
compared with the source (each id once).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parent.parent
PAUSE_POINT = "chunk_export:2"


def create_source(admin: str, rows: int) -> tuple[str, str]:
    """(url, database name) of a fresh database holding `orders`."""
    db = f"rivet_recovery_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    url = admin.rsplit("/", 1)[0] + "/" + db
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, amount numeric(12,2) NOT NULL)")
        conn.execute(f"INSERT INTO orders SELECT g, round((g * 7.31) % 5000, 2) FROM generate_series(0, {rows - 1}) g")
    return url, db


def layout(root: Path, url: str, storage: str) -> tuple[Path, Path]:
    """(config, DAGSTER_HOME) under `root`."""
    config = root / "rivet.yaml"
    config.write_text(yaml.safe_dump({"source": {"type": "postgres", "url": url}, "exports": [{
        "name": "orders_chunked", "table": "orders", "mode": "chunked", "format": "parquet",
        "destination": {"type": "local", "path": str(root / "out")}, "chunk_column": "id", "chunk_size": 100,
        "dagster": {"schedule_status": "RUNNING"}}]}, sort_keys=False))
    home = root / "home"
    home.mkdir()
    text = (REPO / "dagster_home" / "dagster.yaml").read_text()
    if storage == "postgres":
        text += f'storage:\n  postgres:\n    postgres_url: "postgresql+psycopg2://{url.split("://", 1)[1]}"\n'
    (home / "dagster.yaml").write_text(text)
    return config, home


def wait_for(predicate, deadline: float, what: str, daemon: subprocess.Popen) -> None:  # noqa: ANN001
    while not predicate():
        if daemon.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what}")
        time.sleep(0.2)  # polling the world with a deadline (a measurement, not a test)


def published_ok(root: Path, url: str) -> bool:
    manifest = root / "out" / "manifest.json"
    if not manifest.exists() or json.loads(manifest.read_text()).get("status") != "success":
        return False
    parts = json.loads(manifest.read_text())["parts"]
    ids = [i for p in parts for i in pq.read_table(root / "out" / p["path"]).column("id").to_pylist()]
    with psycopg.connect(url) as conn:
        source = [r[0] for r in conn.execute("SELECT id FROM orders ORDER BY id")]
    if sorted(ids) != source:
        raise SystemExit("the published ids differ from the source")
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("storage", choices=("sqlite", "postgres"))
    parser.add_argument("--rows", type=int, default=550)
    args = parser.parse_args()
    url, db = create_source(os.environ["TEST_PG_DSN"], args.rows)
    root = Path(tempfile.mkdtemp(prefix=f"rivet-recovery-{args.storage}-"))
    config, home = layout(root, url, args.storage)
    pause = root / "pause"
    pause.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home), "RIVET_CONFIG": str(config),
           "RIVET_TEST_PAUSE_AT": PAUSE_POINT, "RIVET_TEST_PAUSE_DIR": str(pause)}
    with open(root / "daemon.log", "w") as log:
        daemon = subprocess.Popen([sys.executable, "-m", "dagster._daemon", "run", "-m", "rivet_dagster.definitions"],
                                  cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        reached = pause / f"{PAUSE_POINT}.reached"
        wait_for(reached.exists, deadline, "the first chunk run to reach window 2", daemon)
        os.kill(int(reached.read_text()), signal.SIGKILL)
        killed = time.monotonic()
        (pause / f"{PAUSE_POINT}.release").touch()  # the takeover run passes the point
        import dagster as dg

        with dg.DagsterInstance.from_config(str(home)) as instance:
            dead = instance.get_runs()[-1].run_id
            pool = f"source_{db}"
            times: dict[str, float] = {}
            checks = {"published": lambda: published_ok(root, url),
                      "slot freed": lambda: dead not in {s.run_id for s in instance.event_log_storage
                                                         .get_concurrency_info(pool).claimed_slots}}

            def both() -> bool:
                for name, check in checks.items():
                    if name not in times and check():
                        times[name] = time.monotonic() - killed
                return len(times) == len(checks)

            wait_for(both, deadline, "the published manifest and the freed slot", daemon)
            print(f"{args.storage}: killed chunk run → published manifest, each id once: {times['published']:.1f} s")
            print(f"{args.storage}: killed run → its pool slot freed: {times['slot freed']:.1f} s")
    finally:
        os.killpg(daemon.pid, signal.SIGINT)
        try:
            daemon.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
        with psycopg.connect(os.environ["TEST_PG_DSN"], autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


if __name__ == "__main__":
    main()
