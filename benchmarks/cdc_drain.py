"""A CDC drain against a full export of the same number of rows (issue 36 "Performance").

    python -m benchmarks --scenario cdc-drain --changes 1000000 [--engine mysql]

PostgreSQL (default) needs TEST_PG_DSN (or --pg-url; the server must run with
wal_level=logical); `--engine mysql` needs TEST_MYSQL_DSN (or --mysql-url; a MariaDB with the
ROW binlog docs/cdc-mysql.md asks for), where a first run records the binlog position, the
changes come from benchmarks/cdc_mysql.py's stored procedure (the same 60/30/10 mix, one
autocommit statement each) and the full export's table from MariaDB's sequence engine. In its own
database (`rivet_bench_cdc`, dropped at the end unless --keep): a first `rivet run` of a
`mode: cdc` export creates its slot; then `--changes` single-row transactions — 60 % inserts,
30 % updates, 10 % deletes, each its own commit — and a table of `--changes` rows of the same
shape for the full export. Reported (not asserted), per run in a fresh process: wall time, CPU
and peak RSS of the drain and of the full export, and the rows each published (read back from
the parts with pyarrow). Targets: drain ≤ 2× the full export's time, RSS ≤ 256 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pyarrow.dataset as ds
import yaml

DATABASE = "rivet_bench_cdc"
COLUMNS = "(id BIGINT PRIMARY KEY, name TEXT, amount NUMERIC(12,2), ts TIMESTAMPTZ, flag BOOL)"


def _database(admin: str) -> str:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DATABASE}")
    return admin.rsplit("/", 1)[0] + "/" + DATABASE


def _changes(url: str, n: int) -> None:
    inserts, updates, deletes = n * 6 // 10, n * 3 // 10, n - n * 6 // 10 - n * 3 // 10
    loops = [f"FOR i IN 1..{inserts} LOOP INSERT INTO ev VALUES (i, 'name ' || i, i * 1.5, now(), i % 2 = 0); "
             "COMMIT; END LOOP;",
             f"FOR i IN 1..{updates} LOOP UPDATE ev SET name = 'upd ' || i, amount = amount + 1 WHERE id = i; "
             "COMMIT; END LOOP;",
             f"FOR i IN {inserts - deletes + 1}..{inserts} LOOP DELETE FROM ev WHERE id = i; COMMIT; END LOOP;"]
    with psycopg.connect(url, autocommit=True) as conn:
        for body in loops:
            conn.execute(f"DO $$ BEGIN {body} END $$")
        conn.execute(f"CREATE TABLE ev_rows {COLUMNS}")
        conn.execute("INSERT INTO ev_rows SELECT g, 'name ' || g, g * 1.5, now(), g % 2 = 0 "
                     f"FROM generate_series(1, {n}) g")


def _run(config: Path, export: str) -> dict[str, float]:
    """One `rivet run` in a fresh process: wall seconds, and that process's CPU seconds and
    peak RSS (wait4) — CPU is the comparable figure on a host shared with other jobs."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "rivet_core.cli", "run", "-c", str(config), "-e", export],
                                stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{export} failed:\n{err.read().decode(errors='replace')}")
    return {"wall_s": round(wall, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024)}


