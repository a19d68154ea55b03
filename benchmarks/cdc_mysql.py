"""The MySQL/MariaDB binlog reader on 1 M single-row changes, next to a full export of 1 M rows.

    python -m benchmarks.cdc_mysql prepare --url mysql://root@127.0.0.1:PORT/mysql
    /usr/bin/time -f '%e s, %M KB' python -m benchmarks.cdc_mysql drain --url … [--profile FILE]
    /usr/bin/time -f '%e s, %M KB' python -m benchmarks.cdc_mysql full --url … --out DIR

`prepare` creates the database `rivet_cdcbench` with `churn` (the change source) and
`full1m` (1 M rows of the same columns, for the full export), records the binlog position,
then runs 1 M autocommit statements inside the server (a stored procedure, so the client's
round trips are not what is measured): per block of ten, 6 inserts, 3 updates, 1 delete —
each one transaction of one row. `drain` reads them all through `MySQLChangeReader`
(no destination: what the reader costs) and checks the counts per operation against what
`prepare` executed. `full` is `rivet run` of `full1m`, `mode: full`, local Parquet. The window runs to the
binlog's end at `drain`: on a shared server, other writes between `prepare` and `drain` are
read past (other schemas) — or refused, if compressed — so drain right after prepare.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

from rivet_core.source.mysql.changes import MySQLChangeReader, position_of

DB = "rivet_cdcbench"
BLOCKS = 100_000  # x 10 statements = 1 M changes
COLUMNS = "id BIGINT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(12,2), at DATETIME(6), qty INT"
EXPECTED = {"insert": 6 * BLOCKS, "update": 3 * BLOCKS, "delete": BLOCKS}
START_FILE = Path(tempfile.gettempdir()) / "rivet_cdcbench.start.json"

CHURN = """
CREATE PROCEDURE churn(blocks INT)
BEGIN
  DECLARE k INT DEFAULT 0;
  DECLARE j INT;
  WHILE k < blocks DO
    SET j = 0;
    WHILE j < 6 DO
      INSERT INTO churn VALUES (6 * k + j, CONCAT('name-', 6 * k + j), (6 * k + j) * 1.25,
                                TIMESTAMP('2026-01-01') + INTERVAL (6 * k + j) SECOND, j);
      SET j = j + 1;
    END WHILE;
    UPDATE churn SET amount = amount + 1, name = 'updated' WHERE id = 6 * k;
    UPDATE churn SET qty = qty + 10 WHERE id = 6 * k + 1;
    UPDATE churn SET at = at + INTERVAL 1 DAY WHERE id = 6 * k + 2;
    DELETE FROM churn WHERE id = 6 * k + 5;
    SET k = k + 1;
  END WHILE;
END"""


def _url(base: str) -> str:
    return base.rsplit("/", 1)[0] + "/" + DB


def prepare(url: str) -> None:
    import pymysql

    from rivet_core.source.mysql.session import mysql_connect_args

    args = mysql_connect_args(url)
    args.pop("database", None)
    conn = pymysql.connect(**args)
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute(f"USE {DB}")
        cur.execute(f"CREATE TABLE churn ({COLUMNS})")
        cur.execute(f"CREATE TABLE full1m ({COLUMNS})")
        cur.execute("INSERT INTO full1m SELECT seq, CONCAT('name-', seq), seq * 1.25, "
                    "TIMESTAMP('2026-01-01') + INTERVAL seq SECOND, seq % 6 FROM seq_0_to_999999")
        cur.execute(CHURN)
    with MySQLChangeReader(_url(url), ["churn"], server_id=4999) as reader:
        START_FILE.write_text(reader.current_position().to_json())
    started = time.perf_counter()
    with conn.cursor() as cur:
        cur.execute(f"CALL churn({BLOCKS})")
    print(f"1 M changes written in {time.perf_counter() - started:.1f} s; start {START_FILE.read_text()}")


def drain(url: str, batch_rows: int, profile: str | None, limit: int | None, server_id: int) -> None:
    start = position_of(json.loads(START_FILE.read_text()))
    counts: Counter[str] = Counter()
    batches = 0
    started = time.perf_counter()
    profiler = cProfile.Profile() if profile else None
    with MySQLChangeReader(_url(url), ["churn"], server_id=server_id) as reader:
        reader.preflight()
        reader.open(start)
        if profiler:
            profiler.enable()
        for batch in reader.read(batch_rows):
            counts.update(batch.rows.column("__op").to_pylist())
            batches += 1
            if limit and sum(counts.values()) >= limit:
                break
        if profiler:
            profiler.disable()
            profiler.dump_stats(profile)
    elapsed = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"drained {sum(counts.values()):,} changes in {batches:,} batches, {elapsed:.1f} s wall, "
          f"{usage.ru_utime + usage.ru_stime:.1f} s CPU ({sum(counts.values()) / elapsed:,.0f} changes/s): "
          f"{dict(counts)}")
    if not limit and dict(counts) != EXPECTED:
        sys.exit(f"counts differ from what prepare executed: {dict(counts)} != {EXPECTED}")


def full(url: str, out: str) -> None:
    config = Path(out) / "rivet.yaml"
    Path(out).mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({
        "source": {"type": "mysql", "url": _url(url)},
        "exports": [{"name": "full1m", "table": "full1m", "mode": "full", "format": "parquet",
                     "destination": {"type": "local", "path": str(Path(out) / "data")}}]}))
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rivet_core.cli", "run", "-c", str(config)], check=True)
    print(f"full export of 1 M rows: {time.perf_counter() - started:.1f} s")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cdc_mysql")
    parser.add_argument("step", choices=["prepare", "drain", "full"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--batch-rows", type=int, default=10_000)
    parser.add_argument("--profile")
    parser.add_argument("--server-id", type=int, default=4999)
    parser.add_argument("--limit", type=int, help="stop after this many changes (profiling)")
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "rivet_cdcbench_full"))
    args = parser.parse_args(argv)
    if args.step == "prepare":
        prepare(args.url)
    elif args.step == "drain":
        drain(args.url, args.batch_rows, args.profile, args.limit, args.server_id)
    else:
        full(args.url, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
