"""The export benchmark: rivet vs the tools users would pick instead, side by side, one run.

    python -m benchmarks                               # full scale: 5 M orders, 10 M narrow, 3 reps
    python -m benchmarks --scale 0.02 --repeat 1       # small: 100 k orders, 200 k narrow
    python -m benchmarks --rows 2000 --methods rivet,floor --engines pg --no-peers

What one run does (issue 5):
1. servers: `--pg-url/--mysql-url` (or TEST_PG_DSN / TEST_MYSQL_DSN) when given, else private
   PostgreSQL + MariaDB started with scripts/services.sh in a temp dir and stopped at exit;
2. fixture: database `rivet_bench` with `orders` (the wide 11-column shape) and `narrow`
   (4 columns), deterministic, rebuilt only when the row counts changed (table comment);
3. peers' venv: `.venv-bench` from benchmarks/requirements.txt (uv; re-installed when that
   file changes) — the project's own lock is never touched;
4. per engine and table: warm-up (the client floor, unrecorded), then `--repeat` rounds of
   every method, each in a fresh process, in a rotated order; per run: wall, peak RSS of
   the process tree (GNU time %M), longest single statement and longest open transaction
   (server-side sampling of pg_stat_activity / information_schema every 0.1 s), output
   size and an order-independent checksum of the output against the source (checksum.py);
5. results: `<results>/runs.jsonl` (every run) and docs/benchmarks.md (medians, machine
   facts, the command, the issue-5 targets evaluated).

Wall time is the whole process (interpreter start and imports included, as a user waits
for it). The machine is shared: compare ratios within one run, not absolute seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.bytecode import compile_tree
from benchmarks.checksum import compare, file_checksums, source_checksums
from benchmarks.labels import CLIENT_FLOOR, ENGINE_LABEL, SLOW_METHODS, slow_repeat
from benchmarks.report import write_report

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "benchmarks"
BENCH_DB = "rivet_bench"
DEFAULT_ORDERS = 5_000_000
DEFAULT_NARROW = 10_000_000
FIXTURE_VERSION = 1
# Windows of the chunked runs. The target is a window's statement/transaction ≤ 1/8 of the
# full export's; with parallel 2 on a 2-core machine each window streams at about half the
# single-stream rate, so 1/16 of the rows took ~1/8 of the time (PG orders, 16 windows:
# transaction 1.80 s vs 13.31 s = 1/7.4). 32 windows leave a margin.
CHUNK_COUNT = 32


# --------------------------------------------------------------------------- methods

@dataclass(frozen=True)
class Method:
    """One way to export a table; `argv(ctx)` is the command the harness times."""

    name: str
    kind: str  # floor | rivet | peer
    engines: tuple[str, ...]
    label: str
    argv: Callable[[RunCtx], list[str]]
    writes: bool = True
    #: Run only when named exactly in --methods (needs a server the default run does not).
    explicit: bool = False


@dataclass
class RunCtx:
    engine: str
    table: str
    url: str  # source URL including the bench database
    out: Path
    python_bench: Path
    env: dict[str, str] = field(default_factory=dict)


def _pg_psql(ctx: RunCtx, sql: str) -> list[str]:
    return ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", ctx.url, "-c", sql]


def _mysql_client_args(url: str) -> list[str]:
    parts = urllib.parse.urlsplit(url)
    args = ["mariadb", "--no-defaults", "-h", parts.hostname or "127.0.0.1",
            "-P", str(parts.port or 3306), "-u", urllib.parse.unquote(parts.username or "root")]
    if parts.password:
        args.append("-p" + urllib.parse.unquote(parts.password))
    return [*args, parts.path.lstrip("/")]


#: The S3 bucket the `rivet_full_s3` method writes to (created on first use; each run
#: writes under its own prefix, removed after the run).
S3_BUCKET = "rivet-bench"


def s3_prefix(out: Path) -> str:
    """A run's key prefix in the bucket: unique per output directory, so harness runs that
    share the S3 server never write (or remove) each other's objects."""
    return f"{out.name}-{hashlib.sha1(str(out.resolve()).encode()).hexdigest()[:10]}/"


