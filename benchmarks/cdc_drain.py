"""A CDC drain against a full export of the same number of rows (issue 36 "Performance").

    python -m benchmarks --scenario cdc-drain --changes 1000000

Needs TEST_PG_DSN (or --pg-url; the server must run with wal_level=logical). In its own
database (`rivet_bench_cdc`, dropped at the end unless --keep): a first `rivet run` of a
`mode: cdc` export creates its slot; then `--changes` single-row transactions — 60 % inserts,
30 % updates, 10 % deletes, each its own commit — and a table of `--changes` rows of the same
shape for the full export. Reported (not asserted), per run in a fresh process: wall time and
peak RSS of the drain and of the full export, and the rows each published (read back from
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
    """One `rivet run` in a fresh process: wall seconds and that process's peak RSS (wait4)."""
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
    return {"wall_s": round(wall, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks --scenario cdc-drain", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pg-url", default=os.environ.get("TEST_PG_DSN", ""))
    ap.add_argument("--changes", type=int, default=1_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the benchmark database and output")
    args = ap.parse_args(argv)
    if not args.pg_url:
        raise SystemExit("set TEST_PG_DSN or --pg-url")
    url = _database(args.pg_url)
    work = Path(tempfile.mkdtemp(prefix="rivet-bench-cdc."))
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE ev {COLUMNS}")
        config = work / "rivet.yaml"
        config.write_text(yaml.safe_dump({"source": {"type": "postgres", "url": url}, "exports": [
            {"name": "ev_cdc", "table": "ev", "mode": "cdc", "format": "parquet", "cdc": {"slot": "rivet_bench_cdc"},
             "destination": {"type": "local", "path": "cdc"}},
            {"name": "ev_full", "table": "ev_rows", "format": "parquet",
             "destination": {"type": "local", "path": "full"}}]}))
        _run(config, "ev_cdc")  # creates the slot
        _changes(url, args.changes)
        result = {"changes": args.changes, "full": _run(config, "ev_full"), "cdc": _run(config, "ev_cdc")}
        for name in ("cdc", "full"):
            result[name]["rows"] = ds.dataset(work / name / "data", format="parquet").count_rows()
        result["cdc_over_full"] = round(result["cdc"]["wall_s"] / result["full"]["wall_s"], 1)
        print(json.dumps(result, indent=2))
    finally:
        if not args.keep:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SELECT pg_drop_replication_slot('rivet_bench_cdc')")
            with psycopg.connect(args.pg_url, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
            shutil.rmtree(work, ignore_errors=True)
    return 0