def _mysql_setup(admin: str, n: int, work: Path) -> tuple[str, Path]:
    """MySQL/MariaDB: the database, the config, the position-recording first run, then the
    `n` changes and the full export's `n`-row table. Returns the database URL and config."""
    import pymysql

    from benchmarks.cdc_mysql import CHURN
    from benchmarks.cdc_mysql import COLUMNS as MYSQL_COLUMNS
    from rivet_core.source.mysql.session import mysql_connect_args

    args = mysql_connect_args(admin)
    args.pop("database", None)
    conn = pymysql.connect(**{**args, "autocommit": True})
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cur.execute(f"CREATE DATABASE {DATABASE}")
        cur.execute(f"USE {DATABASE}")
        cur.execute(f"CREATE TABLE churn ({MYSQL_COLUMNS})")
        cur.execute(CHURN)
    url = admin.rsplit("/", 1)[0] + "/" + DATABASE
    config = work / "rivet.yaml"
    config.write_text(yaml.safe_dump({"source": {"type": "mysql", "url": url}, "exports": [
        {"name": "ev_cdc", "table": "churn", "mode": "cdc", "format": "parquet", "cdc": {"server_id": 4998},
         "destination": {"type": "local", "path": "cdc"}},
        {"name": "ev_full", "table": "ev_rows", "format": "parquet",
         "destination": {"type": "local", "path": "full"}}]}))
    _run(config, "ev_cdc")  # records where the binlog is: the stream starts here
    with conn.cursor() as cur:
        cur.execute(f"CALL churn({n // 10})")  # 10 single-row transactions per block
        cur.execute(f"CREATE TABLE ev_rows ({MYSQL_COLUMNS})")
        cur.execute(f"INSERT INTO ev_rows SELECT seq, CONCAT('name-', seq), seq * 1.25, "
                    f"TIMESTAMP('2026-01-01') + INTERVAL seq SECOND, seq % 6 FROM seq_0_to_{n - 1}")
    conn.close()
    return url, config


def _mysql_drop(admin: str) -> None:
    import pymysql

    from rivet_core.source.mysql.session import mysql_connect_args

    args = mysql_connect_args(admin)
    args.pop("database", None)
    conn = pymysql.connect(**{**args, "autocommit": True})
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    conn.close()


def _pg_setup(admin: str, n: int, work: Path) -> tuple[str, Path]:
    """PostgreSQL: the database, the config, the slot-creating first run, then the changes."""
    url = _database(admin)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE ev {COLUMNS}")
    config = work / "rivet.yaml"
    config.write_text(yaml.safe_dump({"source": {"type": "postgres", "url": url}, "exports": [
        {"name": "ev_cdc", "table": "ev", "mode": "cdc", "format": "parquet", "cdc": {"slot": "rivet_bench_cdc"},
         "destination": {"type": "local", "path": "cdc"}},
        {"name": "ev_full", "table": "ev_rows", "format": "parquet",
         "destination": {"type": "local", "path": "full"}}]}))
    _run(config, "ev_cdc")  # creates the slot
    _changes(url, n)
    return url, config


def _pg_drop(admin: str, url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot('rivet_bench_cdc')")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks --scenario cdc-drain", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=("pg", "mysql"), default="pg")
    ap.add_argument("--pg-url", default=os.environ.get("TEST_PG_DSN", ""))
    ap.add_argument("--mysql-url", default=os.environ.get("TEST_MYSQL_DSN", ""))
    ap.add_argument("--changes", type=int, default=1_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the benchmark database and output")
    args = ap.parse_args(argv)
    admin = args.pg_url if args.engine == "pg" else args.mysql_url
    if not admin:
        raise SystemExit("set TEST_PG_DSN or --pg-url" if args.engine == "pg" else "set TEST_MYSQL_DSN or --mysql-url")
    work = Path(tempfile.mkdtemp(prefix="rivet-bench-cdc."))
    url = ""
    try:
        setup = _pg_setup if args.engine == "pg" else _mysql_setup
        url, config = setup(admin, args.changes, work)
        result: dict = {"engine": args.engine, "changes": args.changes,
                        "full": _run(config, "ev_full"), "cdc": _run(config, "ev_cdc")}
        for name in ("cdc", "full"):
            result[name]["rows"] = ds.dataset(work / name / "data", format="parquet").count_rows()
        result["cdc_over_full"] = round(result["cdc"]["wall_s"] / result["full"]["wall_s"], 1)
        print(json.dumps(result, indent=2))
    finally:
        if not args.keep:
            if args.engine == "pg" and url:
                _pg_drop(admin, url)
            elif args.engine == "mysql":
                _mysql_drop(admin)
            shutil.rmtree(work, ignore_errors=True)
    return 0