def _s3_destination(ctx: RunCtx) -> dict[str, Any]:
    """The S3-compatible server of TEST_S3_ENDPOINT / TEST_S3_ACCESS_KEY / TEST_S3_SECRET_KEY
    (scripts/services.sh `s3`: SeaweedFS on loopback)."""
    endpoint = os.environ.get("TEST_S3_ENDPOINT", "")
    if not endpoint:
        raise SystemExit("rivet_full_s3 needs TEST_S3_ENDPOINT, TEST_S3_ACCESS_KEY and TEST_S3_SECRET_KEY "
                         "(bash scripts/services.sh start DIR s3; source DIR/env.sh)")
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id=os.environ["TEST_S3_ACCESS_KEY"],
                          aws_secret_access_key=os.environ["TEST_S3_SECRET_KEY"])
    if S3_BUCKET not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
        client.create_bucket(Bucket=S3_BUCKET)
    ctx.env.update(BENCH_S3_ACCESS_KEY=os.environ["TEST_S3_ACCESS_KEY"],
                   BENCH_S3_SECRET_KEY=os.environ["TEST_S3_SECRET_KEY"])
    return {"type": "s3", "bucket": S3_BUCKET, "prefix": s3_prefix(ctx.out), "endpoint": endpoint,
            "access_key_env": "BENCH_S3_ACCESS_KEY", "secret_key_env": "BENCH_S3_SECRET_KEY"}


def remove_s3_prefix(prefix: str) -> int:
    """Delete what a `rivet_full_s3` run wrote (SeaweedFS keeps volumes per bucket); returns
    the bytes of the data parts it held."""
    import boto3

    client = boto3.client("s3", endpoint_url=os.environ["TEST_S3_ENDPOINT"], region_name="us-east-1",
                          aws_access_key_id=os.environ["TEST_S3_ACCESS_KEY"],
                          aws_secret_access_key=os.environ["TEST_S3_SECRET_KEY"])
    size = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=S3_BUCKET, Prefix=prefix):
        objs = page.get("Contents", [])
        size += sum(o["Size"] for o in objs if o["Key"].endswith(".parquet"))
        if objs:
            client.delete_objects(Bucket=S3_BUCKET, Delete={"Objects": [{"Key": o["Key"]} for o in objs]})
    return size


def _rivet_argv(mode: str) -> Callable[[RunCtx], list[str]]:
    def build(ctx: RunCtx) -> list[str]:
        export: dict[str, Any] = {
            "name": "bench", "table": ctx.table, "format": "parquet",
            "destination": (_s3_destination(ctx) if mode == "s3" else
                            {"type": "local", "path": str(ctx.out / "data")}),
        }
        if mode in ("full", "s3", "delta", "iceberg", "sqlalchemy"):
            export["mode"] = "full"
            if mode == "delta":  # the same parts, committed as a Delta table (docs/adr/0009-table-formats.md)
                export["table_format"] = "delta"
                if ctx.table == "orders":  # Delta has no uuid type: the override the gate names
                    export["columns"] = {"ext_id": "text"}
            if mode == "iceberg":  # the same parts added to an Iceberg table (a SQLite catalog beside the config)
                export["table_format"] = "iceberg"
                export["iceberg"] = {"catalog_url": f"sqlite:///{ctx.out / 'cfg' / 'catalog.db'}", "namespace": "bench"}
                if ctx.table == "orders":  # Iceberg v2 has no JSON type: the override the gate names
                    export["columns"] = {"payload": "text"}
        else:
            export.update(mode="chunked", chunk_column="id", chunk_count=CHUNK_COUNT,
                          parallel=2 if mode == "par2" else 1)
        # Tuning profile `fast` (no governor, no statement timeout), like the peers, which
        # never throttle. The default `balanced` profile's governor pauses between batches
        # only when the source is under pressure (docs/config-reference.md; its cost on an
        # idle source: `--scenario governor_oltp`).
        config = {"source": {"type": "postgres" if ctx.engine == "pg" else "mysql",
                             "url_env": "BENCH_SOURCE_URL", "tuning": {"profile": "fast"}},
                  "exports": [export]}
        url = ctx.url
        if mode == "sqlalchemy":  # the generic source (docs/sqlalchemy.md) on the same server
            config["source"]["type"] = "sqlalchemy"
            scheme = "postgresql+psycopg" if ctx.engine == "pg" else "mysql+pymysql"
            url = scheme + url[url.index("://"):]
        cfg_dir = ctx.out / "cfg"
        cfg_dir.mkdir(parents=True, exist_ok=True)
        # JSON is YAML: no yaml dependency needed to write the config.
        (cfg_dir / "rivet.yaml").write_text(json.dumps(config, indent=2))
        ctx.env["BENCH_SOURCE_URL"] = url
        return [str(ROOT / ".venv" / "bin" / "rivet"), "run", "-c", str(cfg_dir / "rivet.yaml"),
                "-e", "bench"]
    return build


READ_PATHS: list[tuple[str, tuple[str, ...]]] = [
    ("binary", ("pg", "mysql")), ("adbc", ("pg",)), ("raw", ("mysql",)),
    ("rows", ("pg", "mysql")),
]


def _rivet_read(path: str) -> Callable[[RunCtx], list[str]]:
    """A full export with the engine's read path pinned to `path`."""
    full = _rivet_argv("full")

    def build(ctx: RunCtx) -> list[str]:
        ctx.env["RIVET_PG_READ_PATH" if ctx.engine == "pg" else "RIVET_MYSQL_READ_PATH"] = path
        return full(ctx)
    return build


def _peer_argv(name: str) -> Callable[[RunCtx], list[str]]:
    def build(ctx: RunCtx) -> list[str]:
        return [str(ctx.python_bench), str(HERE / "peers.py"), "--method", name, "--engine",
                ctx.engine, "--url", ctx.url, "--table", ctx.table, "--out", str(ctx.out)]
    return build


METHODS: list[Method] = [
    Method("floor_server_copy", "floor", ("pg",), "server-side COPY (SELECT *) TO '/dev/null' (no client)",
           lambda c: _pg_psql(c, f"COPY (SELECT * FROM {c.table}) TO '/dev/null'"), writes=False),
    Method("floor_psql_copy", "floor", ("pg",), r"psql \copy (SELECT *) to /dev/null (client floor)",
           lambda c: _pg_psql(c, rf"\copy (SELECT * FROM {c.table}) to '/dev/null'"), writes=False),
    Method("floor_mariadb_client", "floor", ("mysql",), "mariadb --quick -e 'SELECT *' > /dev/null (client floor)",
           lambda c: ["bash", "-c", shlex.join([*_mysql_client_args(c.url), "--quick", "--batch", "-e",
                                                f"SELECT * FROM {c.table}"]) + " > /dev/null"],
           writes=False),
    Method("rivet_full", "rivet", ("pg", "mysql"), "rivet run, mode full, tuning profile fast", _rivet_argv("full")),
    Method("rivet_full_s3", "rivet", ("pg", "mysql"),
           "rivet run, mode full, profile fast, to the S3 server (TEST_S3_ENDPOINT, loopback)",
           _rivet_argv("s3"), writes=False, explicit=True),
    Method("rivet_full_delta", "rivet", ("pg", "mysql"),
           "rivet run, mode full, table_format delta, profile fast", _rivet_argv("delta"), explicit=True),
    Method("rivet_full_iceberg", "rivet", ("pg", "mysql"),
           "rivet run, mode full, table_format iceberg (SQLite catalog), profile fast", _rivet_argv("iceberg"),
           explicit=True),
    Method("rivet_sqlalchemy", "rivet", ("pg", "mysql"),
           "rivet run, mode full, profile fast, source type sqlalchemy (psycopg / PyMySQL through "
           "SQLAlchemy, server-side cursor)", _rivet_argv("sqlalchemy"), explicit=True),
    Method("rivet_chunked_seq", "rivet", ("pg", "mysql"),
           f"rivet run, mode chunked ({CHUNK_COUNT} id windows), parallel 1, profile fast", _rivet_argv("seq")),
    Method("rivet_chunked_par2", "rivet", ("pg", "mysql"),
           f"rivet run, mode chunked ({CHUNK_COUNT} id windows), parallel 2, profile fast", _rivet_argv("par2")),
    # One read path pinned per run (the private RIVET_PG_READ_PATH / RIVET_MYSQL_READ_PATH
    # switches of rivet_core/source/postgres/session.py and mysql/session.py): the evidence
    # for which paths earn their place (docs/benchmarks.md "Read paths").
    *[Method(f"rivet_read_{path}", "rivet", engines,
             f"rivet run, mode full, profile fast, read path pinned to {path}", _rivet_read(path))
      for path, engines in READ_PATHS],
    Method("dlt_pyarrow", "peer", ("pg", "mysql"), "dlt sql_table(backend=pyarrow) → filesystem parquet",
           _peer_argv("dlt_pyarrow")),
    Method("dlt_connectorx", "peer", ("pg", "mysql"), "dlt sql_table(backend=connectorx) → filesystem parquet",
           _peer_argv("dlt_connectorx")),
    Method("pandas_read_sql", "peer", ("pg", "mysql"), "pandas.read_sql(chunksize=100k) → to_parquet per chunk",
           _peer_argv("pandas_read_sql")),
    Method("connectorx", "peer", ("pg", "mysql"), "connectorx.read_sql(arrow) → pq.write_table",
           _peer_argv("connectorx")),
    Method("adbc", "peer", ("pg",), "ADBC fetch_record_batch → ParquetWriter (numeric → decimal128)",
           _peer_argv("adbc")),
]


def baseline_methods(methods: list[Method], baseline: Path) -> list[Method]:
    """`--baseline DIR`: every selected rivet method once more, run with `PYTHONPATH=DIR`
    (another checkout of this repository, e.g. main before a change), named `<name>_base`,
    so a change is measured side by side with the code it replaces in the same run."""

    compile_tree(baseline)  # the baseline runs as installed too (benchmarks/bytecode.py)

    def wrap(build: Callable[[RunCtx], list[str]]) -> Callable[[RunCtx], list[str]]:
        def argv(ctx: RunCtx) -> list[str]:
            ctx.env["PYTHONPATH"] = str(baseline)
            return build(ctx)
        return argv

    return [Method(f"{m.name}_base", m.kind, m.engines, f"{m.label} — baseline code ({baseline})", wrap(m.argv),
                   m.writes, m.explicit) for m in methods if m.kind == "rivet"]


def select_methods(spec: str, no_peers: bool) -> list[Method]:
    """`all`, or a comma list of names, name prefixes or kinds (floor, rivet, peer)."""
    chosen: list[Method] = []
    for token in [t.strip() for t in spec.split(",") if t.strip()] or ["all"]:
        hits = [m for m in METHODS
                if m.name == token
                or (not m.explicit and (token in ("all", m.kind) or m.name.startswith(token)))]
        if not hits:
            raise SystemExit(f"no method matches {token!r}; known: {', '.join(m.name for m in METHODS)}")
        chosen += [m for m in hits if m not in chosen]
    if no_peers:
        chosen = [m for m in chosen if m.kind != "peer"]
    return chosen


# --------------------------------------------------------------------------- servers

def _with_db(url: str, db: str) -> str:
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path="/" + db))


@contextmanager
def servers(args: argparse.Namespace) -> Iterator[dict[str, str]]:
    """Admin URLs per engine: given ones, else private servers from scripts/services.sh."""
    urls = {"pg": args.pg_url or os.environ.get("TEST_PG_DSN", ""),
            "mysql": args.mysql_url or os.environ.get("TEST_MYSQL_DSN", "")}
    missing = [e for e in args.engines if not urls[e]]
    run_dir = None
    try:
        if missing:
            run_dir = tempfile.mkdtemp(prefix="rivet-bench-svc.")
            print(f"[bench] starting private servers in {run_dir} (scripts/services.sh)", flush=True)
            subprocess.run(["bash", str(ROOT / "scripts" / "services.sh"), "start", run_dir], check=True)
            for line in Path(run_dir, "env.sh").read_text().splitlines():
                key, _, value = line.removeprefix("export ").partition("=")
                if key == "TEST_PG_DSN" and not urls["pg"]:
                    urls["pg"] = value
                if key == "TEST_MYSQL_DSN" and not urls["mysql"]:
                    urls["mysql"] = value
        yield urls
    finally:
        if run_dir is not None:
            subprocess.run(["bash", str(ROOT / "scripts" / "services.sh"), "stop", run_dir], check=False)


def connect(engine: str, url: str) -> Any:
    """An autocommit DB-API connection (psycopg / PyMySQL from the project venv)."""
    if engine == "pg":
        import psycopg
        return psycopg.connect(url, autocommit=True)
    import pymysql
    parts = urllib.parse.urlsplit(url)
    return pymysql.connect(host=parts.hostname, port=parts.port or 3306,
                           user=urllib.parse.unquote(parts.username or "root"),
                           password=urllib.parse.unquote(parts.password or ""),
                           database=parts.path.lstrip("/") or None, autocommit=True,
                           charset="utf8mb4")


def server_version(engine: str, url: str) -> str:
    conn = connect(engine, url)
    try:
        cur = conn.cursor()
        cur.execute("SELECT version()")
        return str(cur.fetchone()[0]).split(" on ")[0]
    finally:
        conn.close()


# --------------------------------------------------------------------------- fixture

def _marker(orders: int, narrow: int) -> str:
    return f"rivet-bench fixture v{FIXTURE_VERSION} orders={orders} narrow={narrow}"


def ensure_fixture(engine: str, admin_url: str, orders: int, narrow: int, database: str = BENCH_DB) -> str:
    """Create/refresh the bench database; return its URL. Rebuilt only when stale."""
    want = _marker(orders, narrow)
    conn = connect(engine, admin_url)
    try:
        cur = conn.cursor()
        if engine == "pg":
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
            if cur.fetchone() is None:
                cur.execute(f'CREATE DATABASE "{database}"')
        else:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}` CHARACTER SET utf8mb4")
    finally:
        conn.close()
    url = _with_db(admin_url, database)
    conn = connect(engine, url)
    try:
        cur = conn.cursor()
        if engine == "pg":
            cur.execute("SELECT obj_description(to_regclass('narrow'), 'pg_class')")
        else:
            cur.execute("SELECT TABLE_COMMENT FROM information_schema.TABLES "
                        "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'narrow'")
        row = cur.fetchone()
        if row is not None and row[0] == want:
            return url
        t0 = time.perf_counter()
        print(f"[bench] building the {ENGINE_LABEL[engine]} fixture: {orders:,} orders, "
              f"{narrow:,} narrow rows", flush=True)
        if engine == "pg":
            subprocess.run(["psql", "-X", "-q", url, "-v", f"rows={orders}", "-v",
                            f"narrow_rows={narrow}", "-f", str(HERE / "fixture_pg.sql")],
                           check=True, stdout=subprocess.DEVNULL)
            cur.execute(f"COMMENT ON TABLE narrow IS '{want}'")
        else:
            _build_mysql_fixture(cur, orders, narrow)
            cur.execute(f"ALTER TABLE narrow COMMENT = '{want}'")
        print(f"[bench] fixture built in {time.perf_counter() - t0:.0f} s", flush=True)
        return url
    finally:
        conn.close()


def _build_mysql_fixture(cur: Any, orders: int, narrow: int) -> None:
    text = (HERE / "fixture_mysql.sql").read_text()
    _, create, rest = text.partition("-- {{CREATE}}")
    create, _, rest = rest.partition("-- {{ORDERS}}")
    orders_sql, _, narrow_sql = rest.partition("-- {{NARROW}}")
    cur.execute("SET time_zone = '+00:00'")
    for statement in [s.strip() for s in create.split(";") if s.strip()]:
        cur.execute(statement)
    step = 250_000
    for template, total in ((orders_sql, orders), (narrow_sql, narrow)):
        body = template.strip().rstrip(";")
        for lo in range(1, total + 1, step):
            cur.execute(body.format(lo=lo, hi=min(lo + step - 1, total)))
    cur.execute("ANALYZE TABLE orders, narrow")
    cur.fetchall()


def table_facts(engine: str, url: str, table: str) -> dict[str, Any]:
    """Rows, on-disk size and the correctness checksums of a source table."""
    conn = connect(engine, url)
    try:
        cur = conn.cursor()
        if engine == "pg":
            cur.execute("SELECT pg_total_relation_size(%s)", (table,))
        else:
            cur.execute("SELECT DATA_LENGTH + INDEX_LENGTH FROM information_schema.TABLES "
                        "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s", (table,))
        size = int(cur.fetchone()[0])
        sums = source_checksums(engine, conn, table)
    finally:
        conn.close()
    return {"rows": int(sums["rows"]), "bytes": size, "checksums": sums}


# --------------------------------------------------------------------------- sampling

class ServerSampler:
    """Longest single statement and longest open transaction of the bench database's client
    sessions, sampled every `interval` s from the server's own views (no log settings needed,
    so it works on servers the harness did not start). Resolution: the interval."""

    def __init__(self, engine: str, url: str, interval: float = 0.1) -> None:
        self.engine, self.url, self.interval = engine, url, interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.max_stmt = 0.0
        self.max_xact = 0.0
        self.samples = 0
        self._trx_seen: dict[Any, float] = {}

    def __enter__(self) -> ServerSampler:
        self._conn = connect(self.engine, self.url)
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._conn.close()

    def _loop(self) -> None:
        cur = self._conn.cursor()
        while not self._stop.is_set():
            try:
                self._sample(cur)
                self.samples += 1
            except Exception as exc:  # noqa: BLE001 - a failed sample must not kill the run
                print(f"[bench] sampler: {exc}", file=sys.stderr)
            self._stop.wait(self.interval)

    def _sample(self, cur: Any) -> None:
        if self.engine == "pg":
            cur.execute(
                "SELECT CASE WHEN state = 'active' THEN extract(epoch FROM clock_timestamp() - query_start)"
                " ELSE extract(epoch FROM state_change - query_start) END,"
                " extract(epoch FROM clock_timestamp() - xact_start)"
                " FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
            rows = cur.fetchall()
        else:
            # INNODB_TRX.trx_started has whole-second resolution, so a transaction's length
            # is measured from when the sampler first saw it to when it last saw it. A
            # read-only transaction's trx_id is recycled (it is derived from the reused trx
            # object), so the key includes the connection and the start second, and a key
            # missing from one sample starts over.
            cur.execute(
                "SELECT CASE WHEN p.COMMAND IN ('Query', 'Execute') THEN p.TIME_MS / 1000 END,"
                " p.ID, t.trx_id, t.trx_started"
                " FROM information_schema.PROCESSLIST p"
                " LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID"
                " WHERE p.DB = DATABASE() AND p.ID <> CONNECTION_ID()")
            now = time.monotonic()
            rows = []
            seen: dict[Any, float] = {}
            for stmt, thread_id, trx_id, started in cur.fetchall():
                xact = None
                if trx_id is not None:
                    key = (thread_id, trx_id, started)
                    seen[key] = self._trx_seen.get(key, now)
                    xact = now - seen[key]
                rows.append((stmt, xact))
            self._trx_seen = seen
        for stmt, xact in rows:
            if stmt is not None:
                self.max_stmt = max(self.max_stmt, float(stmt))
            if xact is not None:
                self.max_xact = max(self.max_xact, float(xact))


# --------------------------------------------------------------------------- server CPU

def _proc_cpu_ticks(pid: int) -> tuple[int, int, int]:
    """(own utime+stime, reaped children's cutime+cstime, ppid) of a process, in clock ticks."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]), int(fields[1])


def server_pid(engine: str, url: str) -> int | None:
    """The PostgreSQL postmaster's pid when the server runs on this machine (the parent of
    our backend), else None (MariaDB: not measured)."""
    if engine != "pg":
        return None
    conn = connect(engine, url)
    try:
        backend = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        return _proc_cpu_ticks(backend)[2]
    except (OSError, ValueError):
        return None
    finally:
        conn.close()


def server_cpu_s(postmaster: int | None) -> float | None:
    """CPU seconds the server's process tree has used so far: the postmaster's own time, its
    exited backends' (reaped, or zombies not yet reaped) and its live children's. The
    difference over a run is what the run cost the server (/proc; loopback servers only)."""
    if postmaster is None:
        return None
    try:
        own, reaped, _ = _proc_cpu_ticks(postmaster)
    except OSError:
        return None
    total = own + reaped
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                mine, _, ppid = _proc_cpu_ticks(int(entry))
            except (OSError, ValueError, IndexError):
                continue
            if ppid == postmaster:
                total += mine
    return total / os.sysconf("SC_CLK_TCK")


def listener_pid(endpoint: str) -> int | None:
    """The pid of the process listening on a loopback endpoint's port (`ss -ltnp`), e.g. the
    S3 server of scripts/services.sh; None when it is remote or `ss` cannot tell."""
    parts = urllib.parse.urlsplit(endpoint)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1") or not parts.port:
        return None
    try:
        out = subprocess.run(["ss", "-Hltnp", f"sport = :{parts.port}"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"pid=(\d+)", out)
    return int(found.group(1)) if found else None


def process_cpu_s(pid: int | None) -> float | None:
    """CPU seconds one process (all its threads) has used so far, from /proc."""
    if pid is None:
        return None
    try:
        own, _, _ = _proc_cpu_ticks(pid)
    except (OSError, ValueError, IndexError):
        return None
    return own / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- one run

def data_files(root: Path) -> list[Path]:
    files = [p for p in root.rglob("*") if p.suffix in (".parquet", ".csv")]
    return sorted(p for p in files if "_dlt" not in str(p.relative_to(root)) and not p.name.startswith("."))


def run_one(method: Method, engine: str, table: str, url: str, args: argparse.Namespace,
            facts: dict[str, Any], rep: int, verify: bool) -> dict[str, Any]:
    out = args.work / f"{engine}-{table}-{method.name}-r{rep}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    ctx = RunCtx(engine, table, url, out, args.python_bench)
    argv = method.argv(ctx)
    time_file = out / "time.txt"
    argv = ["/usr/bin/time", "-f", "%M %U %S", "-o", str(time_file), *argv]
    env = dict(os.environ, RUNTIME__DLTHUB_TELEMETRY="false", PYTHONUNBUFFERED="1", **ctx.env)
    log_path = out / "run.log"
    rec: dict[str, Any] = {"engine": engine, "table": table, "method": method.name,
                           "kind": method.kind, "rep": rep, "load1": os.getloadavg()[0]}
    postmaster = getattr(args, "server_pids", {}).get(engine)
    # The S3 server shares the machine's cores with the export: its CPU is part of the cost.
    store = listener_pid(os.environ.get("TEST_S3_ENDPOINT", "")) if "_s3" in method.name else None
    with ServerSampler(engine, url, args.sample_interval) as sampler, open(log_path, "wb") as log:
        cpu0 = server_cpu_s(postmaster)
        store0 = process_cpu_s(store)
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=out,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # our own child's process group only
            rc = proc.wait()
            rec["timed_out"] = True
        except BaseException:  # interrupted: never leave the measured process running
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        wall = time.perf_counter() - t0
        cpu1 = server_cpu_s(postmaster)
        store1 = process_cpu_s(store)
    if cpu0 is not None and cpu1 is not None:
        rec["server_cpu_s"] = round(cpu1 - cpu0, 2)
    if store0 is not None and store1 is not None:
        rec["store_cpu_s"] = round(store1 - store0, 2)
    rec.update(rc=rc, wall_s=round(wall, 3), max_stmt_s=round(sampler.max_stmt, 2),
               max_xact_s=round(sampler.max_xact, 2), samples=sampler.samples)
    try:
        maxrss_kb, user, system = time_file.read_text().split()[-3:]
        rec.update(peak_rss_mb=round(int(maxrss_kb) / 1024, 1), cpu_s=round(float(user) + float(system), 2))
    except (OSError, ValueError):
        rec["peak_rss_mb"] = None
    if method.name.startswith("rivet_full_s3"):
        rec["output_bytes"] = remove_s3_prefix(s3_prefix(out))
    if rc != 0:
        rec["error"] = log_path.read_text(errors="replace")[-600:]
    elif method.writes:
        files = data_files(out)
        rec["files"] = len(files)
        rec["output_bytes"] = sum(f.stat().st_size for f in files)
        if verify:
            got = file_checksums(files, table)
            rec["mismatch"] = compare(facts["checksums"], got)
            rec["verified"] = not rec["mismatch"]
            if rec["mismatch"]:
                rec["mismatch_detail"] = {k: {"want": facts["checksums"][k], "got": got.get(k)}
                                          for k in rec["mismatch"]}
    if not args.keep_output:
        shutil.rmtree(out, ignore_errors=True)
    return rec


# --------------------------------------------------------------------------- bench venv

def ensure_bench_venv(path: Path) -> Path:
    """`.venv-bench` with benchmarks/requirements.txt (uv); reinstalled when the file changes."""
    req = HERE / "requirements.txt"
    stamp = path / ".requirements.sha256"
    digest = hashlib.sha256(req.read_bytes()).hexdigest()
    python = path / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return python
    uv = ROOT / ".venv" / "bin" / "uv"
    print(f"[bench] installing the peer libraries into {path} (uv)", flush=True)
    subprocess.run([str(uv), "venv", "-q", "--allow-existing", str(path), "--python",
                    sys.executable], check=True)
    subprocess.run([str(uv), "pip", "install", "-q", "--python", str(python), "-r", str(req)], check=True)
    stamp.write_text(digest)
    return python


def peer_versions(python: Path) -> dict[str, str]:
    code = ("import importlib.metadata as m, json; print(json.dumps({n: m.version(n) for n in "
            "['dlt', 'connectorx', 'adbc-driver-postgresql', 'pandas', 'pyarrow', 'SQLAlchemy', "
            "'psycopg2-binary', 'PyMySQL']}))")
    try:
        return json.loads(subprocess.run([str(python), "-c", code], check=True, capture_output=True,
                                         text=True).stdout)
    except (OSError, subprocess.CalledProcessError, json.JSONDecodeError):
        return {}


# --------------------------------------------------------------------------- main

def machine_facts() -> dict[str, Any]:
    model = ""
    mem = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                     if line.startswith("model name"))
        mem = next(line.split(":", 1)[1].strip() for line in open("/proc/meminfo")
                   if line.startswith("MemTotal"))
    except (OSError, StopIteration):
        pass
    from importlib.metadata import version
    return {"cpus": os.cpu_count(), "cpu_model": model, "mem": mem, "kernel": platform.release(),
            "python": platform.python_version(), "pyarrow": version("pyarrow"),
            "psycopg": version("psycopg"), "pymysql": version("PyMySQL")}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="pg,mysql", help="pg, mysql or both (default)")
    ap.add_argument("--tables", default="orders,narrow", help="orders, narrow or both (default)")
    ap.add_argument("--methods", default="all",
                    help="comma list of names, prefixes or kinds: floor, rivet, peer (default all)")
    ap.add_argument("--no-peers", action="store_true", help="skip the peer libraries (no .venv-bench)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiplies the default sizes (5 M orders, 10 M narrow)")
    ap.add_argument("--rows", type=int, default=None, help="orders rows (overrides --scale)")
    ap.add_argument("--narrow-rows", type=int, default=None, help="narrow rows (default 2 × orders)")
    ap.add_argument("--repeat", type=int, default=3, help="measured rounds (median reported)")
    ap.add_argument("--slow-repeat", type=int, default=None,
                    help=f"rounds for the slow peers ({', '.join(sorted(SLOW_METHODS))}; "
                         "default: --repeat) — at full scale one of their runs takes minutes")
    ap.add_argument("--warmup", type=int, default=1, help="unrecorded client-floor runs per table")
    ap.add_argument("--pg-url", default="", help="admin URL (default TEST_PG_DSN, else a private server)")
    ap.add_argument("--mysql-url", default="", help="admin URL (default TEST_MYSQL_DSN, else private)")
    ap.add_argument("--database", default=BENCH_DB, help=f"bench database (default {BENCH_DB})")
    ap.add_argument("--output", type=Path, default=ROOT / "docs" / "benchmarks.md")
    ap.add_argument("--results", type=Path, default=None, help="runs.jsonl directory (default: benchmarks/results)")
    ap.add_argument("--work", type=Path, default=None, help="scratch dir for outputs (default: temp)")
    ap.add_argument("--bench-venv", type=Path, default=ROOT / ".venv-bench")
    ap.add_argument("--timeout", type=float, default=3600, help="per run, seconds")
    ap.add_argument("--sample-interval", type=float, default=0.1)
    ap.add_argument("--verify", choices=("first", "all", "none"), default="first",
                    help="checksum the outputs of the first round (default), every round, or none")
    ap.add_argument("--keep-output", action="store_true")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another checkout: also run every rivet method with PYTHONPATH=BASELINE "
                         "(`<name>_base`), side by side in the same rounds")
    args = ap.parse_args(argv)
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    args.tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    orders = args.rows if args.rows is not None else int(DEFAULT_ORDERS * args.scale)
    args.orders_rows = max(orders, 1)
    args.narrow_rows = args.narrow_rows if args.narrow_rows is not None else 2 * args.orders_rows
    return args


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through run_one, which kills its child


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if on_main_thread else None
    try:
        return _run(args, argv)
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace, argv: list[str] | None) -> int:
    methods = select_methods(args.methods, args.no_peers)
    if args.baseline is not None:
        methods += baseline_methods(methods, args.baseline.resolve())
    command = bench_command(argv if argv is not None else sys.argv[1:])
    tmp = None
    if args.work is None:
        tmp = tempfile.mkdtemp(prefix="rivet-bench.")
        args.work = Path(tmp)
    args.work.mkdir(parents=True, exist_ok=True)
    results_dir = args.results or HERE / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    runs_path = results_dir / "runs.jsonl"
    args.python_bench = Path(sys.executable)
    peer_libs: dict[str, str] = {}
    if any(m.kind == "peer" for m in methods):
        args.python_bench = ensure_bench_venv(args.bench_venv)
        peer_libs = peer_versions(args.python_bench)
    env_facts: dict[str, Any] = {"started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                                 "machine": machine_facts(), "peer_libs": peer_libs,
                                 "command": command, "load_start": os.getloadavg(), "sources": {}}
    records: list[dict[str, Any]] = []
    try:
        with servers(args) as admin_urls, open(runs_path, "w") as runs:
            for engine in args.engines:
                url = ensure_fixture(engine, admin_urls[engine], args.orders_rows, args.narrow_rows,
                                     args.database)
                env_facts["sources"][engine] = {"version": server_version(engine, url), "tables": {}}
                args.server_pids = {**getattr(args, "server_pids", {}), engine: server_pid(engine, url)}
                for table in args.tables:
                    facts = table_facts(engine, url, table)
                    env_facts["sources"][engine]["tables"][table] = {
                        k: v for k, v in facts.items() if k != "checksums"}
                    todo = [m for m in methods if engine in m.engines]
                    floor = next((m for m in METHODS if m.name == CLIENT_FLOOR[engine]), None)
                    for _ in range(args.warmup if floor else 0):
                        run_one(floor, engine, table, url, args, facts, -1, verify=False)
                    for rep in range(args.repeat):
                        k = rep % max(len(todo), 1)
                        for method in todo[k:] + todo[:k]:  # rotated: nobody always runs first
                            if method.name in SLOW_METHODS and rep >= slow_repeat(args):
                                continue
                            verify = args.verify == "all" or (args.verify == "first" and rep == 0)
                            rec = run_one(method, engine, table, url, args, facts, rep, verify)
                            records.append(rec)
                            runs.write(json.dumps(rec) + "\n")
                            runs.flush()
                            print(_progress_line(rec), flush=True)
    finally:
        if tmp is not None and not args.keep_output:
            shutil.rmtree(tmp, ignore_errors=True)
    env_facts["load_end"] = os.getloadavg()
    (results_dir / "env.json").write_text(json.dumps(env_facts, indent=2, default=str))
    write_report(args.output, env_facts, records, methods, args, catalog=METHODS)
    print(f"[bench] wrote {args.output} ({len(records)} runs; raw runs in {runs_path})", flush=True)
    failed = [r for r in records if r.get("rc") != 0 or r.get("verified") is False]
    return 1 if any(r["kind"] == "rivet" for r in failed) else 0


def bench_command(argv: Sequence[str]) -> str:
    """The command line as recorded in docs/benchmarks.md, passwords in URLs masked."""
    from rivet_core.redact import redact_secrets

    return redact_secrets("python -m benchmarks " + shlex.join(argv))


def _progress_line(rec: dict[str, Any]) -> str:
    check = {True: "ok", False: f"MISMATCH {rec.get('mismatch')}", None: "-"}[rec.get("verified")]
    return (f"[bench] {rec['engine']:5s} {rec['table']:6s} r{rec['rep']} {rec['method']:22s} "
            f"rc={rec['rc']} wall={rec['wall_s']:8.2f}s rss={rec.get('peak_rss_mb') or 0:7.0f}MB "
            f"stmt={rec['max_stmt_s']}s xact={rec['max_xact_s']}s check={check}")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")
